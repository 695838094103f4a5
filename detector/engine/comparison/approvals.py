"""Approved plans: a small, reviewable lock file of the plan shapes accepted per query.

The CI-gate counterpart of Oracle SPM or Aurora QPM baselines: `planshift approve` records
the plans a target uses now; a later comparison flags any plan that is not approved (rule
PS600); `planshift approve --update` accepts the changes, and the diff of the file shows
them in review.
"""

from __future__ import annotations

import json
import tomllib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from detector.errors import PlanshiftError

FORMAT_VERSION = 1
HEADER = """\
# planshift approved plans: the plan shapes accepted for each query (and sweep point).
# Commit this file. `planshift approve --update` rewrites it; review its diff like code.
"""


@dataclass(frozen=True, order=True)
class ApprovedPlan:
    query: str
    point: str | None
    fingerprint: str
    signature: str


def approval_key(query: str, point: str | None) -> str:
    return f"{query} [{point}]" if point else query


def read_approvals(path: Path) -> dict[str, dict[str, str]]:
    """The approved plans per `query [point]`: fingerprint -> signature (as the file names it;
    the fingerprint itself when a hand-edited entry has no signature)."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise PlanshiftError(
            f"approved-plans file {path} not found", "create it with `planshift approve`"
        ) from None
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PlanshiftError(f"cannot read approved-plans file {path}: {exc}") from exc
    if data.get("version") != FORMAT_VERSION:
        raise PlanshiftError(
            f"{path}: unsupported version {data.get('version')!r}",
            f"this planshift reads version {FORMAT_VERSION}",
        )
    approved: dict[str, dict[str, str]] = defaultdict(dict)
    for index, entry in enumerate(data.get("plan", [])):
        query, fingerprint = entry.get("query"), entry.get("fingerprint")
        if not isinstance(query, str) or not isinstance(fingerprint, str):
            raise PlanshiftError(f"{path}: plan[{index}] needs query and fingerprint strings")
        point = entry.get("point")
        signature = entry.get("signature")
        key = approval_key(query, point if isinstance(point, str) else None)
        approved[key][fingerprint] = signature if isinstance(signature, str) else fingerprint
    return dict(approved)


def render_approvals(plans: Iterable[ApprovedPlan]) -> str:
    lines = [HEADER, f"version = {FORMAT_VERSION}"]
    for plan in sorted(set(plans)):
        lines.append("")
        lines.append("[[plan]]")
        lines.append(f"query = {json.dumps(plan.query)}")
        if plan.point is not None:
            lines.append(f"point = {json.dumps(plan.point)}")
        lines.append(f"fingerprint = {json.dumps(plan.fingerprint)}")
        lines.append(f"signature = {json.dumps(plan.signature)}")
    return "\n".join(lines) + "\n"


def write_approvals(path: Path, plans: Iterable[ApprovedPlan], *, update: bool) -> tuple[int, int]:
    """Write the lock file; returns (plans added, plans removed) relative to the old file."""
    new = set(plans)
    old: set[tuple[str, str]] = set()
    if path.exists():
        if not update:
            raise PlanshiftError(
                f"{path} already exists",
                "`planshift approve --update` accepts the current plans (review the diff)",
            )
        old = {(key, fp) for key, fps in read_approvals(path).items() for fp in fps}
    path.write_text(render_approvals(new))
    current = {(approval_key(p.query, p.point), p.fingerprint) for p in new}
    return len(current - old), len(old - current)
