"""PS401 sort-spilled-to-disk: a sort that ran in memory now spills to disk."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, PlanNode, QueryComparison, Severity
from rules.base import rule
from rules.common import fmt_blocks
from rules.matching import (
    RelationKey,
    facts,
    key_text,
    own_temp_blocks,
)
from rules.spills import spill_findings


def _sort_spilled(node: PlanNode) -> bool:
    return node.node_type == "Sort" and (
        node.sort_space_type == "Disk" or (node.sort_method or "").startswith("external")
    )


def _sort_text(node: PlanNode) -> str:
    where = {"Disk": "on disk", "Memory": "in memory"}.get(node.sort_space_type or "", "")
    return " ".join(part for part in (node.sort_method or "sort", where) if part)


@rule(
    "PS401",
    "sort-spilled-to-disk",
    "resources",
    Severity.WARNING,
    gate=lambda c, _: facts(c.candidate.dominant.plan).sort_spilled,
    only_new=True,
)
def sort_spilled_to_disk(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """A Sort of the candidate's plan spilled to disk (external merge).

    ## What it flags
    A Sort node in the candidate's dominant plan whose Sort Space Type is Disk
    (Sort Method `external merge` or `external sort`). With `only_new` (default
    true) a Sort over the same relations that spilled on the baseline too is not
    reported. The message gives the temp blocks the sort read and wrote, how the
    baseline sorted, and work_mem when it differs. Warning: the clock decides
    whether it hurts (PS200).

    ## Why it matters
    A sort that does not fit in work_mem writes sorted runs to temp files and
    merges them: extra I/O on every execution, and temp files compete with the
    rest of the server for disk bandwidth. A lower work_mem, more rows, wider
    rows or a new version's memory accounting can push a sort over the edge
    without any plan change.

    ## Example
    ORDER BY c over 20000 rows, work_mem 64MB -> 64kB (PG 15):

        Sort over sbtest2 spilled to disk: external merge on disk, 2083 blocks
        (16.3 MB) of temp I/O; baseline quicksort in memory; work_mem 64MB ->
        64kB

    ## What to do
    Raise work_mem for this query or role (SET LOCAL work_mem), return fewer or
    narrower rows, or provide the order from an index. Check
    log_temp_files / pg_stat_statements.temp_blks_written in production.

    ## References
    - Memory settings (work_mem):
      https://www.postgresql.org/docs/current/runtime-config-resource.html
    - Using EXPLAIN: https://www.postgresql.org/docs/current/using-explain.html
    - Logging temp files (log_temp_files):
      https://www.postgresql.org/docs/current/runtime-config-logging.html
    """
    if not facts(comparison.candidate.dominant.plan).sort_spilled:
        return
    yield from spill_findings(
        comparison,
        options,
        rule=sort_spilled_to_disk,
        node_type="Sort",
        spilled=_sort_spilled,
        describe=_describe_sort,
    )


def _describe_sort(
    comparison: QueryComparison, key: RelationKey, node: PlanNode, base: list[PlanNode]
) -> tuple[str, dict[str, Any]]:
    temp = own_temp_blocks(node)
    text = (
        f"Sort over {key_text(key)} spilled to disk: {_sort_text(node)}, "
        f"{fmt_blocks(temp)} of temp I/O"
    )
    text += "; baseline " + (_sort_text(base[0]) if base else "had no sort over these rows")
    evidence = {
        "sort_method": node.sort_method,
        "sort_space_type": node.sort_space_type,
        "temp_blocks": temp,
        "baseline_sort_method": base[0].sort_method if base else None,
        "baseline_sort_space_type": base[0].sort_space_type if base else None,
    }
    return text, evidence
