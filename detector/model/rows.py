"""Turn model objects into column lists for batched inserts, and guard against stored passwords."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from detector.errors import PlanshiftError
from detector.model import Observation, Plan, fingerprint, shape_json, signature
from detector.model.records import OBSERVATION_SOURCES, to_utc_naive

# `password=secret` in a conninfo string (also PGPASSWORD=..., ?password=... in a URI query).
_CONNINFO_PASSWORD = re.compile(r"password\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&]*)", re.IGNORECASE)
# `postgresql://user:secret@host` (the userinfo of a URI).
_URI_PASSWORD = re.compile(r"[a-z][a-z0-9+.-]*://[^/@\s:]*:([^@\s/]*)@", re.IGNORECASE)
_PASSWORD_KEYS = {"password", "passwd", "pgpassword"}


def is_redacted(secret: str) -> bool:
    """What collectors write in place of a password: '', '***', 'redacted', '<redacted>'."""
    secret = secret.strip("'\"")
    return set(secret) <= {"*"} or secret.strip("<>[]").lower() == "redacted"


def find_password(value: Any, where: str) -> str | None:
    """Where in `value` (nested mappings, lists, strings) a clear-text password sits, or None."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            place = f"{where}.{key}"
            secret = isinstance(item, str) and str(key).lower() in _PASSWORD_KEYS
            if secret and not is_redacted(item):
                return place
            found = find_password(item, place)
            if found:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = find_password(item, f"{where}[{index}]")
            if found:
                return found
        return None
    if isinstance(value, str):
        for pattern in (_CONNINFO_PASSWORD, _URI_PASSWORD):
            if any(not is_redacted(m.group(1)) for m in pattern.finditer(value)):
                return where
    return None


def reject_passwords(**documents: Any) -> None:
    for name, document in documents.items():
        place = find_password(document, name)
        if place is not None:
            raise PlanshiftError(
                f"refusing to store a password (found in target {place})",
                "redact connection strings before storing them (password=*** or user:***@host)",
            )


def to_json(document: Any) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class NewPlan:
    """A plan shape the store has not seen yet: its `plans` row and its `plan_nodes` rows."""

    fingerprint: str
    signature: str
    shape_json: str
    plan_json: str
    first_seen: Any  # naive UTC datetime
    nodes: tuple[tuple[Any, ...], ...]

    @property
    def plan_row(self) -> tuple[Any, ...]:
        """The `plans` row, in PLAN_COLUMNS order."""
        return (self.fingerprint, self.signature, self.shape_json, self.plan_json, self.first_seen)


# Columns of plan_nodes after (fingerprint, path, parent_path, relation): PlanNode attributes.
_NODE_ATTRIBUTES = (
    "node_type",
    "index_name",
    "join_type",
    "strategy",
    "partial_mode",
    "parent_relationship",
    "scan_direction",
    "cte_name",
    "subplan_name",
)
PLAN_NODE_COLUMNS = ("fingerprint", "path", "parent_path", "relation", *_NODE_ATTRIBUTES)


def plan_node_rows(plan_fingerprint: str, plan: Plan) -> tuple[tuple[Any, ...], ...]:
    rows: list[tuple[Any, ...]] = []
    for path, node in plan.nodes():
        parent_path = path.rpartition(".")[0] or None
        attributes = (getattr(node, name) for name in _NODE_ATTRIBUTES)
        rows.append((plan_fingerprint, path, parent_path, node.qualified_relation, *attributes))
    return tuple(rows)


PLAN_COLUMNS = ("fingerprint", "signature", "shape", "plan_json", "first_seen")


def heap_blocks(plan: Plan) -> tuple[int | None, int | None]:
    """Exact and lossy heap blocks summed over the plan's nodes; None when no node reports them."""
    exact: int | None = None
    lossy: int | None = None
    for _, node in plan.nodes():
        if node.exact_heap_blocks is not None:
            exact = (exact or 0) + node.exact_heap_blocks
        if node.lossy_heap_blocks is not None:
            lossy = (lossy or 0) + node.lossy_heap_blocks
    return exact, lossy


def observation_rows(
    observations: Sequence[Observation], run_of_target: Mapping[int, int]
) -> tuple[list[tuple[Any, ...]], dict[str, NewPlan]]:
    """Rows in OBSERVATION_COLUMNS order (without observation_id), and each plan shape.

    Fingerprints are computed once per Plan object. Raises PlanshiftError for an unknown
    target or source; nothing has been written at that point.
    """
    rows: list[tuple[Any, ...]] = []
    shapes: dict[str, NewPlan] = {}
    fingerprint_of: dict[int, str] = {}
    for obs in observations:
        if obs.target_id not in run_of_target:
            raise PlanshiftError(f"observation for unknown target id {obs.target_id}")
        if obs.source not in OBSERVATION_SOURCES:
            raise PlanshiftError(f"unknown observation source {obs.source!r}")
        key = fingerprint_of.get(id(obs.plan))
        if key is None:
            key = fingerprint_of[id(obs.plan)] = fingerprint(obs.plan)
        collected_at = to_utc_naive(obs.collected_at)
        known = shapes.get(key)
        if known is None or collected_at < known.first_seen:
            shapes[key] = _new_plan(key, obs, collected_at, known)
        rows.append(_observation_row(obs, run_of_target[obs.target_id], key, collected_at))
    return rows, shapes


def _new_plan(key: str, obs: Observation, first_seen: Any, known: NewPlan | None) -> NewPlan:
    nodes = known.nodes if known else plan_node_rows(key, obs.plan)
    shape = shape_json(obs.plan)
    return NewPlan(key, signature(obs.plan), shape, obs.plan_json, first_seen, nodes)


def _observation_row(obs: Observation, run_id: int, key: str, collected_at: Any) -> tuple[Any, ...]:
    plan = obs.plan
    root = plan.root
    buffers = plan.buffers_total()
    return (
        *(run_id, obs.target_id, obs.query_key, obs.point, obs.params, obs.sample_index),
        *(key, obs.source, plan.total_cost, plan.startup_cost, root.plan_rows),
        *(root.actual_rows_total, obs.duration_ms, obs.planning_ms, obs.client_ms),
        *(buffers.shared_hit, buffers.shared_read, buffers.shared_dirtied, buffers.shared_written),
        *(buffers.temp_read, buffers.temp_written),
        *heap_blocks(plan),
        *(buffers.io_read_ms, collected_at),
    )
