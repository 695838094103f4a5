"""Compare two sides of a store: the `detector.compare` front door, and what `planshift compare` runs."""

from __future__ import annotations

from collections.abc import Callable

from detector.engine.comparison.compare import compare_sides
from detector.engine.comparison.noise import latest_noise_run, with_noise_floors
from detector.engine.comparison.options import CompareOptions
from detector.engine.comparison.side_pair import resolve_pair
from detector.errors import PlanshiftError
from detector.model import ComparisonResult
from detector.store import Store


def compare(
    store: Store,
    baseline: str | None = None,
    candidate: str | None = None,
    *,
    run: int | None = None,
    options: CompareOptions | None = None,
    notes: Callable[[str], None] | None = None,
) -> ComparisonResult:
    """Compare `baseline` with `candidate` query by query, as `planshift compare` does.

    Sides are written as on the command line: a target name (`pg15`), `NAME@RUN`, a time window
    of ingested logs; None picks the sides of a run with two. `notes` hears which sides were
    chosen when they were not named in full. A/A noise floors of the latest noise run apply
    unless `options.noise_run` says otherwise.
    """
    chosen = options or CompareOptions()
    sides = resolve_pair(store, baseline, candidate, run)
    base, cand = sides.baseline, sides.candidate
    if sides.note and notes is not None:
        notes(sides.note)
    if base == cand:  # the same target row, or the same time window
        raise PlanshiftError(
            f"baseline and candidate are the same target ({base.name})",
            "name two different targets or runs (NAME@RUN)",
        )
    if chosen.noise_run == "auto":
        chosen = with_noise_floors(store, chosen, latest_noise_run(store, base))
    elif chosen.noise_run is not None:
        chosen = with_noise_floors(store, chosen, int(chosen.noise_run))
    return compare_sides(store, base, cand, chosen)
