"""The options of a comparison: thresholds of the statistics, rule selection and settings, the
A/A noise floors, approvals and suppressions, and what a busy host does to verdicts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from detector.engine.comparison.config import Suppression


@dataclass(frozen=True)
class CompareOptions:
    min_effect: float = 0.10
    min_delta_ms: float = 0.01  # a median moving less than this is never a regression
    alpha: float = 0.05
    min_samples: int = 5
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    rule_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    noise_floors: Mapping[str, float] = field(default_factory=dict)  # per query label
    noise_run: int | str | None = "auto"  # A/A run giving noise floors: id, "auto" or None
    query: str | None = None  # only this query name
    # the lock file: `query [point]` -> approved fingerprint -> signature
    approved: Mapping[str, Mapping[str, str]] | None = None
    suppressions: tuple[Suppression, ...] = ()
    busy_host: str = (
        "warn"  # what verdicts a busy host put at risk become (engine/comparison/conditions.py)
    )
