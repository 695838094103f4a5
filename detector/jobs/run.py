"""The run job: measure a workload on its targets into the store (`planshift run`)."""

from __future__ import annotations

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
from detector.errors import PlanshiftError
from detector.jobs.progress import progress_bar
from detector.jobs.servers import mixed_builds_note
from detector.jobs.workload import load_workload
from detector.model.failures import failed_queries_text
from detector.model.identity import workload_query_key
from detector.model.workload import (
    CACHE_MODES,
    MAX_REPETITIONS,
    MAX_WARMUP,
    Workload,
    check_count,
)
from detector.reports.escape import single_line
from detector.store import Store

# the rejected plan of a flip, timed on the candidate: at most this share of the time the
# query point's measurement took (collectors/counterfactual.py)
DEFAULT_COUNTERFACTUAL_BUDGET = "25%"


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
