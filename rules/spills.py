"""Nodes that spill to disk or go lossy when work_mem is too small, found relation by relation:
what PS401 sort-spilled-to-disk, PS402 hash-batches and PS403 lossy-bitmap report.

With `only_new` (the rules' default) a spill is reported only when the baseline's matching
node (same relations beneath it) did not spill too: a comparison reports what changed. Nodes
pair by relations, never by position.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from detector.model import Finding, PlanNode, QueryComparison
from rules.base import Rule
from rules.common import timing_evidence
from rules.gucs import changes_text, settings_changes
from rules.matching import RelationKey, keyed

MEMORY = ("work_mem", "hash_mem_multiplier")
Spilled = Callable[[PlanNode], bool]
Describe = Callable[
    [QueryComparison, RelationKey, PlanNode, list[PlanNode]], tuple[str, dict[str, Any]]
]


def memory_note(comparison: QueryComparison) -> str | None:
    changes = settings_changes(comparison.baseline, comparison.candidate, MEMORY)
    return changes_text(changes) if changes else None


def spill_findings(
    comparison: QueryComparison,
    options: Mapping[str, Any],
    *,
    rule: Rule,
    node_type: str,
    spilled: Spilled,
    describe: Describe,
) -> Iterator[Finding]:
    """`rule`'s finding for the first `node_type` node over each set of relations of the
    candidate's dominant plan that `spilled` (with `only_new`, unless the baseline's node over
    the same relations spilled too); `describe` words it."""
    cand_plan = comparison.candidate.dominant.plan
    cand = keyed(cand_plan, lambda node: node.node_type == node_type)
    base = keyed(comparison.baseline.dominant.plan, lambda node: node.node_type == node_type)
    for key in sorted(cand):
        for node in cand[key]:
            if not spilled(node):
                continue
            before = base.get(key, [])
            if bool(options["only_new"]) and any(spilled(old) for old in before):
                continue
            text, evidence = describe(comparison, key, node, before)
            memory = memory_note(comparison)
            if memory:
                text += f"; {memory}"
            evidence = {"relations": list(key), **evidence, **timing_evidence(comparison)}
            yield rule.finding(comparison, text, evidence)
            break
