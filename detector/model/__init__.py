"""The data model shared by collectors, store, compare and rules (rules import only this)."""

from __future__ import annotations

from detector.model.comparison import (
    ComparisonResult,
    Finding,
    PlanVariant,
    QueryComparison,
    Severity,
    Side,
    TimingComparison,
    TimingStats,
    Verdict,
)
from detector.model.fingerprint import (
    ScanAccess,
    fingerprint,
    node_label,
    scan_accesses,
    shape_json,
    signature,
)
from detector.model.observation import Observation
from detector.model.plan import Buffers, Plan, PlanNode, normalized_cost, parse_node, parse_plan

__all__ = [
    "Buffers",
    "ComparisonResult",
    "Finding",
    "Observation",
    "Plan",
    "PlanNode",
    "PlanVariant",
    "QueryComparison",
    "ScanAccess",
    "Severity",
    "Side",
    "TimingComparison",
    "TimingStats",
    "Verdict",
    "fingerprint",
    "node_label",
    "normalized_cost",
    "parse_node",
    "parse_plan",
    "scan_accesses",
    "shape_json",
    "signature",
]
