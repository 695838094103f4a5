"""The jobs behind the CLI commands: run a workload, compare and report, the demo."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from collectors.runner import RunOptions, plan_count, run_workload
from collectors.server_setup import (
    check_setup_consent,
    describe_setup,
    setup_consent,
    setup_plan,
)
from collectors.server_state import warning_lines
from collectors.servers.targets import open_servers, parse_dsn_option, resolve_target_specs
from detector.engine.census import QueryCensus, build_census
from detector.engine.comparison.compare import resolve_side
from detector.engine.comparison.options import CompareOptions
from detector.engine.comparison.store_compare import compare
from detector.errors import PlanshiftError
from detector.jobs.progress import progress_bar
from detector.jobs.servers import mixed_builds_note
from detector.jobs.workload import load_workload
from detector.model import ComparisonResult
from detector.model.failures import failed_queries_text
from detector.model.identity import workload_query_key
from detector.model.workload import (
    CACHE_MODES,
    MAX_REPETITIONS,
    MAX_WARMUP,
    Workload,
    check_count,
)
from detector.reports import OutputSpec, gate_severity, resolve_outputs, write_reports
from detector.reports.common import verdict_summary
from detector.reports.escape import single_line
from detector.reports.terminal import render_terminal
from detector.store import Store

log = logging.getLogger(__name__)

# the rejected plan of a flip, timed on the candidate: at most this share of the time the
# query point's measurement took (collectors/counterfactual.py)
DEFAULT_COUNTERFACTUAL_BUDGET = "25%"
# a symlink to examples/demo/workload.toml in a checkout, the file itself in a wheel
DEMO_WORKLOAD = Path(__file__).resolve().parent / "demo_workload.toml"


def execute_run(
    *,
    workload_path: Path,
    store_path: Path,
    targets: Sequence[str],
    dsns: Sequence[str],
    repetitions: int | None,
    warmup: int | None,
    label: str,
    queries: Sequence[str],
    keep: bool,
    pg_bins: Sequence[Path],
    console: Console,
    variants: Mapping[str, Mapping[str, str]] | None = None,
    only_variants: Sequence[str] = (),
    setup_on_dsn: bool = False,
    cache: str | None = None,
    plan_only: bool = False,
    kind: str = "run",
    counterfactual_budget: str = DEFAULT_COUNTERFACTUAL_BUDGET,
    counterfactual_both: bool = False,
    max_load: float | None = None,
    max_wait: float = 300.0,
) -> int:
    for flag, value, least, most, example in (
        ("--repetitions", repetitions, 1, MAX_REPETITIONS, "--repetitions 20"),
        ("--warmup", warmup, 0, MAX_WARMUP, "--warmup 3"),
    ):
        problem = None if value is None else check_count(flag, value, least, most)
        if problem is not None:
            raise PlanshiftError(problem, f"for example {example}")
    if max_load is not None and max_load <= 0:
        raise PlanshiftError(
            f"--max-load {max_load}: expected a positive load average",
            "for example --max-load 2 on a 2-CPU host (planshift itself adds about 1)",
        )
    if max_wait < 0:
        raise PlanshiftError(f"--max-wait {max_wait}: expected 0 or more seconds")
    if cache is not None and cache not in CACHE_MODES:
        raise PlanshiftError(f"--cache {cache}: expected warm or cold", "for example --cache cold")
    workload = load_workload(workload_path)
    if variants is not None:
        workload = replace(workload, variants=variants)
    if only_variants:
        unknown = [name for name in only_variants if name not in workload.variants]
        if unknown:
            raise PlanshiftError(
                f"{workload_path.name}: no variant {', '.join(map(repr, unknown))}",
                f"variants: {', '.join(workload.variants)}",
            )
        workload = replace(workload, variants={n: workload.variants[n] for n in only_variants})
    if plan_only or workload.timing == "plan":
        workload = plan_only_workload(workload)
        cache = None
    dsn_map = dict(parse_dsn_option(text) for text in dsns)
    specs = resolve_target_specs(workload.targets, targets, dsn_map)
    consent = setup_consent(setup_on_dsn)
    check_setup_consent(workload, specs, consent)  # before the store or a server is touched
    share, seconds = parse_counterfactual_budget(counterfactual_budget)
    options = RunOptions(
        counterfactual_share=share,
        counterfactual_seconds=seconds,
        counterfactual_both=counterfactual_both,
        label=label,
        kind=kind,
        repetitions=repetitions,
        warmup=warmup,
        queries=tuple(queries),
        setup_on_dsn=consent,
        cache=cache,
        max_load=max_load,
        max_wait_s=max_wait,
    )
    sides = len(specs) * len(workload.variants)
    with (
        Store(store_path) as store,
        open_servers(specs, dsns=dsn_map, keep=keep, pg_bins=pg_bins) as servers,
        progress_bar(console, plan_count(workload, sides, options)) as progress,
    ):
        names = ", ".join(s.name for s in servers)
        text = (
            f"running {workload.name}: {len(workload.queries)} queries on {names} "
            f"x variants {', '.join(workload.variants)}"
        )
        console.print(single_line(text), markup=False)
        mixed = mixed_builds_note(servers)
        if mixed:
            console.print(single_line(mixed), markup=False)
        for server in servers:
            if consent and server.source == "dsn" and setup_plan(workload, server):
                console.print(
                    single_line(describe_setup(workload, server)), markup=False, soft_wrap=True
                )
        progress(f"setting up {names}", 0)
        calls = production_calls(workload)
        for server in servers if calls else ():
            server.info["production_calls"] = calls
        for server in servers if workload.capture else ():  # what capture saw of production
            server.info["production"] = {"settings": dict(workload.settings), **workload.capture}
        run_id = run_workload(workload, servers, store, options, progress)
        failed = store.failed_queries().get(run_id, [])
    for server in servers:
        for line in warning_lines(server):
            console.print(single_line(line), markup=False, soft_wrap=True)
        if "kept_dir" in server.info:
            text = (
                f"kept {server.name}: {server.info['kept_dir']} (stopped; start it with "
                f"pg_ctl -D {server.info['kept_dir']}/data start, as the server's owner)"
            )
            console.print(single_line(text), markup=False)
    if failed:
        text = f"{failed_queries_text(failed)} (`planshift compare` reports them: PS700)"
        console.print(single_line(text), markup=False)
    return run_id


def parse_counterfactual_budget(text: str) -> tuple[float | None, float | None]:
    """`--counterfactual-budget`: (share of the measurement, seconds): "25%" -> (0.25, None),
    "90s" / "2min" / "90" -> (None, 90.0), "off" / "0" -> (None, 0.0), "unbounded" -> (None,
    None)."""
    value = text.strip().lower()
    if value in ("off", "none", "0", "0s"):
        return None, 0.0
    if value == "unbounded":
        return None, None
    try:
        if value.endswith("%"):
            share = float(value[:-1]) / 100
            if share > 0:
                return share, None
        else:
            for unit, factor in (("min", 60.0), ("ms", 0.001), ("s", 1.0), ("", 1.0)):
                if value.endswith(unit):
                    seconds = float(value[: len(value) - len(unit)]) * factor
                    if seconds > 0:
                        return None, seconds
                    break
    except ValueError:
        pass
    raise PlanshiftError(
        f"--counterfactual-budget {text}: expected a share of the measurement time (25%), "
        "a duration (90s, 2min), off or unbounded",
        "for example --counterfactual-budget 10% or --counterfactual-budget 60s",
    )


def plan_only_workload(workload: Workload) -> Workload:
    """Plain EXPLAIN, nothing executed: no priming, no warm-up, no cold trial (an eviction
    would need executions and extensions), so it is safe against any server."""
    queries = tuple(replace(q, cache=None) for q in workload.queries)
    return replace(workload, timing="plan", prime=False, warmup=0, cache="warm", queries=queries)


def production_calls(workload: Workload) -> dict[str, int]:
    """query key -> executions in production (`calls` of captured queries), for the impact
    ranking; filed in each target's info (targets.info->'production_calls')."""
    return {workload_query_key(q.name): q.calls for q in workload.queries if q.calls is not None}


def compare_from_store(
    store_path: Path,
    baseline: str | None,
    candidate: str | None,
    run_id: int | None,
    options: CompareOptions,
    notes: Console | None = None,
) -> ComparisonResult:
    """Compare two sides; `notes` (stderr) hears which sides were chosen when not said in full."""

    def note(text: str) -> None:
        if notes is not None:
            notes.print(single_line(text), markup=False, highlight=False, soft_wrap=True)

    with Store(store_path, read_only=True) as store:
        return compare(store, baseline, candidate, run=run_id, options=options, notes=note)


def save_comparison(store_path: Path, result: ComparisonResult) -> int:
    """Keep a comparison and its findings in the store (tables comparisons, findings)."""
    with Store(store_path) as store, store.transaction():
        comparison_id = store.add_comparison(result.baseline, result.candidate, result.run_ids)
        store.add_findings(comparison_id, result.findings)
    return comparison_id


def compare_and_report(
    *,
    store_path: Path,
    baseline: str | None,
    candidate: str | None,
    run_id: int | None,
    output_format: str | None,
    outputs: Sequence[str],
    fail_on: str | None,
    options: CompareOptions,
    verbose: bool,
    console: Console,
    notes: Console,
    save: bool = False,
) -> str | None:
    """Print or write the reports; returns the worst finding severity (None when clean).

    `outputs` are --output values (FILE, FORMAT:FILE or -), see detector.reports.resolve_outputs;
    `notes` (stderr: stdout may carry the JSON report) hears which sides were compared when not
    said in full, and where the reports went when none went to stdout.
    """
    specs = resolve_outputs(output_format, outputs)
    gate = gate_severity(fail_on)
    result = compare_from_store(store_path, baseline, candidate, run_id, options, notes)
    if save:
        comparison_id = save_comparison(store_path, result)
        notes.print(f"comparison {comparison_id} saved in {store_path}", markup=False, soft_wrap=True)
    log.debug(
        "compared %s (run %s) with %s: %d queries, %d findings",
        result.baseline, ", ".join(map(str, result.run_ids)), result.candidate,
        len(result.queries), len(result.findings),
    )  # fmt: skip
    write_reports(result, specs, fail_on=gate, console=console, verbose=verbose)
    for spec in specs:
        log.debug("%s report to %s", spec.format, spec.path or "stdout")
    if all(spec.path is not None for spec in specs):
        notes.print(single_line(written(result, specs)), markup=False, highlight=False, soft_wrap=True)
    worst = result.worst_severity()
    return worst.value if worst else None


def written(result: ComparisonResult, specs: Sequence[OutputSpec]) -> str:
    """One line saying what was written where, when every report went to a file."""
    where = ", ".join(f"{spec.format} {spec.path}" for spec in specs)
    return f"{result.baseline} vs {result.candidate}: {verdict_summary(result)}; wrote {where}"


def run_demo(
    *,
    store_path: Path,
    workload: Path | None,
    repetitions: int | None,
    console: Console,
    progress_console: Console,
) -> None:
    path = workload or DEMO_WORKLOAD
    if not path.exists():
        raise PlanshiftError(
            f"demo workload {path} not found", "run from a checkout, or pass --workload"
        )
    loaded = load_workload(path)
    variants = list(loaded.variants)
    if len(variants) != 2:
        raise PlanshiftError(
            f"{path.name}: the demo needs exactly two [variants], found {len(variants)}"
        )
    run_id = execute_run(
        workload_path=path,
        store_path=store_path,
        targets=[],
        dsns=[],
        repetitions=repetitions,
        warmup=None,
        label="demo",
        queries=[],
        keep=False,
        pg_bins=[],
        console=progress_console,
    )
    text = f"run {run_id} stored in {store_path}; comparing {variants[0]} -> {variants[1]}"
    console.print(single_line(text) + "\n", markup=False)
    options = CompareOptions()
    result = compare_from_store(store_path, variants[0], variants[1], run_id, options)
    render_terminal(result, console, verbose=True)
    text = (
        f"same comparison as: planshift compare --store {store_path} "
        f"--baseline {variants[0]} --candidate {variants[1]}"
    )
    console.print("\n" + single_line(text), markup=False)


def census_from_store(
    store_path: Path, run_id: int | None, query: str | None, targets: Sequence[str]
) -> list[QueryCensus]:
    with Store(store_path, read_only=True) as store:
        run = store.run_or_latest(run_id)
        records = store.targets([run])
        if not records:
            raise PlanshiftError(f"run {run} not found in {store_path}", "see `planshift runs`")
        if targets:
            records = [resolve_side(store, name, run) for name in targets]
        censuses = build_census(store, records, query)
    if not censuses:
        raise PlanshiftError(f"no observations for {query or 'any query'} in run {run}")
    return censuses
