"""`planshift timeline` on a terminal: per query, its plans over time."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console

from detector.engine.timeline.build import QueryTimeline, clock
from detector.model.comparison import WindowEvent
from detector.model.units import fmt_ms
from detector.reports.comparison.events import event_rows


def render_timeline(timeline: QueryTimeline, console: Console) -> None:
    """One query's plan segments, plan-cache switches, flips and pg_stat_statements deltas."""

    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    ids = ", ".join(str(q) for q in sorted(timeline.queryids)) or "unknown"
    flips = timeline.flips
    say(
        f"{timeline.name}  [key {timeline.query_key}, queryid {ids}]  "
        f"{timeline.observations} plans, {len(flips)} flip{'s' * (len(flips) != 1)}"
        + ("; plan alternates: time buckets, dominant plan shown" if timeline.bucketed else "")
    )
    transitions = timeline.transition_lines()  # plan-cache switches and flips
    for index, segment in enumerate(timeline.segments):
        for line in transitions.get(index, []):
            say(line)
        share = f" {segment.share:4.0%}" if timeline.bucketed else ""
        mode = (" (generic plan)" if segment.generic else " (custom)") * timeline.both_modes
        say(
            f"  {clock(segment.start)} .. {clock(segment.end)[11:]} {segment.count:>7} x"
            f"{share}  median {fmt_ms(segment.median_ms):>7} ms  p90 {fmt_ms(segment.p90_ms):>7} ms"
            f"  cost {segment.median_cost:>9.1f}  {segment.fingerprint}  {segment.signature}{mode}"
        )
    flip_times = [b.start for _, b in flips]
    for delta in timeline.pgss:
        mark = " <- flip" if any(delta.start <= t <= delta.end for t in flip_times) else ""
        note = f" [{delta.note}]" if delta.note else ""
        say(
            f"  pg_stat_statements {delta.source} {clock(delta.start)[11:19]}..{clock(delta.end)[11:19]}"
            f": {delta.calls} calls, mean {fmt_ms(delta.mean_ms)} ms, total {fmt_ms(delta.total_ms)} ms"
            f"{note}{mark}"
        )
    say("")


def event_lines(events: Sequence[WindowEvent]) -> list[str]:
    """Server events of a comparison of time windows, one line each: when, in which window
    (or between them), what, and its file:line."""
    if not events:
        return []
    lines = [f"server events in and between the windows ({len(events)}):"]
    for row in event_rows(events):
        lines.append(f"  {row.when}  {row.where:<9} {row.kind:<11} {row.text}  ({row.at})")
    return lines
