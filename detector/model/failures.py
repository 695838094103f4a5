"""Executions of a workload query that PostgreSQL refused with an ERROR, and how one query's
failures on the two sides of a comparison are set against each other.

A query that fails on a target (a column renamed in 17, a function removed, a division by zero
for some parameter values) is a fact about that target, not the end of a run: the runner
records each failed execution as a `QueryFailure` and goes on with the others; `compare` hands
a query's failures on each side to the rules as `Failures` (rule PS700). A failure that is the
server's fault (connection lost, shutdown, crash, disk or memory exhausted) is not one of
these: it ends the run.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

#: where in a query's samples an execution failed: a warm-up execution, the unmeasured priming
#: execution of a sample, its measured execution (the plan-only EXPLAIN before a cold one
#: included), or planning a generic_plan query
PHASES = ("warmup", "priming", "measurement", "generic plan")


@dataclass(frozen=True)
class QueryFailure:
    """One execution of one query on one target that ended in an ERROR (the session lived on)."""

    target_id: int
    query_key: str
    point: str | None  # sweep point label, e.g. "N=8000"
    # the sample whose parameters it ran with: 0, 1, ... as observations number them; the
    # warm-up executions before sample 0 are -warmup .. -1
    sample_index: int
    phase: str  # PHASES
    params: str  # JSON text of the parameter values, as observations store them
    sqlstate: str | None  # e.g. "42703"
    message: str  # PostgreSQL's primary message
    detail: str | None
    hint: str | None
    failed_at: datetime

    @property
    def error(self) -> str:
        """`ERROR 42703 column "buffers_backend" does not exist`: how reports quote it."""
        return f"ERROR {self.sqlstate or '?????'} {self.message}"

    def as_evidence(self) -> dict[str, Any]:
        return {
            "sqlstate": self.sqlstate,
            "message": self.message,
            "detail": self.detail,
            "hint": self.hint,
            "phase": self.phase,
            "sample_index": self.sample_index,
            "params": json.loads(self.params) if self.params else None,
        }


@dataclass(frozen=True)
class Failures:
    """One query's (and sweep point's) failed executions on each side of a comparison."""

    baseline: tuple[QueryFailure, ...] = ()
    candidate: tuple[QueryFailure, ...] = ()


@dataclass(frozen=True)
class ErrorCount:
    """One distinct error of a side (SQLSTATE and message), how often, and its first failure."""

    first: QueryFailure
    executions: int
    samples: int  # distinct samples (parameter sets) it failed with


def failed_samples(failures: Sequence[QueryFailure]) -> set[int]:
    """The sample indices (warm-up ones negative) with at least one failed execution."""
    return {failure.sample_index for failure in failures}


def distinct_errors(failures: Sequence[QueryFailure]) -> list[ErrorCount]:
    """The side's errors, most frequent first (then by SQLSTATE and message: stable)."""
    first: dict[tuple[str | None, str], QueryFailure] = {}
    samples: dict[tuple[str | None, str], set[int]] = {}
    counts: Counter[tuple[str | None, str]] = Counter()
    for failure in sorted(failures, key=lambda f: (f.failed_at, f.sample_index)):
        key = (failure.sqlstate, failure.message)
        first.setdefault(key, failure)
        samples.setdefault(key, set()).add(failure.sample_index)
        counts[key] += 1
    ordered = sorted(counts, key=lambda key: (-counts[key], key[0] or "", key[1]))
    return [ErrorCount(first[key], counts[key], len(samples[key])) for key in ordered]


def error_text(failure: QueryFailure) -> str:
    """The error with PostgreSQL's detail and hint, on one line: what a finding quotes."""
    parts = [failure.error]
    if failure.detail:
        parts.append(f"DETAIL: {failure.detail}")
    if failure.hint:
        parts.append(f"HINT: {failure.hint}")
    return " ".join(" ".join(part.split()) for part in parts)


def side_summary(target: str, samples: int, failures: Sequence[QueryFailure]) -> dict[str, Any]:
    """One side's failures of one query as plain JSON (rule evidence, the JSON report)."""
    return {
        "target": target,
        "measured_samples": samples,
        "failed_executions": len(failures),
        "failed_samples": sorted(failed_samples(failures)),
        "errors": [
            {**error.first.as_evidence(), "executions": error.executions, "samples": error.samples}
            for error in distinct_errors(failures)
        ],
    }


def failed_queries_text(failed: Sequence[tuple[str, str | None, Sequence[str]]]) -> str:
    """`2 queries failed on a target: bgwriter on pg17, ratio [d=0] on pg15, pg17` from a
    run's (query name, sweep point, targets), as `planshift run` and `planshift runs` say it."""
    names = {name for name, _, _ in failed}
    shown = [
        f"{name} [{point}] on {', '.join(targets)}" if point else f"{name} on {', '.join(targets)}"
        for name, point, targets in failed[:_LISTED]
    ]
    more = f", and {len(failed) - _LISTED} more" if len(failed) > _LISTED else ""
    noun = "query" if len(names) == 1 else "queries"
    return f"{len(names)} {noun} failed on a target: {', '.join(shown)}{more}"


_LISTED = 5  # queries a one-line summary names
