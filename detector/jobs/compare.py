"""The compare job: two sides of a store compared, reported, kept and gated."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from detector.engine.comparison.options import CompareOptions
from detector.engine.comparison.store_compare import compare
from detector.model import ComparisonResult
from detector.reports import OutputSpec, gate_severity, resolve_outputs, write_reports
from detector.reports.common import verdict_summary
from detector.reports.escape import single_line
from detector.store import Store

log = logging.getLogger(__name__)


def compare_from_store(
    store_path: Path,
    baseline: str | None,
    candidate: str | None,
    run_id: int | None,
    options: CompareOptions,
    notes: Console | None = None,
) -> ComparisonResult:
    """Compare two sides; `notes` (stderr) hears which sides were chosen when not said in full."""

    def note(text: str) -> None:
        if notes is not None:
            notes.print(single_line(text), markup=False, highlight=False, soft_wrap=True)

    with Store(store_path, read_only=True) as store:
        return compare(store, baseline, candidate, run=run_id, options=options, notes=note)


def save_comparison(store_path: Path, result: ComparisonResult) -> int:
    """Keep a comparison and its findings in the store (tables comparisons, findings)."""
    with Store(store_path) as store, store.transaction():
        comparison_id = store.add_comparison(result.baseline, result.candidate, result.run_ids)
        store.add_findings(comparison_id, result.findings)
    return comparison_id


def compare_and_report(
    *,
    store_path: Path,
    baseline: str | None,
    candidate: str | None,
    run_id: int | None,
    output_format: str | None,
    outputs: Sequence[str],
    fail_on: str | None,
    options: CompareOptions,
    verbose: bool,
    console: Console,
    notes: Console,
    save: bool = False,
) -> str | None:
    """Print or write the reports; returns the worst finding severity (None when clean).

    `outputs` are --output values (FILE, FORMAT:FILE or -), see detector.reports.resolve_outputs;
    `notes` (stderr: stdout may carry the JSON report) hears which sides were compared when not
    said in full, and where the reports went when none went to stdout.
    """
    specs = resolve_outputs(output_format, outputs)
    gate = gate_severity(fail_on)
    result = compare_from_store(store_path, baseline, candidate, run_id, options, notes)
    if save:
        comparison_id = save_comparison(store_path, result)
        notes.print(
            f"comparison {comparison_id} saved in {store_path}", markup=False, soft_wrap=True
        )
    log.debug(
        "compared %s (run %s) with %s: %d queries, %d findings",
        result.baseline, ", ".join(map(str, result.run_ids)), result.candidate,
        len(result.queries), len(result.findings),
    )  # fmt: skip
    write_reports(result, specs, fail_on=gate, console=console, verbose=verbose)
    for spec in specs:
        log.debug("%s report to %s", spec.format, spec.path or "stdout")
    if all(spec.path is not None for spec in specs):
        notes.print(
            single_line(written(result, specs)), markup=False, highlight=False, soft_wrap=True
        )
    worst = result.worst_severity()
    return worst.value if worst else None


def written(result: ComparisonResult, specs: Sequence[OutputSpec]) -> str:
    """One line saying what was written where, when every report went to a file."""
    where = ", ".join(f"{spec.format} {spec.path}" for spec in specs)
    return f"{result.baseline} vs {result.candidate}: {verdict_summary(result)}; wrote {where}"
