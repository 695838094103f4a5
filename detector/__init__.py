"""planshift: PostgreSQL plan-regression detector.

The Python API (the CLI is a thin layer over it)::

    from detector import compare_plans
    result = compare_plans(before_json, after_json, before_ms=[...], after_ms=[...])
    for finding in result.findings: print(finding.code, finding.message)

    from detector import Store, compare
    with Store("planshift.duckdb", read_only=True) as store:
        result = compare(store, "pg15", "pg17")

Names load on first use, so `import detector.model` (what rules and collectors import) stays
light.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from detector.version import __version__

if TYPE_CHECKING:
    from detector.engine.comparison.options import CompareOptions
    from detector.engine.comparison.plan_documents import compare_plans
    from detector.engine.comparison.store_compare import compare
    from detector.errors import PlanshiftError
    from detector.jobs.workload import load_workload
    from detector.model import ComparisonResult, Finding, QueryComparison
    from detector.store import Store

_API = {
    "compare_plans": "detector.engine.comparison.plan_documents",
    "compare": "detector.engine.comparison.store_compare",
    "CompareOptions": "detector.engine.comparison.options",
    "Store": "detector.store",
    "load_workload": "detector.jobs.workload",
    "PlanshiftError": "detector.errors",
    "ComparisonResult": "detector.model",
    "Finding": "detector.model",
    "QueryComparison": "detector.model",
}

__all__ = [
    "CompareOptions",
    "ComparisonResult",
    "Finding",
    "PlanshiftError",
    "QueryComparison",
    "Store",
    "__version__",
    "compare",
    "compare_plans",
    "load_workload",
]


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'detector' has no attribute {name!r}")
    value = getattr(import_module(_API[name]), name)
    globals()[name] = value
    return value
