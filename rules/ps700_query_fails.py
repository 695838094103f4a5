"""PS700 query-fails: PostgreSQL refused the query on a side, for every sample or for some."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from detector.model import Finding, QueryComparison, Severity, Side
from detector.model.failures import (
    QueryFailure,
    distinct_errors,
    error_text,
    failed_samples,
    side_summary,
)
from detector.model.units import counted
from rules.base import rule

_PARAMS_SHOWN = 120  # characters of an example's parameters in a message


def _has_failures(comparisons: Sequence[QueryComparison], _: Mapping[str, Any]) -> list[bool]:
    return [comparison.failures is not None for comparison in comparisons]


@rule(
    "PS700",
    "query-fails",
    "failures",
    Severity.ERROR,
    each=_has_failures,
    without_plans=True,
)
def query_fails(comparison: QueryComparison, options: Mapping[str, Any]) -> Iterator[Finding]:
    """PostgreSQL refused the query on a side: an error, not a plan.

    ## What it flags
    Executions of a workload query that ended in an ERROR on one side: a
    column or function the candidate's version no longer has, a permission, a
    division by zero, a statement timeout. A query that fails on the candidate
    and works on the baseline is an error, for every sample (it was not
    compared) or for some (its other samples were compared as usual); failing
    on the baseline only (fixed on the candidate) or on both sides with the
    same parameters is info. The message quotes PostgreSQL's SQLSTATE,
    message, DETAIL and HINT; the evidence has the parameters and the phase
    (warmup, priming, measurement) of the first failure of each error. A
    failure that is the server's fault (a crash, a shutdown, a lost
    connection, a full disk) is not this rule: it ends the run.

    ## Why it matters
    A query that stops working after an upgrade or a configuration change is
    exactly what a check before the change exists to find, and no timing
    statistic shows it: the query is simply missing from the comparison.
    Major versions remove and rename columns of the statistics views
    (PostgreSQL 17 moved pg_stat_bgwriter's buffers_backend and renamed
    pg_stat_statements' blk_read_time), functions and operators; a stricter
    cast, a new reserved word or a lower statement_timeout break queries too.

    ## Example
    `SELECT buffers_backend FROM pg_stat_bgwriter`, PostgreSQL 15 -> 17:

        fails on pg17: ERROR 42703 column "buffers_backend" does not exist
        (1 execution failed); works on pg15 (20 samples)

    ## What to do
    Rewrite the query for the candidate (the release notes name what moved:
    buffers_backend is in pg_stat_io since 17), or fix the candidate's
    settings or privileges; for a failure with some parameter values only,
    the evidence lists which. Run the comparison again: the query is then
    compared like the others.

    ## References
    - PostgreSQL error codes (SQLSTATE):
      https://www.postgresql.org/docs/current/errcodes-appendix.html
    - Upgrading a PostgreSQL cluster:
      https://www.postgresql.org/docs/current/upgrading.html
    """
    failures = comparison.failures
    if failures is None:
        return
    base, cand = comparison.baseline, comparison.candidate
    if base.samples and cand.samples:
        yield from _some_samples(comparison, failures.baseline, failures.candidate)
        return
    evidence = _evidence(comparison, failures.baseline, failures.candidate)
    if base.samples:  # the candidate never worked
        text = f"fails on {cand.label}: {_errors(failures.candidate)}"
        yield query_fails.finding(comparison, f"{text}; works on {_works(base)}", evidence)
    elif cand.samples:
        text = f"fails on {base.label} only, works on {_works(cand)}"
        message = f"{text}: {_errors(failures.baseline)}"
        yield query_fails.finding(comparison, message, evidence, Severity.INFO)
    else:
        yield query_fails.finding(comparison, _on_both(comparison), evidence, Severity.INFO)


def _some_samples(
    comparison: QueryComparison,
    base: Sequence[QueryFailure],
    cand: Sequence[QueryFailure],
) -> Iterator[Finding]:
    """Both sides worked for some samples: which failed where, by sample index (sample i ran
    with the same parameters on both sides)."""
    base_failed, cand_failed = failed_samples(base), failed_samples(cand)
    left, right = comparison.baseline, comparison.candidate
    compared = len(set(left.sample_indices) & set(right.sample_indices))
    rest = f"{counted(compared, 'sample')} measured on both sides compared"
    groups = (
        (cand_failed - base_failed, cand, f"on {right.label}", f" that work on {left.label}"),
        (base_failed - cand_failed, base, f"on {left.label}", f" that work on {right.label}"),
        (base_failed & cand_failed, [*base, *cand], "on both sides", ""),
    )
    for (samples, failures, where, other), severity in zip(
        groups, (Severity.ERROR, Severity.INFO, Severity.INFO), strict=True
    ):
        mine = [failure for failure in failures if failure.sample_index in samples]
        if not mine:
            continue
        head = f"fails {where} for {counted(len(samples), 'sample')}{other}"
        message = f"{head} ({_example(mine)}): {_errors(mine)}; {rest}"
        evidence = {
            **_evidence(comparison, base, cand),
            "samples": sorted(samples),
            "compared_samples": compared,
        }
        yield query_fails.finding(comparison, message, evidence, severity)


def _on_both(comparison: QueryComparison) -> str:
    failures = comparison.failures
    assert failures is not None
    base, cand = comparison.baseline.label, comparison.candidate.label
    if not failures.candidate:
        return f"fails on {base}: {_errors(failures.baseline)}; not run on {cand}"
    if not failures.baseline:
        return f"fails on {cand}: {_errors(failures.candidate)}; not run on {base}"
    left, right = _errors(failures.baseline), _errors(failures.candidate)
    if _error_keys(failures.baseline) == _error_keys(failures.candidate):
        return f"fails on both {base} and {cand}: {_errors(failures.candidate, counts=False)}"
    return f"fails on {base}: {left}; on {cand}: {right}"


def _errors(failures: Sequence[QueryFailure], counts: bool = True) -> str:
    """The first distinct error in full (DETAIL, HINT), the others by SQLSTATE and message."""
    found = distinct_errors(failures)
    if not found:
        return "no error recorded"
    text = error_text(found[0].first)
    if counts:
        total = sum(error.executions for error in found)
        text += f" ({counted(total, 'execution')} failed)"
    for other in found[1:]:
        text += f"; also {other.first.error} ({counted(other.executions, 'execution')})"
    return text


def _error_keys(failures: Sequence[QueryFailure]) -> set[tuple[str | None, str]]:
    return {(failure.sqlstate, failure.message) for failure in failures}


def _works(side: Side) -> str:
    return f"{side.label} ({counted(side.samples, 'sample')})"


def _example(failures: Sequence[QueryFailure]) -> str:
    first = min(failures, key=lambda failure: failure.sample_index)
    params = first.params if len(first.params) <= _PARAMS_SHOWN else first.params[:117] + "..."
    return f"e.g. sample {first.sample_index}, parameters {params}"


def _evidence(
    comparison: QueryComparison, base: Sequence[QueryFailure], cand: Sequence[QueryFailure]
) -> dict[str, Any]:
    return {
        "baseline": side_summary(comparison.baseline.label, comparison.baseline.samples, base),
        "candidate": side_summary(comparison.candidate.label, comparison.candidate.samples, cand),
    }
