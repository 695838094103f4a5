"""The sides of a comparison built in bulk from one grouped store read (`GroupedSamples`).

A side is one query (and sweep point) on one target or time window: its plan variants, the
distribution of its durations, and its samples as windows of the arrays the read returned.
A million queries make two million sides, so they are built column by column (numpy for the
numbers, `map` over constructors for the objects), never sample by sample.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from detector.engine.comparison.segments import Floats, Ints, offsets, segment_quantiles
from detector.model import PlanVariant, Side, TimingStats
from detector.model.bulk import builder
from detector.model.host import HostConditions
from detector.model.samples import Samples
from detector.store import GroupedSamples, TargetRecord

if TYPE_CHECKING:
    from detector.engine.comparison.query_pairs import Plans

# TimingStats of a side: n is counted apart; then median, p90, p99, min and max
SUMMARY_QUANTILES = (0.5, 0.9, 0.99, 0.0, 1.0)
new_variant, new_stats, new_side = builder(PlanVariant), builder(TimingStats), builder(Side)


def side_settings_of(target: TargetRecord) -> dict[str, str]:
    """What rules see of a side's settings: the server-level settings recorded when the run
    started (io_method, shared_buffers, data_checksums, jit ...), overlaid with the variant's
    GUCs, so a same-plan slowdown can name io_method as well as effective_io_concurrency."""
    recorded = target.info.get("settings") or {}
    return {**{str(k): str(v) for k, v in recorded.items()}, **target.gucs}


def production_calls(target: TargetRecord, query_key: str) -> int | None:
    """The query's executions in production, when its workload was captured (`calls`)."""
    calls = (target.info.get("production_calls") or {}).get(query_key)
    return int(calls) if isinstance(calls, int) else None


def most_frequent_first(variant: PlanVariant) -> tuple[int, str]:
    """Sort key of a side's plan variants: the dominant first, ties by fingerprint (stable)."""
    return (-variant.samples, variant.fingerprint)


class BulkSides:
    """Every side (query, point, target) of `GroupedSamples`, built in bulk, in group order.

    A side is a run of consecutive groups, as `GroupedSamples` keeps them; its samples are
    the rows of those groups, in group order."""

    def __init__(self, grouped: GroupedSamples) -> None:
        g = self.grouped = grouped
        numbers, targets = g.query_numbers, np.asarray(g.target_ids, np.int64)
        starts = np.ones(len(numbers), np.bool_)
        starts[1:] = (numbers[1:] != numbers[:-1]) | (targets[1:] != targets[:-1])
        first = np.flatnonzero(starts)
        self.first_groups = first.tolist()  # of each side: its groups run to the next's first
        self.group_ends = [*self.first_groups[1:], len(numbers)]
        self.side_queries, self.side_targets = numbers[first], targets[first]

    def pairs(self, baseline_id: int, candidate_id: int) -> tuple[list[int], list[int], list[int]]:
        """The first group, baseline side and candidate side of each query (and point) that
        has both sides, in key order."""
        count = int(self.side_queries.max()) + 1 if len(self.side_queries) else 0
        found = []
        for target_id in (baseline_id, candidate_id):
            side_of = np.full(count, -1)
            mine = np.flatnonzero(self.side_targets == target_id)
            side_of[self.side_queries[mine]] = mine
            found.append(side_of)
        base, cand = found
        both = (base >= 0) & (cand >= 0)
        first = np.asarray(self.first_groups, np.int64)[base[both]]
        return first.tolist(), base[both].tolist(), cand[both].tolist()

    def build(
        self,
        targets: Mapping[int, TargetRecord],
        plans: Plans,
        hosts: Mapping[int, HostConditions] | None = None,
    ) -> list[Side]:
        """`hosts`: each target's host conditions by target id, when the run recorded them."""
        g = self.grouped
        host_of = hosts or {}
        rows = offsets(g.sizes)
        edges = [*self.first_groups, len(g.sizes)]  # of the sides, among the groups
        known_rows = _known_rows(g.duration_known, rows)  # the groups' among known durations
        samples = known_rows[edges]
        side_lo, side_hi = samples[:-1], samples[1:]
        durations = _known(g.durations_ms, g.duration_known)
        summaries = segment_quantiles(durations, side_lo, side_hi, SUMMARY_QUANTILES).T.tolist()
        # one group per side (one plan shape): a group's median is its side's, the same float
        medians = summaries[0] if len(self.first_groups) == len(g.sizes) else None
        variants = self._variants(plans, rows, known_rows, durations, medians)
        counts = side_hi - side_lo
        timings: list[TimingStats | None] = list(map(new_stats, counts.tolist(), *summaries))
        for empty in np.flatnonzero(counts == 0).tolist():
            timings[empty] = None
        side_ids = self.side_targets.tolist()  # target ids, or the windows' made-up ids

        def per_side(value: Callable[[TargetRecord], Any]) -> list[Any]:
            """value(target) of each side's target, one object per target shared by its sides."""
            of_target = {side_id: value(target) for side_id, target in targets.items()}
            return list(map(of_target.__getitem__, side_ids))

        planned = _known_rows(g.planning_known, rows)[edges]
        # windows with the same bounds share their int objects (a million sides: 200 MB)
        bounds = samples.tolist()
        planning_bounds = bounds if np.array_equal(planned, samples) else planned.tolist()
        return list(
            map(
                new_side,
                per_side(attrgetter("name")),
                per_side(attrgetter("server_version_num")),
                per_side(side_settings_of),
                self._plans_of_sides(variants),
                _windows(durations, bounds),
                timings,
                [
                    production_calls(side, g.query_keys[first])
                    for side, first in zip(per_side(_itself), self.first_groups, strict=True)
                ]
                if any(t.info.get("production_calls") for t in targets.values())
                else [None] * len(side_ids),
                _windows(_known(g.planning_ms, g.planning_known), planning_bounds),
                _windows(_known(g.sample_indices, g.duration_known), bounds),
                _windows(_known(g.total_cost, g.duration_known), bounds),
                per_side(lambda target: target.info.get("tables") or {}),
                per_side(lambda target: host_of.get(target.target_id)),
            )
        )

    def _variants(
        self,
        plans: Plans,
        rows: Ints,
        known_rows: Ints,
        durations: Floats,
        medians: list[float] | None,
    ) -> list[PlanVariant]:
        g = self.grouped
        lo, hi = known_rows[:-1], known_rows[1:]
        median_ms: list[float | None] = (
            segment_quantiles(durations, lo, hi, (0.5,))[:, 0].tolist()
            if medians is None
            else list(medians)
        )
        if (hi == lo).any():  # groups without durations (plan-only): NaN -> None
            empty = (hi == lo).tolist()
            median_ms = [None if none else m for m, none in zip(median_ms, empty, strict=True)]
        median_cost = segment_quantiles(g.total_cost, rows[:-1], rows[1:], (0.5,))[:, 0]
        signatures, plan_objects = plans.many(g.target_ids, g.query_keys, g.points, g.fingerprints)
        return list(
            map(
                new_variant,
                g.fingerprints,
                signatures,
                plan_objects,
                g.sizes.tolist(),
                median_ms,
                median_cost.tolist(),
                g.median_shared_blocks.tolist(),
            )
        )

    def _plans_of_sides(self, variants: list[PlanVariant]) -> list[tuple[PlanVariant, ...]]:
        if len(self.first_groups) == len(variants):  # one plan shape per side
            return [(variant,) for variant in variants]
        return [
            (variants[first],)
            if end - first == 1
            else tuple(sorted(variants[first:end], key=most_frequent_first))
            for first, end in zip(self.first_groups, self.group_ends, strict=True)
        ]


def _itself(target: TargetRecord) -> TargetRecord:
    return target


def _known(values: npt.NDArray[Any], known: npt.NDArray[np.bool_]) -> npt.NDArray[Any]:
    """The values where known: the array itself, not a copy, when all are."""
    return values if known.all() else values[known]


def _known_rows(known: npt.NDArray[np.bool_], rows: Ints) -> Ints:
    """Where each of `rows` falls among the known values (`offsets(known)[rows]`)."""
    return rows if known.all() else offsets(known)[rows]


def _windows(values: npt.NDArray[Any], edges: list[int]) -> list[Samples[Any]]:
    """values[edges[i]:edges[i + 1]] for each i, as `Samples` sharing `values`."""
    window: Callable[[npt.NDArray[Any], int, int], Samples[Any]] = Samples
    return list(map(window, repeat(values), edges[:-1], edges[1:]))
