"""A comparison's options from the command line and planshift.toml (`CompareOptions`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from detector.engine.comparison.approvals import read_approvals
from detector.engine.comparison.config import BUSY_HOST_MODES, Config
from detector.engine.comparison.options import CompareOptions
from detector.errors import PlanshiftError


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
