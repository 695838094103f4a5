"""What a captured workload covers of production, and what the check is blind to.

Production time is the total execution time pg_stat_statements holds for the database, less
planshift's own statements. Each statement is in exactly one of three parts: captured (a
query in the workload), blind (the application's, but not replayed: writes, queries that do
not plan, temporary tables, statements beyond --top, utility statements), or left out (not
the application's workload: monitoring, catalog reads, --exclude). Queries replayed as their
generic plan are captured, and named as compared by plan only.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from collectors.capture.workload_statements import IGNORED, Statement
from detector.model.units import counted

WHAT = {
    "utility": "utility statements (BEGIN, SET, DDL, VACUUM ...)",
    "catalog": "catalog reads (drivers, ORMs, tools)",
    "monitoring": "monitoring of statistics views",
    "planshift": "planshift's own statements (not production's time)",
}


def one_line(sql: str, width: int = 100) -> str:
    text = re.sub(r"\s+", " ", sql).strip()
    return text if len(text) <= width else text[: width - 3] + "..."


def describe(statement: Statement, short: bool = False) -> str:
    """A statement in one line: its kind, text, calls and why it is not replayed."""
    if short:
        return one_line(statement.sql, 60)
    return (
        f"{statement.kind:<10} {one_line(statement.sql, 70)} "
        f"({statement.calls} calls): {statement.reason}"
    )


@dataclass(frozen=True)
class Share:
    ms: float
    text: str
    counted: bool = True  # in production time (planshift's own statements are not)


@dataclass
class Coverage:
    captured: int
    top: int  # M: the top statements considered (application statements, by time)
    captured_ms: float
    production_ms: float
    blind: list[Share] = field(default_factory=list)
    left_out: list[Share] = field(default_factory=list)
    plans_only: list[Share] = field(default_factory=list)  # captured, generic plans

    def share(self, ms: float) -> str:
        return f"{100 * ms / self.production_ms:.1f}%" if self.production_ms else "0%"

    @property
    def headline(self) -> str:
        return (
            f"{self.captured} of {self.top} top statements captured, "
            f"{self.share(self.captured_ms)} of production time"
        )

    def lines(self, share_width: int = 6) -> list[str]:
        """The report: the headline, then each part with its share."""
        lines = [
            f"coverage: {self.headline} ({self.captured_ms:,.1f} of "
            f"{self.production_ms:,.1f} ms in pg_stat_statements)"
        ]
        parts = (
            ("the check is blind to", self.blind),
            ("compared by plan only (no parameter values: generic plans)", self.plans_only),
            ("left out, not the application's workload", self.left_out),
        )
        for title, shares in parts:
            if shares:
                total = sum(s.ms for s in shares if s.counted)
                lines.append(f"{title} ({self.share(total)}):")
                lines += [
                    f"  {self.share(s.ms) if s.counted else '-':>{share_width}}  {s.text}"
                    for s in shares
                ]
        return lines


def coverage(
    statements: Sequence[Statement],
    ranked: Sequence[Statement],
    skipped: Sequence[Statement],
    captured: Sequence[tuple[Statement, bool]],
) -> Coverage:
    """`statements`: all of the database's; `ranked`: the top considered; `skipped`: those of
    the top not replayed (with kind and reason); `captured`: (statement, generic plan)."""
    production = sum(s.total_ms for s in statements if s.kind != "planshift")
    found = Coverage(
        captured=len(captured),
        top=len(ranked),
        captured_ms=sum(s.total_ms for s, _ in captured),
        production_ms=production,
    )
    for statement in sorted(skipped, key=lambda s: -s.total_ms):
        found.blind.append(Share(statement.total_ms, describe(statement)))
    considered = {s.key for s in ranked}
    beyond = [s for s in statements if s.kind not in IGNORED and s.key not in considered]
    if beyond:
        text = f"beyond the top {len(ranked)}: {counted(len(beyond), 'statement')}"
        found.blind.append(Share(sum(s.total_ms for s in beyond), text))
    groups: dict[str, list[Statement]] = defaultdict(list)
    for statement in statements:
        if statement.kind in IGNORED:
            groups[statement.reason if statement.kind == "excluded" else statement.kind].append(
                statement
            )
    for kind, members in sorted(groups.items(), key=lambda g: -sum(s.total_ms for s in g[1])):
        text = f"{WHAT.get(kind, kind)}: {counted(len(members), 'statement')}"
        if kind in ("monitoring", "planshift") or kind.startswith("--exclude"):
            text += "; " + ", ".join(describe(s, short=True) for s in members[:3])
            text += ", ..." if len(members) > 3 else ""
        share = Share(sum(s.total_ms for s in members), text, kind != "planshift")
        (found.blind if kind == "utility" else found.left_out).append(share)
    # planshift's own last: listed so nobody wonders where they went, not production's time
    found.left_out.sort(key=lambda s: not s.counted)
    for statement, generic in captured:
        if generic:
            found.plans_only.append(Share(statement.total_ms, describe(statement, short=True)))
    return found
