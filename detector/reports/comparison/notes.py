"""Lines every report says in the terminal's words: the data each side ran on, and the errors
of a query not compared (each failed side's most frequent one)."""

from __future__ import annotations

from detector.model import ComparisonResult, QueryComparison
from detector.model.failures import Failures, distinct_errors
from detector.model.units import counted
from detector.reports.escape import single_line


def data_lines(result: ComparisonResult) -> list[str]:
    """`data: sbtest1 200000 rows on both, correlation id 0.577 / 0.577` per table."""
    lines = []
    for table, sides in result.tables.items():
        base, cand = sides.get("baseline") or {}, sides.get("candidate") or {}
        rows = (base.get("rows"), cand.get("rows"))
        text = f"data: {table} " + (
            f"{rows[0]} rows on both" if rows[0] == rows[1] else f"rows {rows[0]} / {rows[1]}"
        )
        columns = sorted(set(base.get("correlation") or {}) | set(cand.get("correlation") or {}))
        if columns:
            pairs = [
                f"{c} {(base.get('correlation') or {}).get(c)} / {(cand.get('correlation') or {}).get(c)}"
                for c in columns
            ]
            text += ", correlation " + ", ".join(pairs)
        lines.append(single_line(text))  # table names come from the server
    return lines


def failed_errors(query: QueryComparison) -> list[tuple[str, str]]:
    """(side, `8 executions failed: ERROR 42703 ...`) for each side where executions failed."""
    failures = query.failures or Failures()
    found = []
    for side, failed in (
        (query.baseline, failures.baseline),
        (query.candidate, failures.candidate),
    ):
        errors = distinct_errors(failed)
        if errors:
            text = f"{counted(len(failed), 'execution')} failed: {errors[0].first.error}"
            found.append((side.label, single_line(text)))
    return found
