"""What rules see: one query measured on a baseline and a candidate side, and what they emit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from detector.model.failures import Failures
from detector.model.host import HostConditions
from detector.model.log_rows import LogEventRow
from detector.model.plan import Plan
from detector.model.samples import Samples as Samples  # re-exported: its old home


class Verdict(StrEnum):
    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls(text.lower())
        except ValueError:
            from detector.errors import PlanshiftError

            choices = ", ".join(s.value for s in cls)
            raise PlanshiftError(f"unknown severity {text!r}", f"use one of: {choices}") from None


@dataclass(frozen=True, slots=True)
class TimingStats:
    """Distribution of one side's durations (ms)."""

    n: int
    median_ms: float
    p90_ms: float
    p99_ms: float
    min_ms: float
    max_ms: float


# the reason of a verdict whose sides' durations do not compare (measured in different modes)
NOT_COMPARED = "not compared"


@dataclass(frozen=True, slots=True)
class TimingComparison:
    """Candidate versus baseline medians; `ratio` > 1 means the candidate is slower."""

    verdict: Verdict
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    min_effect: float
    noise_floor: float | None
    reason: str
    paired: bool = False  # from per-sample ratios of one interleaved run (else two samples)
    q_value: float | None = None  # p-value adjusted across the comparison's queries (BH)
    decide_at: int | None = None  # inconclusive: about how many samples per side would settle it

    def describe(self) -> str:
        """pyperf-style wording: '1.23x slower [1.15, 1.31]', 'not significant'."""
        if self.ratio is None:
            return self.reason
        slower = self.ratio >= 1
        text = f"{self.ratio:.2f}x slower" if slower else f"{1 / self.ratio:.2f}x faster"
        if self.ci_low is not None and self.ci_high is not None:
            # the interval is stated in the same unit as the headline: x slower or x faster
            low, high = (
                (self.ci_low, self.ci_high) if slower else (1 / self.ci_high, 1 / self.ci_low)
            )
            text += f" (95% CI {low:.2f}-{high:.2f})"
        if self.verdict in (Verdict.UNCHANGED, Verdict.INCONCLUSIVE):
            text += f": {self.reason}"
        if self.decide_at is not None:
            text += f" (about {self.decide_at} samples would decide it)"
        return text


@dataclass(frozen=True, slots=True)
class PlanVariant:
    """One plan shape seen on a side: how often, and a representative plan."""

    fingerprint: str
    signature: str
    plan: Plan
    samples: int
    median_ms: float | None
    median_cost: float
    median_shared_blocks: float | None = None  # shared hit + read per execution


@dataclass(frozen=True, slots=True)
class Side:
    label: str
    server_version_num: int | None
    settings: Mapping[str, str]
    plans: tuple[PlanVariant, ...]
    durations_ms: Sequence[float]  # a tuple, or `Samples` from a store
    timing: TimingStats | None
    calls: int | None = None  # executions in production (pg_stat_statements), when known
    planning_ms: Sequence[float] = ()
    # the runner's sample index and the plan's total cost of each duration (same order): sample
    # i of one side ran with the same parameters as sample i of the other
    sample_indices: Sequence[int] = ()
    costs: Sequence[float] = ()
    # the side's tables as its server's statistics saw them (rows, pages, all_visible_pages,
    # correlation), when the run recorded them
    tables: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # the host while the side was measured (load, pressure, read latency), when the run recorded it
    host: HostConditions | None = None

    def all_visible(self, relation: str) -> float | None:
        """Share of the relation's pages the visibility map marks all-visible (pg_class)."""
        facts = self.tables.get(relation) or self.tables.get(relation.removeprefix("public."))
        pages = (facts or {}).get("pages")
        visible = (facts or {}).get("all_visible_pages")
        if not pages or visible is None:
            return None
        return min(float(visible) / float(pages), 1.0)

    def by_sample(self) -> dict[int, tuple[float, float]]:
        """(duration ms, total cost) per sample index; empty when samples are not indexed (logs,
        time windows)."""
        if not self.sample_indices:
            return {}
        return {
            index: (duration, cost)
            for index, duration, cost in zip(
                self.sample_indices, self.durations_ms, self.costs, strict=True
            )
        }

    @property
    def dominant(self) -> PlanVariant:
        """The most frequent plan shape (ties broken by fingerprint, so output is stable)."""
        return self.plans[0]

    @property
    def samples(self) -> int:
        return sum(p.samples for p in self.plans)


@dataclass(frozen=True, slots=True)
class QueryComparison:
    query_key: str
    query_name: str
    sql: str
    baseline: Side
    candidate: Side
    timing: TimingComparison
    point: str | None = None  # sweep point, e.g. "N=8000"
    # the lock file's approved plans of this query (and point), fingerprint -> signature, when a
    # lock file is in use
    approved: Mapping[str, str] | None = None
    # the run's test of which settings moved the plan (collectors/attribution.py): "tested",
    # the differing settings reverted on the candidate, and "restores", the smallest set that
    # brought the baseline's plan back (empty: none did); None when not tested
    attribution: Mapping[str, Any] | None = None
    # executions of this query that failed on either side (detector.model.failures); None: none
    failures: Failures | None = None

    @property
    def label(self) -> str:
        return f"{self.query_name} [{self.point}]" if self.point else self.query_name

    @property
    def weight(self) -> int:
        """How often the query runs: pg_stat_statements calls when known, else samples."""
        return self.candidate.calls or self.baseline.calls or self.candidate.samples

    @property
    def impact_ms(self) -> float | None:
        """Workload impact: change of the median times the weight (positive = more time spent)."""
        base, cand = self.baseline.timing, self.candidate.timing
        if base is None or cand is None:
            return None
        return (cand.median_ms - base.median_ms) * self.weight

    @property
    def plan_changed(self) -> bool:
        try:
            return self.baseline.plans[0].fingerprint != self.candidate.plans[0].fingerprint
        except IndexError:  # no plan on a side: the query failed there
            return False


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    severity: Severity
    query_key: str
    query_name: str
    message: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    point: str | None = None  # sweep point of the query comparison it came from

    def sort_key(self) -> tuple[int, str, str, str, str]:
        return (-self.severity.rank, self.query_name, self.point or "", self.code, self.message)


class WindowEvent(NamedTuple):
    """A server event of a log, and where it fell: in the `baseline` or `candidate` window, or
    `between` them."""

    where: str
    event: LogEventRow


@dataclass(frozen=True)
class ComparisonResult:
    """Everything a report needs: what was compared, per-query statistics, sorted findings."""

    baseline: str
    candidate: str
    run_ids: tuple[int, ...]
    queries: tuple[QueryComparison, ...]
    findings: tuple[Finding, ...]
    settings_diff: Mapping[str, tuple[str | None, str | None]] = field(default_factory=dict)
    versions: tuple[int | None, int | None] = (None, None)
    # per table: {"baseline": {"rows": .., "correlation": {col: ..}}, "candidate": {...}}
    tables: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # how each side was measured: {"baseline": {...}, "candidate": {...}} with the server version,
    # initdb options, checksums, io_method, timing mode and cache mode (when recorded)
    conditions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    suppressed: tuple[tuple[Finding, str], ...] = ()  # (finding, the suppression's reason)
    noise_run: int | None = None  # the A/A run the noise floors came from
    # interleaved: both sides measured in one run, sample i back to back with the same
    # parameters, so timings are compared pair by pair; otherwise as two independent samples
    interleaved: bool = False
    alpha: float = 0.05  # significance level, and the false discovery rate across queries
    # two time windows of a log: the server events (settings, reloads, starts, autovacuum,
    # DDL) from the start of the earlier window to the end of the later one, by time
    events: tuple[WindowEvent, ...] = ()
    # queries (and sweep points) not compared because no execution of them succeeded on a side:
    # their sides have no plan there, and `failures` says why (rule PS700)
    failed: tuple[QueryComparison, ...] = ()
    # why the two sides' durations do not compare (measured in different timing or cache
    # modes): every timing verdict is then inconclusive, and reports say why
    not_comparable: str | None = None

    def verdict_counts(self) -> dict[str, int]:
        counts = {v.value: 0 for v in Verdict}
        for query in self.queries:
            counts[query.timing.verdict.value] += 1
        return counts

    def worst_severity(self) -> Severity | None:
        if not self.findings:
            return None
        return max((f.severity for f in self.findings), key=lambda s: s.rank)
