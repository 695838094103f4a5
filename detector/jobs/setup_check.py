"""The setup-check job: is a server set up for planshift (auto_explain, pgss, logging)?"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collectors.setup_check import Check


def setup_check(*, dsn: str) -> tuple[int, list[Check], str]:
    """How the server is set up for postmortems: (server_version_num, the checks, the
    postgresql.conf lines planshift recommends, "" when nothing is to change)."""
    from collectors.pgss import connect
    from collectors.setup_check import check_server, config_snippet

    with connect(dsn) as conn:
        version, checks = check_server(conn)
    return version, checks, config_snippet(checks)
