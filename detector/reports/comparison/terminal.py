"""Terminal report: what was compared, one block per query (a table of each side's plan shapes),
findings."""

from __future__ import annotations

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from detector.engine.census import comparison_switches
from detector.engine.comparison.plan_mix import mix_text
from detector.model import ComparisonResult, QueryComparison, Severity, Verdict
from detector.model.units import counted, fmt_ms, fmt_version
from detector.reports import tables
from detector.reports.common import (
    by_importance,
    condition_lines,
    is_quiet,
    method_lines,
    not_compared_reason,
    production_lines,
    settings_text,
)
from detector.reports.comparison.notes import data_lines, failed_errors
from detector.reports.escape import for_markup, single_line
from detector.reports.timeline.terminal import event_lines

SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
VERDICT_STYLE = {
    Verdict.REGRESSED: "bold red",
    Verdict.IMPROVED: "green",
    Verdict.UNCHANGED: "dim",
    Verdict.INCONCLUSIVE: "yellow",
}


def census_table(query: QueryComparison) -> Padding:
    """Each side's plan shapes, one row each (the dominant one in bold): executions, median
    duration and shared buffers, the shape."""
    rows = []
    for side in (query.baseline, query.candidate):
        for plan in side.plans:
            shape = Text(single_line(plan.signature), style="bold" if plan is side.dominant else "")
            buffers = (
                None if plan.median_shared_blocks is None else f"{plan.median_shared_blocks:.0f}"
            )
            rows.append((side.label, f"{plan.samples}/{side.samples}", fmt_ms(plan.median_ms),
                         buffers, shape))  # fmt: skip
    header = ("side", "executions", "median ms", "shared buffers", "plan")
    return Padding(tables.table(header, rows, numeric=(1, 2, 3)), (0, 0, 0, 2), expand=False)


def query_block(query: QueryComparison, console: Console) -> None:
    head = Text()
    head.append(single_line(query.label), style="bold")
    head.append("  ")
    mix = mix_text(query)
    verdict = query.timing.verdict
    timing = "timing unchanged" if mix and verdict is Verdict.UNCHANGED else verdict.value
    head.append(timing, style=VERDICT_STYLE[verdict])
    head.append(f"  {query.timing.describe()}")
    console.print(head, soft_wrap=True)
    if mix:
        console.print(f"  {single_line(mix)}", style="yellow", markup=False, soft_wrap=True)
    base, cand = query.baseline.timing, query.candidate.timing
    if base and cand:
        console.print(
            f"  median {fmt_ms(base.median_ms)} -> {fmt_ms(cand.median_ms)} ms, "
            f"p90 {fmt_ms(base.p90_ms)} -> {fmt_ms(cand.p90_ms)} ms, "
            f"p99 {fmt_ms(base.p99_ms)} -> {fmt_ms(cand.p99_ms)} ms"
        )
    calls = query.candidate.calls or query.baseline.calls
    if calls:
        impact = query.impact_ms
        change = "" if impact is None else f", {impact:+.1f} ms over those calls"
        console.print(f"  production: {calls} calls{change}", markup=False)
    console.print(census_table(query))


def failed_block(query: QueryComparison, console: Console) -> None:
    """A query not compared because no execution of it worked on a side: where it worked, and
    PostgreSQL's error where it did not (its PS700 finding says more)."""
    head = Text()
    head.append(single_line(query.label), style="bold")
    head.append("  ")
    head.append("not compared", style="bold red")
    head.append(f"  {not_compared_reason(query)}")
    console.print(head, soft_wrap=True)
    if query.baseline.plans or query.candidate.plans:
        console.print(census_table(query))  # where it worked
    for side, text in failed_errors(query):
        console.print(single_line(f"  {side}: {text}"), markup=False, soft_wrap=True)


def render_terminal(result: ComparisonResult, console: Console, *, verbose: bool = False) -> None:
    base_v, cand_v = result.versions
    console.print(
        f"[bold]planshift compare[/]: baseline [bold]{for_markup(result.baseline)}[/] (PostgreSQL "
        f"{fmt_version(base_v)}) vs candidate [bold]{for_markup(result.candidate)}[/] (PostgreSQL "
        f"{fmt_version(cand_v)}), run {', '.join(map(str, result.run_ids))}",
        soft_wrap=True,
    )
    if result.settings_diff:
        diffs = ", ".join(settings_text(result))
        console.print(f"settings that differ: {for_markup(diffs)}", soft_wrap=True)
    for text in event_lines(result.events):  # two time windows of a log
        console.print(text, markup=False, highlight=False, soft_wrap=True)
    for fact in data_lines(result):
        console.print(single_line(fact), markup=False, soft_wrap=True)
    for note in [*condition_lines(result), *production_lines(result), *method_lines(result)]:
        caveat = note.startswith("build: the sides differ")
        console.print(note, markup=False, style="yellow" if caveat else "dim", soft_wrap=True)
    shown = 0
    # a captured workload (production calls known): what costs production most first
    weighted = any(q.baseline.calls or q.candidate.calls for q in result.queries)
    order = by_importance(result) if weighted else range(len(result.queries))
    if weighted:
        console.print("queries by workload impact: |median change| x production calls", style="dim")
    for query in (result.queries[i] for i in order):
        if is_quiet(query) and not verbose:
            continue
        console.print()
        query_block(query, console)
        shown += 1
    for query in result.failed:
        console.print()
        failed_block(query, console)
    switches = comparison_switches(result.queries)
    if any(switches.values()):
        console.print("\n[bold]plan switch points[/] (dominant plan per sweep point):")
        for name, found in switches.items():
            for switch in found:
                moved = f"{switch.describe()}: {switch.from_signature} -> {switch.to_signature}"
                console.print(single_line(f"  {name}: {moved}"), markup=False, soft_wrap=True)
    hidden = len(result.queries) - shown
    if hidden:
        kept = "query kept its plan and was" if hidden == 1 else "queries kept their plan and were"
        console.print(f"\n({hidden} {kept} measured unchanged; -v shows them)")
    if result.findings:
        console.print(f"\n[bold]findings[/] ({len(result.findings)}):")
    for finding in result.findings:
        line = Text()
        line.append(f"{finding.severity.value:<7} ", style=SEVERITY_STYLE[finding.severity])
        line.append(f"{finding.code} {finding.name} ", style="bold")
        where = f"{finding.query_name} [{finding.point}]" if finding.point else finding.query_name
        line.append(single_line(f"{where}: {finding.message}"))
        console.print(line, soft_wrap=True)
    for finding, reason in result.suppressed:
        text = f"suppressed {finding.code} {finding.name} {finding.query_name}: {reason}"
        console.print(single_line(text), style="dim", markup=False, soft_wrap=True)
    if result.noise_run is not None:
        console.print(f"noise floors from A/A run {result.noise_run}", style="dim")
    counts = result.verdict_counts()
    verdicts = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    worst = result.worst_severity()
    swept = any(q.point for q in result.queries)
    compared = (
        counted(len(result.queries), "query x sweep point comparison")
        if swept
        else counted(len(result.queries), "query", "queries") + " compared"
    )
    failed = len(result.failed)
    not_compared = f"{failed} not compared (failed on a side); " if failed else ""
    console.print(
        f"\n{compared} ({verdicts or 'none'}); {not_compared}"
        f"{counted(len(result.findings), 'finding')}" + (f", worst: {worst}" if worst else "")
    )
