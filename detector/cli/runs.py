"""`planshift runs`: the runs of a store."""

from __future__ import annotations

from detector.cli.common import (
    DEFAULT_STORE,
    FormatOption,
    StoreOption,
    check_format,
    out,
    print_json,
    user_errors,
)
from detector.reports.tables import table


def runs(store: StoreOption = DEFAULT_STORE, output_format: FormatOption = "terminal") -> None:
    """List the runs in the store with their targets."""
    from detector.model.failures import failed_queries_text
    from detector.reports.listing_json import runs_document
    from detector.store import Store

    as_json = check_format(output_format)
    with user_errors(), Store(store, read_only=True) as db:
        records, targets, failed = db.runs(), db.targets(), db.failed_queries()
    if as_json:
        print_json(runs_document(records, targets, failed))
        return
    rows = [
        (record.run_id, record.label, str(record.started_at)[:19], record.status,
         ", ".join(t.name for t in targets if t.run_id == record.run_id))
        for record in records
    ]  # fmt: skip
    out.print(table(("run", "label", "started", "status", "targets"), rows, numeric=[0]))
    for record in records:
        if record.note:
            out.print(f"run {record.run_id}: {record.note}", markup=False)
        if record.run_id in failed:
            text = f"run {record.run_id}: {failed_queries_text(failed[record.run_id])}"
            out.print(text, markup=False)
