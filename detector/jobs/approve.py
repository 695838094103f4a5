"""The approve job: the plans of a run written into the approved-plans lock file."""

from __future__ import annotations

from pathlib import Path

from detector.engine.comparison.approvals import ApprovedPlan, write_approvals
from detector.engine.comparison.compare import resolve_side
from detector.errors import PlanshiftError
from detector.store import Store


def approve(
    *, store_path: Path, target: str | None, run_id: int | None, lock: Path, update: bool
) -> tuple[int, int, int]:
    """Record every plan shape the target used per query (and point); (plans, added, removed)."""
    with Store(store_path, read_only=True) as store:
        run = store.run_or_latest(run_id)
        targets = store.targets([run])
        if target is None:
            if len(targets) != 1:
                names = ", ".join(t.name for t in targets)
                raise PlanshiftError(
                    f"run {run} has {len(targets)} targets: which one's plans are approved?",
                    f"--target one of: {names}",
                )
            record = targets[0]
        else:
            record = resolve_side(store, target, run)
        queries = store.queries()
        plans = set()
        for row in store.observations([record.target_id]):
            query = queries.get(row.query_key)
            signature = store.plan_record(row.fingerprint).signature
            name = query.name if query else row.query_key
            plans.add(ApprovedPlan(name, row.point, row.fingerprint, signature))
    added, removed = write_approvals(lock, plans, update=update)
    return len(plans), added, removed
