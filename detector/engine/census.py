"""Plan-shape census: how many samples used each plan shape, per target and sweep point.

This is seed 003's table (version x work_mem x range length -> count of Index Scan versus
Bitmap Heap Scan plans) produced from the store, plus the point where each target switches
its dominant plan. The counting is DuckDB's (`Store.shape_counts`): memory holds one row per
target x query x point x shape, never the observations.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from detector.engine.comparison.query_pairs import point_order
from detector.model import QueryComparison
from detector.store import Store, TargetRecord


@dataclass(frozen=True)
class Switch:
    """The dominant plan changes between two consecutive sweep points."""

    target: str
    before: str  # point label, e.g. "N=4000"
    after: str
    from_signature: str
    to_signature: str

    def describe(self) -> str:
        return f"{self.target} switches between {self.before} and {self.after}"


@dataclass(frozen=True)
class QueryCensus:
    query_name: str
    points: tuple[str | None, ...]
    targets: tuple[str, ...]
    counts: dict[tuple[str, str | None], Counter[str]]  # (target, point) -> signature -> samples
    signatures: tuple[
        str, ...
    ]  # every shape seen, most frequent first: letters A, B, ... in reports

    def letter(self, signature: str) -> str:
        return _letter(self.signatures.index(signature))

    def dominant(self, target: str, point: str | None) -> str | None:
        counter = self.counts.get((target, point))
        if not counter:
            return None
        return min(counter.items(), key=lambda kv: (-kv[1], kv[0]))[0]

    def switches(self) -> list[Switch]:
        found = []
        for target in self.targets:
            previous: tuple[str | None, str] | None = None
            for point in self.points:
                shape = self.dominant(target, point)
                if shape is None:
                    continue
                if previous is not None and previous[1] != shape:
                    found.append(Switch(target, str(previous[0]), str(point), previous[1], shape))
                previous = (point, shape)
        return found


def _letter(index: int) -> str:
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(ord("A") + rest) + letters
    return letters


def build_census(
    store: Store, targets: Sequence[TargetRecord], query: str | None = None
) -> list[QueryCensus]:
    names = {t.target_id: t.name for t in targets}
    queries = store.queries()
    grouped: dict[str, dict[tuple[str, str | None], Counter[str]]] = defaultdict(
        lambda: defaultdict(Counter)
    )
    for target_id, key, point, signature, executions in store.shape_counts(list(names)):
        record = queries.get(key)
        name = record.name if record else key
        if query and name != query:
            continue
        grouped[name][(names[target_id], point)][signature] += executions
    result = []
    for name in sorted(grouped):
        counts = grouped[name]
        totals: Counter[str] = Counter()
        for counter in counts.values():
            totals.update(counter)
        result.append(
            QueryCensus(
                query_name=name,
                points=tuple(sorted({p for _, p in counts}, key=point_order)),
                targets=tuple(t.name for t in targets if any(k[0] == t.name for k in counts)),
                counts=dict(counts),
                signatures=tuple(sorted(totals, key=lambda s: (-totals[s], s))),
            )
        )
    return result


def comparison_switches(queries: Sequence[QueryComparison]) -> dict[str, list[Switch]]:
    """Switch points of both sides of a comparison, per swept query (from its per-point pairs)."""
    by_query: dict[str, list[QueryComparison]] = defaultdict(list)
    for comparison in queries:
        if comparison.point is not None:
            by_query[comparison.query_name].append(comparison)
    result: dict[str, list[Switch]] = {}
    for name, points in sorted(by_query.items()):
        points.sort(key=lambda c: point_order(c.point))
        switches: list[Switch] = []
        for side in ("baseline", "candidate"):
            previous: QueryComparison | None = None
            for comparison in points:
                current = getattr(comparison, side)
                if previous is not None:
                    before = getattr(previous, side).dominant.signature
                    if before != current.dominant.signature:
                        switches.append(
                            Switch(
                                current.label,
                                str(previous.point),
                                str(comparison.point),
                                before,
                                current.dominant.signature,
                            )
                        )
                previous = comparison
        result[name] = switches
    return result
