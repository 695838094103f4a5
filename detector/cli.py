"""The `planshift` command: thin wiring of collectors, store, compare and reports."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text
from typer.core import TyperGroup

from detector.errors import PlanshiftError


class _Commands(TyperGroup):
    """Every PlanshiftError a command lets through (rule config included) becomes exit 2."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except PlanshiftError as exc:
            fail(exc.message, exc.hint)


app = typer.Typer(
    cls=_Commands,
    name="planshift",
    help="Find PostgreSQL plan regressions across versions and settings before users do.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(highlight=False, soft_wrap=False)
err = Console(stderr=True, highlight=False)
# progress lines of jobs quote workload, query and target names: printed as they are
progress = Console(stderr=True, highlight=False, markup=False)

StoreOption = Annotated[
    Path, typer.Option("--store", "-s", help="DuckDB file holding runs and observations.")
]
DEFAULT_STORE = Path("planshift.duckdb")
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config", help="planshift.toml (default: found in . or its parents, or pyproject.toml)."
    ),
]
FORMATS = ("terminal", "json")


def plain(value: object) -> Text:
    """User text (names, labels, paths) for a table cell: never read as markup."""
    return Text(str(value))


def fail(message: str, hint: str | None = None) -> NoReturn:
    # messages quote user input and `planshift[pg17,pg18]`: never read them as rich markup
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    if hint:
        err.print(f"[bold]hint:[/] {escape(hint)}", highlight=False)
    raise typer.Exit(2)


@contextmanager
def user_errors() -> Iterator[None]:
    try:
        yield
    except PlanshiftError as exc:
        fail(exc.message, exc.hint)
    except KeyboardInterrupt:
        err.print("interrupted: embedded clusters stopped, the run is marked failed")
        raise typer.Exit(130) from None


@app.command()
def servers(
    pg_bin: Annotated[
        list[Path] | None, typer.Option("--pg-bin", help="Also consider this bin directory.")
    ] = None,
) -> None:
    """List the PostgreSQL installations planshift can start embedded clusters from."""
    from rich.table import Table

    from collectors.installations import discover

    with user_errors():
        found = discover(pg_bin or [])
    if not found:
        fail(
            "no PostgreSQL installation found",
            "apt-get install postgresql-15, or pip install 'planshift[pg17,pg18]'",
        )
    table = Table(
        "name", "version", "origin", "auto_explain", "pg_stat_statements", "bin directory"
    )
    for inst in found:
        table.add_row(
            inst.name,
            inst.version,
            inst.origin,
            "yes" if inst.has_auto_explain else "no",
            "yes" if inst.has_pg_stat_statements else "no",
            str(inst.bindir),
        )
    out.print(table)


@app.command()
def run(
    workload: Annotated[Path, typer.Argument(help="Workload file (TOML).")],
    target: Annotated[
        list[str] | None,
        typer.Option(
            "--target",
            "-t",
            help="Target: a workload target name, a version (pg15, pg17, pg18) or a --dsn name. Repeatable.",
        ),
    ] = None,
    dsn: Annotated[
        list[str] | None, typer.Option("--dsn", help="NAME=DSN of an existing server. Repeatable.")
    ] = None,
    store: StoreOption = DEFAULT_STORE,
    repetitions: Annotated[
        int | None, typer.Option(help="Measured executions per query and side.")
    ] = None,
    warmup: Annotated[int | None, typer.Option(help="Unmeasured executions first.")] = None,
    label: Annotated[str, typer.Option(help="Label stored with the run.")] = "",
    query: Annotated[
        list[str] | None, typer.Option("--query", "-q", help="Only this query. Repeatable.")
    ] = None,
    variant: Annotated[
        list[str] | None, typer.Option("--variant", help="Only this variant. Repeatable.")
    ] = None,
    keep: Annotated[
        bool, typer.Option(help="Keep embedded clusters' directories after the run.")
    ] = False,
    pg_bin: Annotated[
        list[Path] | None, typer.Option("--pg-bin", help="PostgreSQL bin directory to use.")
    ] = None,
    setup: Annotated[
        bool,
        typer.Option(
            "--setup",
            help="Also run the workload's [setup] SQL on --dsn servers (default: only check "
            "that the tables it creates exist).",
        ),
    ] = False,
) -> None:
    """Run a workload on every target x variant and store every execution."""
    from detector.jobs import execute_run

    with user_errors():
        run_id = execute_run(
            workload_path=workload,
            store_path=store,
            targets=target or [],
            dsns=dsn or [],
            repetitions=repetitions,
            warmup=warmup,
            label=label,
            queries=query or [],
            keep=keep,
            pg_bins=pg_bin or [],
            console=progress,
            only_variants=variant or [],
            setup_on_dsn=setup,
        )
    out.print(f"run {run_id} stored in {store}", markup=False)


@app.command()
def compare(
    baseline: Annotated[
        str, typer.Option("--baseline", "-b", help="Baseline side: NAME or NAME@RUN.")
    ],
    candidate: Annotated[
        str, typer.Option("--candidate", "-c", help="Candidate side: NAME or NAME@RUN.")
    ],
    store: StoreOption = DEFAULT_STORE,
    run_id: Annotated[
        int | None, typer.Option("--run", help="Run id (default: the latest complete run).")
    ] = None,
    output_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            help="terminal (default), json, markdown, junit, github or html.",
        ),
    ] = None,
    output: Annotated[
        list[str] | None,
        typer.Option(
            "--output",
            "-o",
            help="Write a report to FILE (format from --format, else from the extension: .json .md "
            ".xml .html .txt), FORMAT:FILE, or - for stdout. Repeatable.",
        ),
    ] = None,
    fail_on: Annotated[
        str | None,
        typer.Option(
            help="Exit 1 when a finding reaches this severity: info, warning, error (default), never."
        ),
    ] = None,
    min_effect: Annotated[
        float | None, typer.Option(help="Smallest timing change that counts (default 0.10 = 10%).")
    ] = None,
    min_delta_ms: Annotated[
        float | None,
        typer.Option(help="Smallest change of the median that counts, in ms (default 0.01)."),
    ] = None,
    select: Annotated[
        list[str] | None,
        typer.Option(
            help="Only these rules: codes, prefixes (PS1), names or families. Repeatable."
        ),
    ] = None,
    ignore: Annotated[
        list[str] | None, typer.Option(help="Skip these rules (as --select). Repeatable.")
    ] = None,
    rule_option: Annotated[
        list[str] | None,
        typer.Option(
            "--rule-option", help="RULE.OPTION=VALUE, e.g. PS101.near_tie=0.03. Repeatable."
        ),
    ] = None,
    approved: Annotated[
        Path | None,
        typer.Option(help="Approved-plans file (planshift approve): flag plans not in it (PS600)."),
    ] = None,
    noise: Annotated[
        str,
        typer.Option(
            help="A/A noise floors: auto (latest `planshift noise` run), off, or a run id."
        ),
    ] = "auto",
    config: ConfigOption = None,
    query: Annotated[str | None, typer.Option("--query", "-q", help="Only this query.")] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show unchanged queries too.")
    ] = False,
    save: Annotated[
        bool, typer.Option("--save", help="Keep the comparison and its findings in the store.")
    ] = False,
) -> None:
    """Compare two sides query by query; exit 1 when findings reach --fail-on."""
    from detector.config import load_config
    from detector.gate import compare_options
    from detector.jobs import compare_and_report

    with user_errors():
        settings = load_config(config)
        options = compare_options(
            settings,
            min_effect=min_effect,
            select=select,
            ignore=ignore,
            approved=approved,
            noise=noise,
            rule_options=rule_option or [],
            query=query,
            min_delta_ms=min_delta_ms,
        )
        worst = compare_and_report(
            store_path=store
            if store != DEFAULT_STORE or settings.store is None
            else settings.store,
            baseline=baseline,
            candidate=candidate,
            run_id=run_id,
            output_format=output_format,
            outputs=output or [],
            fail_on=fail_on or settings.fail_on,
            options=options,
            verbose=verbose,
            console=out,
            save=save,
        )
        exit_code = failing(worst, fail_on or settings.fail_on)
    raise typer.Exit(exit_code)


def failing(worst: str | None, fail_on: str) -> int:
    from detector.model import Severity
    from detector.reports import gate_severity

    gate = gate_severity(fail_on)
    return 1 if gate is not None and worst is not None and Severity(worst).rank >= gate.rank else 0


@app.command()
def runs(store: StoreOption = DEFAULT_STORE) -> None:
    """List the runs in the store with their targets."""
    from rich.table import Table

    from detector.store import Store

    with user_errors(), Store(store, read_only=True) as db:
        table = Table("run", "label", "started", "status", "targets")
        targets = db.targets()
        notes = []
        for record in db.runs():
            names = ", ".join(t.name for t in targets if t.run_id == record.run_id)
            table.add_row(
                str(record.run_id),
                plain(record.label),
                str(record.started_at)[:19],
                record.status,
                plain(names),
            )
            if record.note:
                notes.append(f"run {record.run_id}: {record.note}")
    out.print(table)
    for note in notes:
        out.print(note, markup=False)


@app.command()
def rules(code: Annotated[str | None, typer.Argument(help="Rule code or name.")] = None) -> None:
    """List the rule catalog, or print one rule's documentation."""
    from rich.table import Table

    from rules import all_rules, get_rule

    if code is None:
        table = Table("code", "name", "severity", "summary")
        for rule in all_rules():
            table.add_row(rule.code, rule.name, rule.severity.value, rule.summary)
        out.print(table)
        return
    try:
        rule = get_rule(code)
    except PlanshiftError as exc:
        fail(exc.message, exc.hint or "`planshift rules` lists the catalog")
    out.print(
        f"[bold]{rule.code} {rule.name}[/] (family {rule.family}, default severity {rule.severity.value})"
    )
    out.print(rule.doc, markup=False)
    if rule.options:
        out.print(
            "options: " + ", ".join(f"{k} = {v!r}" for k, v in rule.options.items()), markup=False
        )


@app.command()
def census(
    store: StoreOption = DEFAULT_STORE,
    run_id: Annotated[
        int | None, typer.Option("--run", help="Run id (default: the latest complete run).")
    ] = None,
    query: Annotated[str | None, typer.Option("--query", "-q", help="Only this query.")] = None,
    target: Annotated[
        list[str] | None, typer.Option("--target", "-t", help="Only these targets. Repeatable.")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Also write an HTML heat map (self-contained)."),
    ] = None,
    output_format: Annotated[
        str, typer.Option("--format", "-f", help="terminal (default) or json.")
    ] = "terminal",
) -> None:
    """Plan-shape census: samples per plan shape for every target and sweep point, and switch points."""
    from detector.jobs import census_from_store
    from detector.reports.census_json import render_census_json
    from detector.reports.census_terminal import render_census

    with user_errors():
        if output_format not in ("terminal", "json"):
            raise PlanshiftError(
                f"unknown format {output_format!r}", "use --format terminal or json"
            )
        censuses = census_from_store(store, run_id, query, target or [])
    if output_format == "json":
        out.out(render_census_json(censuses), end="", highlight=False)
    else:
        render_census(censuses, out)
    if output is not None:
        from detector.reports.census_html import render_census_html

        output.write_text(render_census_html(censuses))
        err.print(f"heat map written to {output}", markup=False)


@app.command()
def demo(
    store: StoreOption = Path("planshift-demo.duckdb"),
    workload: Annotated[
        Path | None, typer.Option(help="Workload (default: examples/demo/workload.toml).")
    ] = None,
    repetitions: Annotated[
        int | None, typer.Option(help="Measured executions per query and side.")
    ] = None,
) -> None:
    """Start an embedded PostgreSQL, run the demo workload under two GUC variants, compare them."""
    from detector.jobs import run_demo

    with user_errors():
        run_demo(
            store_path=store,
            workload=workload,
            repetitions=repetitions,
            console=out,
            progress_console=progress,
        )


# the other command groups register themselves on `app` when imported
from detector import cli_gate, cli_postmortem  # noqa: E402, F401


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    try:
        app(prog_name="planshift")
    except PlanshiftError as exc:
        try:
            fail(exc.message, exc.hint)
        except typer.Exit as done:
            sys.exit(done.exit_code)
    except KeyboardInterrupt:
        err.print("interrupted: embedded clusters stopped")
        sys.exit(130)
