"""The fleet view: per query, which hosts switched plan in a time window, and what it cost.

Each host is a log source (`ingest --source HOST`); its flips are those of its own timeline
(detector.engine.timeline: segments of one plan, flips between segments of the same kind), so a
host's plan change is never mixed with another host's samples. They are computed for every host
in one SQL pass (detector.store.fleet), not with a store and a timeline per host.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from detector.store import Store
from detector.store.fleet import FleetRows


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


def fleet_queries(rows: FleetRows) -> list[FleetQuery]:
    """Queries with a plan flip on at least one host, most hosts flipped first."""
    flips: dict[str, list[HostFlip]] = {}
    for row in rows.flips:
        flips.setdefault(row.query_key, []).append(
            HostFlip(
                row.host,
                row.at,
                row.before_signature,
                row.after_signature,
                row.before_median_ms,
                row.after_median_ms,
            )
        )
    found = [
        FleetQuery(
            key,
            rows.names.get(key, key),
            rows.hosts_seen.get(key, 0),
            tuple(sorted(found, key=lambda f: (f.at, f.host))),
        )
        for key, found in flips.items()
    ]
    return sorted(found, key=lambda q: (-len({f.host for f in q.flips}), q.name))
