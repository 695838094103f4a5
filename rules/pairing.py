"""Pairing one side's plan nodes with the other's: by relation (and index), never by position.

Framework for the plan-flip rules: reads that stay the same on both sides are set aside
first (`unmatched`), then each remaining read takes one of its relation on the other side
(`pair_by_relation`), one on the same index when there is one. Joins group by the set of
relations they join (`by_relations`).
"""

from __future__ import annotations

from detector.model import QueryComparison, ScanAccess
from rules.matching import Join, RelationKey, accesses


def unmatched(accesses: list[ScanAccess], others: list[ScanAccess]) -> list[ScanAccess]:
    """Accesses with no same (relation, node type, index) counterpart on the other side."""
    pool = [(a.relation, a.node_type, a.index_name) for a in others]
    left: list[ScanAccess] = []
    for access in accesses:
        key = (access.relation, access.node_type, access.index_name)
        if key in pool:
            pool.remove(key)
        else:
            left.append(access)
    return left


def pair_by_relation(
    before: list[ScanAccess], after: list[ScanAccess]
) -> list[tuple[ScanAccess, ScanAccess]]:
    """Each `before` read takes an `after` read of its relation, one on its index if any."""
    pool = list(after)
    pairs: list[tuple[ScanAccess, ScanAccess]] = []
    for old in before:
        same = [new for new in pool if new.relation == old.relation]
        if not same:
            continue
        indexed = [new for new in same if old.index_name in (new.index_name or "").split(",")]
        new = (indexed or same)[0]
        pool.remove(new)
        pairs.append((old, new))
    return pairs


def scan_text(name: str, index: str | None) -> str:
    return f"{name}({index})" if index else name


def flipped_reads(
    comparison: QueryComparison, old_types: tuple[str, ...], new_types: tuple[str, ...]
) -> list[tuple[ScanAccess, ScanAccess]]:
    """Baseline reads of `old_types` that became `new_types` reads of the same relation."""
    base = accesses(comparison.baseline.dominant.plan)
    cand = accesses(comparison.candidate.dominant.plan)
    before = [a for a in unmatched(base, cand) if a.node_type in old_types]
    after = [a for a in unmatched(cand, base) if a.node_type in new_types]
    return pair_by_relation(before, after)


def by_relations(found: list[Join]) -> dict[RelationKey, list[Join]]:
    groups: dict[RelationKey, list[Join]] = {}
    for join in found:
        groups.setdefault(join.relations, []).append(join)
    return groups
