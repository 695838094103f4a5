"""The rule cases, tests/fixtures/rules/<CODE>/<case>.toml: hand-written, the rules' spec.

One folder per rule code, one file per case (found by globbing: a new rule's folder needs
no list). A case gives the two sides of one query and every finding the whole catalog makes
of it, code, severity and full message, in report order (`Finding.sort_key`):

    description = "PG 15 Index Scan -> PG 15 Seq Scan: the message points at the flip"
    options = { near_tie = 0.06 }      # optional: overrides for the folder's rule
    timing = { min_effect = 0.05 }     # optional: keyword arguments of compare_timings
    paired = true                      # optional: the sides ran interleaved, sample i together

    [baseline]
    plan = "tests/fixtures/plans/pg15/range_index_scan.json"
    durations_ms = "tests/fixtures/plans/timings/pg15/range_index_scan.json"
    samples = 12                       # optional: the first 12 measured executions

    [candidate]                        # several shapes: dominant = most samples
    plans = [{ fixture = "...", samples = 14, durations_ms = "tests/.../timings/..." }, ...]
    planning_ms = "tests/fixtures/plans/timings/rules/pg15/star_join.json"   # optional (PS405)
    settings = { random_page_cost = "1.1" }   # optional, else the dominant fixture's gucs
    host = { ... }                     # optional: detector.model.host.HostConditions
    failures = [{ fixture = "tests/fixtures/failures/pg17/x.json", samples = [0, 1] }]

    [[findings]]                       # or `findings = []` at the top: nothing fires
    code = "PS200"
    severity = "error"
    message = "29.6x slower (95% CI ...), ...; plan changed (see PS100)"

Durations are measured (a string: the executions tests/fixtures/capture_timings.py timed on a
real server, `execution_ms` and `planning_ms`) or, where a case is not about the clock, written
out (a list); the description then says why. `check` answers what differs, naming the file.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from detector.engine import stats, stats_paired
from detector.engine.comparison.plan_documents import side_of
from detector.model import Finding, QueryComparison, Side, fingerprint, parse_plan, signature
from detector.model.failures import Failures, QueryFailure
from detector.model.host import HostConditions

ROOT = Path(__file__).resolve().parent.parent
CASES_DIR = ROOT / "tests" / "fixtures" / "rules"
CASE_KEYS = {"description", "options", "timing", "paired", "approved_plans", "findings"}
SIDE_KEYS = {"plan", "plans", "durations_ms", "samples", "planning_ms", "settings", "host"}
SIDE_KEYS |= {"failures", "label"}
FINDING_KEYS = {"code", "severity", "message"}
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def case_files() -> list[Path]:
    """Every case of every rule folder."""
    return sorted(CASES_DIR.glob("PS*/*.toml"))


@dataclass(frozen=True)
class Case:
    path: Path
    code: str  # the rule under test: the folder's name
    description: str
    options: dict[str, Any]
    findings: list[dict[str, str]]  # expected, in report order
    comparison: QueryComparison

    @property
    def name(self) -> str:
        return shown(self.path)

    def fires(self) -> bool:
        """The rule under test is expected to fire."""
        return any(f["code"] == self.code for f in self.findings)


class CaseError(ValueError):
    """A case file that does not follow the format above (the message names the file)."""


def load_case(path: Path) -> Case:
    try:
        raw = tomllib.loads(path.read_text())
        return _case(path, raw)
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError, OSError) as exc:
        raise CaseError(f"{shown(path)}: {exc}") from exc


def shown(path: Path) -> str:
    """A case file as messages name it: relative to the checkout when inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def check(case: Case, findings: list[Finding]) -> list[str]:
    """What differs between the case's expected findings and `findings`, one line each."""
    got = [{"code": f.code, "severity": f.severity.value, "message": f.message} for f in findings]
    problems = []
    for i, (want, have) in enumerate(zip(case.findings, got, strict=False), start=1):
        for key in ("code", "severity", "message"):
            if want[key] != have[key]:
                problems.append(
                    f"finding {i} ({want['code']}): {key} expected {want[key]!r}, got {have[key]!r}"
                )
    for i, want in enumerate(case.findings[len(got) :], start=len(got) + 1):
        problems.append(f"finding {i} expected, not made: {want['code']} {want['message']!r}")
    for i, have in enumerate(got[len(case.findings) :], start=len(case.findings) + 1):
        problems.append(
            f"finding {i} made, not expected: {have['code']} {have['severity']} {have['message']!r}"
        )
    return [f"{case.name}: {problem}" for problem in problems]


def _case(path: Path, raw: dict[str, Any]) -> Case:
    unknown = set(raw) - CASE_KEYS - {"baseline", "candidate"}
    if unknown:
        raise CaseError(f"unknown keys {sorted(unknown)}")
    if "findings" not in raw:
        raise CaseError("no `findings` (write `findings = []` when nothing fires)")
    findings = [dict(f) for f in raw["findings"]]
    for i, found in enumerate(findings, start=1):
        if set(found) != FINDING_KEYS:
            raise CaseError(f"finding {i} has keys {sorted(found)}, not {sorted(FINDING_KEYS)}")
    for label in ("baseline", "candidate"):
        extra = set(raw[label]) - SIDE_KEYS
        if extra:
            raise CaseError(f"[{label}] has unknown keys {sorted(extra)}")
    indexed = "failures" in raw["baseline"] or "failures" in raw["candidate"]
    baseline = _side("baseline", raw["baseline"], indexed)
    candidate = _side("candidate", raw["candidate"], indexed)
    compare = stats_paired.compare_paired if raw.get("paired") else stats.compare_timings
    timing = compare(baseline.durations_ms, candidate.durations_ms, **raw.get("timing", {}))
    fixture = _first_fixture(raw["baseline"]) or _first_fixture(raw["candidate"])
    failures = Failures(_failures(raw["baseline"]), _failures(raw["candidate"]))
    comparison = QueryComparison(
        query_key=f"{path.parent.name}/{path.stem}",
        query_name=path.stem,
        sql=_json(fixture).get("sql", ""),
        baseline=baseline,
        candidate=candidate,
        timing=timing,
        approved=_approved(raw),
        failures=failures if failures.baseline or failures.candidate else None,
    )
    return Case(
        path, path.parent.name, raw["description"], raw.get("options", {}), findings, comparison
    )


def _json(relative: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((ROOT / relative).read_text())
    return document


def _measured(value: str | list[float], key: str, samples: int | None) -> list[float]:
    """Durations written out, or the `key` list of a capture_timings.py file (first `samples`)."""
    if not isinstance(value, str):
        return [float(v) for v in value]
    chosen = [float(v) for v in _json(value)[key]][:samples]
    if samples is not None and len(chosen) != samples:
        raise CaseError(f"{samples} samples asked, {value} has {len(chosen)}")
    return chosen


def _side(label: str, raw: dict[str, Any], indexed: bool) -> Side:
    """One side, built as `detector.compare_plans` builds its sides; a side that failed on
    every execution has no plan. `indexed` (a case with failures): its samples are numbered
    as a run numbers them, skipping the samples that failed."""
    failures = _failures(raw)
    if "plan" not in raw and "plans" not in raw:
        fixture = _json(raw["failures"][0]["fixture"])
        return Side(raw.get("label", label), fixture["server_version_num"], {}, (), (), None)
    if "plans" in raw and "durations_ms" not in raw:  # each plan's own measured executions
        entries = raw["plans"]
        durations = [
            d
            for entry in entries
            for d in _measured(entry["durations_ms"], "execution_ms", int(entry["samples"]))
        ]
    elif "plans" in raw:
        entries = raw["plans"]
        durations = _measured(raw["durations_ms"], "execution_ms", raw.get("samples"))
    else:
        entries = [{"fixture": raw["plan"]}]
        durations = _measured(raw["durations_ms"], "execution_ms", raw.get("samples"))
    planning = _measured(raw.get("planning_ms", []), "planning_ms", raw.get("samples"))
    docs = [_json(entry["fixture"]) for entry in entries]
    side = side_of(
        raw.get("label", label),
        [doc["explain"] for doc in docs],
        durations,
        samples=[int(entry.get("samples", len(durations))) for entry in entries],
        planning_ms=planning,
    )
    by_fingerprint = {fingerprint(parse_plan(doc["explain"])): doc for doc in docs}
    dominant = by_fingerprint[side.dominant.fingerprint]
    settings = raw.get("settings", dominant.get("gucs") or {})
    host = raw.get("host")
    side = replace(
        side,
        server_version_num=dominant.get("server_version_num"),
        settings={str(k): str(v) for k, v in settings.items()},
        host=None
        if host is None
        else HostConditions(**{k: tuple(v) if isinstance(v, list) else v for k, v in host.items()}),
    )
    if not indexed:
        return side
    failed = {failure.sample_index for failure in failures}
    indices = [i for i in range(len(durations) + len(failed)) if i not in failed]
    return replace(side, sample_indices=tuple(indices[: len(durations)]))


def _failures(raw: dict[str, Any]) -> tuple[QueryFailure, ...]:
    """`failures = [{ fixture = ".../pg17/x.json", samples = [-3], phase = "warmup" }]`: the
    captured error of that fixture (tests/fixtures/failures/capture_failures.py), once per
    sample index, with `params` (JSON text) when given."""
    found = []
    for entry in raw.get("failures", ()):
        error = _json(entry["fixture"])["error"]
        for index in entry["samples"]:
            found.append(
                QueryFailure(
                    target_id=0,
                    query_key="",
                    point=None,
                    sample_index=int(index),
                    phase=entry.get("phase", "measurement"),
                    params=entry.get("params", "{}"),
                    sqlstate=error["sqlstate"],
                    message=error["message"],
                    detail=error["detail"],
                    hint=error["hint"],
                    failed_at=T0 + timedelta(seconds=len(found)),
                )
            )
    return tuple(found)


def _first_fixture(raw: dict[str, Any]) -> str:
    """A side's first fixture: its plan, else its first failure's."""
    if "plan" in raw:
        return str(raw["plan"])
    entries = raw.get("plans") or raw.get("failures") or [{"fixture": ""}]
    return str(entries[0]["fixture"])


def _approved(raw: dict[str, Any]) -> dict[str, str] | None:
    """`approved_plans = [fixture paths]`: those captured plans, fingerprint -> signature (as
    the lock file gives them)."""
    if "approved_plans" not in raw:
        return None
    plans = [parse_plan(_json(path)["explain"]) for path in raw["approved_plans"]]
    return {fingerprint(plan): signature(plan) for plan in plans}
