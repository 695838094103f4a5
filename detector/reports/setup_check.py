"""`planshift setup-check`: on a terminal (one table, the postgresql.conf lines to add) and as JSON
(format_version 1, schema `setup-check-v1.schema.json`).

The server is ready when every check is ok; `planshift setup-check` exits 1 when it is not (the
checks found settings to change, as `compare` exits 1 on findings), 2 when it cannot check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from rich.console import Console

from detector.model.units import fmt_version
from detector.reports.tables import table

FORMAT_VERSION = 1
CONFIG_NOTE = "recommended postgresql.conf lines (shared_preload_libraries needs a restart):"
READY = "ready: auto_explain and pg_stat_statements are set up for planshift"


class Check(Protocol):
    """What the reports show of `collectors.setup_check.Check`."""

    @property
    def setting(self) -> str: ...

    @property
    def current(self) -> str | None: ...

    @property
    def recommended(self) -> str: ...

    @property
    def ok(self) -> bool: ...

    @property
    def why(self) -> str: ...

    @property
    def readable(self) -> bool: ...

    @property
    def status(self) -> str: ...


def ready(checks: Sequence[Check]) -> bool:
    return all(check.ok for check in checks)


def render_setup_check(
    version: int, checks: Sequence[Check], snippet: str, console: Console
) -> None:
    rows = [
        ("(not set)" if c.current is None else repr(c.current), c.recommended, c.status, c.why)
        for c in checks
    ]
    console.print(f"PostgreSQL {fmt_version(version)}", markup=False)
    console.print(
        table(
            ("setting", "current", "recommended", "status", "why (and what it costs)"),
            [(c.setting, *row) for c, row in zip(checks, rows, strict=True)],
        )
    )
    if snippet:
        console.print("\n" + CONFIG_NOTE, markup=False)
        console.print(snippet, markup=False, highlight=False)
    else:
        console.print("\n" + READY, markup=False)


def setup_check_document(version: int, checks: Sequence[Check], snippet: str) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "server_version_num": version,
        "ready": ready(checks),
        "checks": [
            {
                "setting": c.setting,
                "current": c.current,
                "recommended": c.recommended,
                "status": c.status,
                "ok": c.ok,
                "readable": c.readable,
                "why": c.why,
            }
            for c in checks
        ],
        "config_lines": snippet.splitlines(),
    }
