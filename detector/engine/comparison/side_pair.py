"""Which two targets `planshift compare` compares, from what the user typed (or left out).

- No `-b`/`-c`: the run's two sides, when the run (`--run`, else the latest complete run that is
  not an A/A noise run) has exactly two.
- One of them: the run's other side, when it has exactly two.
- Both, without `--run` or `@RUN`: the latest complete run in which both names match, so a
  later `planshift noise` or `run --variant current` does not hide the run the names come from.
- A name that leaves a part out (`pg15` on a run of servers x variants) takes that part from the
  other side: `-b pg15 -c pg17` compares `pg15/V` with `pg17/V` for the first variant `V` both
  have; `-b pg15 -c pg17/fast` compares `pg15/fast`. A note says what was chosen.
"""

from __future__ import annotations

from dataclasses import dataclass

from detector.engine.comparison.compare import resolve_side
from detector.engine.comparison.windows import is_window
from detector.errors import PlanshiftError
from detector.store import Store, TargetRecord


@dataclass(frozen=True)
class Sides:
    baseline: TargetRecord
    candidate: TargetRecord
    note: str | None = None  # what was chosen for the user, when they did not say it all


def resolve_pair(
    store: Store, baseline: str | None, candidate: str | None, run_id: int | None
) -> Sides:
    if baseline is not None and candidate is not None:
        if is_window(baseline) or is_window(candidate) or "@" in baseline + candidate:
            return Sides(
                resolve_side(store, baseline, run_id), resolve_side(store, candidate, run_id)
            )
        runs = [run_id] if run_id is not None else _complete_runs(store)
        for run in runs:
            found = _match_pair(store.targets([run]), baseline, candidate)
            if found is not None and run != runs[0]:
                later = f"run {run}, the latest with both {baseline} and {candidate}"
                return Sides(
                    found.baseline, found.candidate, "; ".join(filter(None, [found.note, later]))
                )
            if found is not None:
                return found
        # no run has both: the latest run's own error (which name is unknown or ambiguous)
        resolve_side(store, baseline, run_id)
        resolve_side(store, candidate, run_id)
        raise PlanshiftError(
            f"{baseline!r} and {candidate!r} name the same target",
            "name two different targets or runs (NAME@RUN)",
        )
    return _two_sides(store, baseline, candidate, run_id)


def _complete_runs(store: Store) -> list[int]:
    latest = store.run_or_latest(None)
    runs = [r.run_id for r in store.runs() if r.status == "complete"]
    return [latest, *sorted((r for r in runs if r != latest), reverse=True)]


def _default_run(store: Store) -> int:
    records = {r.run_id: r for r in store.runs()}
    runs = _complete_runs(store)
    plain = [r for r in runs if records[r].kind != "noise"]
    return (plain or runs)[0]


def _two_sides(
    store: Store, baseline: str | None, candidate: str | None, run_id: int | None
) -> Sides:
    run = run_id if run_id is not None else _default_run(store)
    targets = store.targets([run])
    if not targets:
        raise PlanshiftError(f"run {run} not found in {store.path}", "see `planshift runs`")
    names = ", ".join(t.name for t in targets)
    if len(targets) != 2:
        raise PlanshiftError(
            f"run {run} has {len(targets)} sides: which two are compared?",
            f"--baseline NAME --candidate NAME, from: {names}",
        )
    first, second = targets
    if baseline is not None:
        base = resolve_side(store, baseline, run)
        pair = Sides(base, second if base.target_id == first.target_id else first)
    elif candidate is not None:
        cand = resolve_side(store, candidate, run)
        pair = Sides(second if cand.target_id == first.target_id else first, cand)
    else:
        pair = Sides(first, second)
    note = f"comparing {pair.baseline.name} -> {pair.candidate.name}, the two sides of run {run}"
    return Sides(pair.baseline, pair.candidate, note)


def _parts(target: TargetRecord) -> tuple[str, str]:
    return str(target.info.get("server")), str(target.info.get("variant"))


def _candidates(targets: list[TargetRecord], name: str) -> tuple[list[TargetRecord], int | None]:
    """Targets a name may mean, and which part (0 server, 1 variant) it names when partial."""
    exact = [t for t in targets if t.name == name or "/".join(_parts(t)) == name]
    if exact:
        return exact[:1], None
    for part in (0, 1):
        partial = [t for t in targets if _parts(t)[part] == name]
        if partial:
            return partial, part
    return [], None


def _match_pair(targets: list[TargetRecord], baseline: str, candidate: str) -> Sides | None:
    bases, base_part = _candidates(targets, baseline)
    cands, cand_part = _candidates(targets, candidate)
    pairs = [
        (base, cand)
        for base in bases
        for cand in cands
        if base.target_id != cand.target_id
        and _agree(base, cand, base_part if len(bases) > 1 else None)
        and _agree(cand, base, cand_part if len(cands) > 1 else None)
    ]
    if not pairs:
        return None
    base, cand = pairs[0]
    if len(bases) == 1 and len(cands) == 1:
        return Sides(base, cand)
    chosen = ", ".join(
        f"{given} -> {t.name}"
        for given, t in ((baseline, base), (candidate, cand))
        if given != t.name
    )
    how = "the first variant both have" if len(pairs) > 1 else "the part the other side names"
    return Sides(base, cand, f"comparing {chosen} ({how}; name SERVER/VARIANT to choose)")


def _agree(side: TargetRecord, other: TargetRecord, named: int | None) -> bool:
    """A name giving one part (0 server, 1 variant) of an ambiguous side: the other part must
    be the opposite side's."""
    return named is None or _parts(side)[1 - named] == _parts(other)[1 - named]
