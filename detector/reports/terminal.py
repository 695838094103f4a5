"""Terminal report: the comparison header, a table per query, one line per finding."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from detector.model import ComparisonResult, Severity, Side, Verdict

SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
VERDICT_STYLE = {
    Verdict.REGRESSED: "bold red",
    Verdict.IMPROVED: "green",
    Verdict.UNCHANGED: "dim",
    Verdict.INCONCLUSIVE: "yellow",
}


def version_text(num: int | None) -> str:
    if num is None:
        return "?"
    major, minor = divmod(num, 10000)
    return f"{major}.{minor}"


def census(side: Side) -> str:
    """`BitmapHeapScan(sbtest1) ... 18/20` per plan shape, most frequent first."""
    total = side.samples
    return "\n".join(f"{p.signature}  [{p.samples}/{total}]" for p in side.plans)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render_terminal(result: ComparisonResult, console: Console, *, verbose: bool = False) -> None:
    base_v, cand_v = result.versions
    console.print(
        f"[bold]planshift compare[/]: baseline [bold]{result.baseline}[/] (PostgreSQL "
        f"{version_text(base_v)}) vs candidate [bold]{result.candidate}[/] (PostgreSQL "
        f"{version_text(cand_v)}), run {', '.join(map(str, result.run_ids))}"
    )
    if result.settings_diff:
        diffs = ", ".join(
            f"{name} {left} -> {right}" for name, (left, right) in sorted(result.settings_diff.items())
        )
        console.print(f"settings that differ: {diffs}")
    table = Table(show_lines=True, title="queries", title_justify="left")
    for column in ("query", "baseline plans", "candidate plans", "median ms", "p90 ms", "timing"):
        table.add_column(column, overflow="fold")
    for query in result.queries:
        if not verbose and not query.plan_changed and query.timing.verdict == Verdict.UNCHANGED:
            continue
        base, cand = query.baseline.timing, query.candidate.timing
        table.add_row(
            query.label,
            census(query.baseline),
            census(query.candidate),
            f"{_ms(base and base.median_ms)} -> {_ms(cand and cand.median_ms)}",
            f"{_ms(base and base.p90_ms)} -> {_ms(cand and cand.p90_ms)}",
            Text(
                f"{query.timing.verdict.value}\n{query.timing.describe()}",
                style=VERDICT_STYLE[query.timing.verdict],
            ),
        )
    if table.row_count:
        console.print(table)
    hidden = len(result.queries) - table.row_count
    if hidden:
        console.print(f"({hidden} queries with the same plan and unchanged timing not shown; -v shows them)")
    if result.findings:
        console.print(f"[bold]findings[/] ({len(result.findings)}):")
    for finding in result.findings:
        line = Text()
        line.append(f"{finding.severity.value:<7} ", style=SEVERITY_STYLE[finding.severity])
        line.append(f"{finding.code} {finding.name} ", style="bold")
        line.append(f"{finding.query_name}: ")
        line.append(finding.message)
        console.print(line)
    counts = result.verdict_counts()
    verdicts = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    console.print(
        f"{len(result.queries)} queries compared ({verdicts or 'none'}); "
        f"{len(result.findings)} findings"
        + (f", worst: {result.worst_severity()}" if result.findings else "")
    )
