"""CI-gate jobs: compare options from configuration and flags, approved plans, A/A calibration."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from collectors.host import calibrate
from collectors.servers.targets import resolve_target_specs
from detector.engine.comparison.approvals import ApprovedPlan, read_approvals, write_approvals
from detector.engine.comparison.compare import resolve_side
from detector.engine.comparison.config import BUSY_HOST_MODES, Config
from detector.engine.comparison.noise import AA_VARIANTS, noise_floors, noise_label
from detector.engine.comparison.options import CompareOptions
from detector.errors import PlanshiftError
from detector.jobs.workload import load_workload
from detector.model.host import HostBaseline, summarize
from detector.store import Store


def parse_rule_option(text: str) -> tuple[str, str, Any]:
    """`PS101.near_tie=0.03` -> ("PS101", "near_tie", 0.03); values parse as TOML scalars."""
    import tomllib

    target, sep, value = text.partition("=")
    rule, dot, option = target.partition(".")
    if not sep or not dot or not rule or not option:
        raise PlanshiftError(
            f"--rule-option {text!r}: expected RULE.OPTION=VALUE", "for example PS101.near_tie=0.03"
        )
    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value
    return rule, option, parsed


def compare_options(
    config: Config,
    *,
    min_effect: float | None,
    select: Sequence[str] | None,
    ignore: Sequence[str] | None,
    approved: Path | None,
    noise: str,
    rule_options: Sequence[str],
    query: str | None = None,
    min_delta_ms: float | None = None,
    busy_host: str | None = None,
) -> CompareOptions:
    """Flags win over the configuration file, which wins over the defaults."""
    effect = config.min_effect if min_effect is None else min_effect
    if not 0 <= effect < 10:
        raise PlanshiftError(f"--min-effect {effect}: expected a fraction like 0.10")
    merged: dict[str, dict[str, Any]] = {k: dict(v) for k, v in config.rule_options.items()}
    for text in rule_options:
        rule, option, value = parse_rule_option(text)
        merged.setdefault(rule, {})[option] = value
    if busy_host is not None and busy_host not in BUSY_HOST_MODES:
        raise PlanshiftError(
            f"--busy-host {busy_host!r}: expected warn, inconclusive or fail",
            "warn: PS203 says which verdicts a busy host put at risk; inconclusive: they also "
            "become inconclusive; fail: PS203 is an error",
        )
    lock = approved or config.approved
    if noise not in ("auto", "off") and not noise.isdigit():
        raise PlanshiftError(f"--noise {noise!r}: expected auto, off or a run id")
    return CompareOptions(
        min_effect=effect,
        min_delta_ms=config.min_delta_ms if min_delta_ms is None else min_delta_ms,
        alpha=config.alpha,
        min_samples=config.min_samples,
        select=tuple(select) if select else config.select,
        ignore=tuple(ignore) if ignore else config.ignore,
        rule_options=merged,
        approved=read_approvals(lock) if lock else None,
        suppressions=config.suppressions,
        noise_run=None if noise == "off" else ("auto" if noise == "auto" else int(noise)),
        query=query,
        busy_host=busy_host or config.busy_host,
    )


def approve(
    *, store_path: Path, target: str | None, run_id: int | None, lock: Path, update: bool
) -> tuple[int, int, int]:
    """Record every plan shape the target used per query (and point); (plans, added, removed)."""
    with Store(store_path, read_only=True) as store:
        run = store.run_or_latest(run_id)
        targets = store.targets([run])
        if target is None:
            if len(targets) != 1:
                names = ", ".join(t.name for t in targets)
                raise PlanshiftError(
                    f"run {run} has {len(targets)} targets: which one's plans are approved?",
                    f"--target one of: {names}",
                )
            record = targets[0]
        else:
            record = resolve_side(store, target, run)
        queries = store.queries()
        plans = set()
        for row in store.observations([record.target_id]):
            query = queries.get(row.query_key)
            signature = store.plan_record(row.fingerprint).signature
            name = query.name if query else row.query_key
            plans.add(ApprovedPlan(name, row.point, row.fingerprint, signature))
    added, removed = write_approvals(lock, plans, update=update)
    return len(plans), added, removed


def run_noise(
    *,
    workload_path: Path,
    store_path: Path,
    target: str | None,
    variant: str | None,
    repetitions: int | None,
    pg_bins: Sequence[Path],
    console: Console,
) -> tuple[int, dict[str, float]]:
    """Run one variant twice, interleaved (A/A), store it as `noise:<server>`, return the floors."""
    from detector.jobs.run import execute_run

    workload = load_workload(workload_path)
    chosen = variant or next(iter(workload.variants))
    if chosen not in workload.variants:
        raise PlanshiftError(
            f"{workload_path.name}: no variant {chosen!r}",
            f"variants: {', '.join(workload.variants)}",
        )
    gucs = workload.variants[chosen]
    specs = resolve_target_specs(workload.targets, [target] if target else [], {})
    if len(specs) != 1:
        raise PlanshiftError(
            f"{workload_path.name} has {len(specs)} targets; noise calibrates one server at a time",
            "--target NAME",
        )
    server = specs[0].name
    run_id = execute_run(
        workload_path=workload_path,
        store_path=store_path,
        targets=[server] if target else [],
        dsns=[],
        repetitions=repetitions,
        warmup=None,
        label=noise_label(server),
        kind="noise",
        queries=[],
        keep=False,
        pg_bins=pg_bins,
        console=console,
        variants={name: dict(gucs) for name in AA_VARIANTS},
    )
    with Store(store_path, read_only=True) as store:
        return run_id, noise_floors(store, run_id)


def calibrate_host(*, store_path: Path, rounds: int, force: bool) -> HostBaseline:
    """Probe this host `rounds` times and store the medians as its quiet baseline; refuse
    (unless forced) when the host is busy by the measures compare uses."""
    if rounds < 1:
        raise PlanshiftError(f"--rounds {rounds}: expected 1 or more", "for example --rounds 5")
    summary, readings = calibrate(rounds)
    host = socket.gethostname()
    now = summarize(
        readings, host=host, local=True, baseline=None, read_blocks=0, read_ms=None, cold=False
    )
    reasons = [] if now is None else [r.text for r in now.busy_reasons()]
    if reasons and not force:
        raise PlanshiftError(
            f"host {host} is not quiet: {'; '.join(reasons)}; a baseline measured now would "
            "make busy runs look normal",
            "run `planshift calibrate` when the host is idle, or add --force to record it "
            "anyway (marked forced)",
        )
    assert summary.read_warm_us is not None and summary.cpu_loop_ms is not None
    baseline = HostBaseline(
        host=host,
        measured_at=summary.taken_at,
        read_warm_us=summary.read_warm_us,
        read_cold_us=summary.read_cold_us,
        cpu_loop_ms=summary.cpu_loop_ms,
        load1=summary.load1,
        cpus=summary.cpus,
        cpu_pressure=None if now is None else now.cpu_pressure,
        forced=bool(reasons),
    )
    with Store(store_path) as store:
        store.add_host_baseline(baseline)
    return baseline
