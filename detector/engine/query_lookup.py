"""A query named by a user: its key, a prefix of it, its name, or words of its SQL."""

from __future__ import annotations

from collections.abc import Mapping

from detector.errors import PlanshiftError
from detector.model.records import QueryRecord


def find_query_keys(queries: Mapping[str, QueryRecord], query: str) -> set[str]:
    """Keys equal to or starting with `query`, or named `query`; else those whose SQL contains
    it (case-insensitive); none is a user error."""
    keys = {k for k, q in queries.items() if query in (k, q.name) or k.startswith(query)}
    if not keys:
        needle = query.lower()
        keys = {k for k, q in queries.items() if needle in q.sql.lower()}
    if not keys:
        raise PlanshiftError(
            f"no query {query!r} in the store", "give a query key, a name or words of its SQL"
        )
    return keys
