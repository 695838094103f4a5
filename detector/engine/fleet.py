"""The fleet view: per query, which hosts switched plan in a time window, and what it cost.

Each host is a log source (`ingest --source HOST`); its flips are its own timeline's flips
(one timeline per query and host, from one read of the logged executions), so a host's plan
change is never mixed with another host's samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from detector.engine.timeline.build import build_timeline
from detector.store import Store


@dataclass(frozen=True)
class HostFlip:
    host: str
    at: datetime
    before_signature: str
    after_signature: str
    before_median_ms: float | None
    after_median_ms: float | None

    @property
    def ratio(self) -> float | None:
        before, after = self.before_median_ms, self.after_median_ms
        return after / before if before and after is not None else None


@dataclass(frozen=True)
class FleetQuery:
    query_key: str
    name: str
    hosts_seen: int  # hosts that logged the query in the window
    flips: tuple[HostFlip, ...]


def log_sources(store: Store) -> list[str]:
    return sorted({t.name for t in store.targets() if t.source == "log"})


def fleet_flips(
    store: Store,
    *,
    hosts: Sequence[str] = (),
    query: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[FleetQuery]:
    """Queries with a plan flip on at least one host, most hosts flipped first."""
    chosen = set(hosts or log_sources(store))
    seen: dict[str, tuple[str, set[str]]] = {}
    flips: dict[str, list[HostFlip]] = {}
    timelines = build_timeline(store, query=query, since=since, until=until, per_source=True)
    for timeline in timelines:
        host = timeline.source
        if host is None or host not in chosen:
            continue
        seen.setdefault(timeline.query_key, (timeline.name, set()))[1].add(host)
        for before, after in timeline.flips:
            flips.setdefault(timeline.query_key, []).append(
                HostFlip(
                    host,
                    after.start,
                    before.signature,
                    after.signature,
                    before.median_ms,
                    after.median_ms,
                )
            )
    found = [
        FleetQuery(key, seen[key][0], len(seen[key][1]), tuple(sorted(found, key=lambda f: (f.at, f.host))))
        for key, found in flips.items()
    ]
    return sorted(found, key=lambda q: (-len({f.host for f in q.flips}), q.name))
