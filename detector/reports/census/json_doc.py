"""`planshift census --format json`: the census as data (format_version 1, stable order)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from detector.engine.census import QueryCensus

FORMAT_VERSION = 1


def census_document(censuses: Sequence[QueryCensus]) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "queries": [
            {
                "query": census.query_name,
                "points": list(census.points),
                "targets": list(census.targets),
                "shapes": {census.letter(sig): sig for sig in census.signatures},
                "samples": [
                    {
                        "target": target,
                        "point": point,
                        "shapes": {
                            census.letter(sig): count
                            for sig, count in sorted(
                                census.counts.get((target, point), {}).items(),
                                key=lambda kv: census.signatures.index(kv[0]),
                            )
                        },
                    }
                    for target in census.targets
                    for point in census.points
                    if (target, point) in census.counts
                ],
                "switches": [
                    {
                        "target": s.target,
                        "before": s.before,
                        "after": s.after,
                        "from": census.letter(s.from_signature),
                        "to": census.letter(s.to_signature),
                    }
                    for s in census.switches()
                ],
            }
            for census in censuses
        ],
    }


def render_census_json(censuses: Sequence[QueryCensus]) -> str:
    return json.dumps(census_document(censuses), indent=2, sort_keys=True) + "\n"
