"""Who owns a running run: host, pid and the process's start time, to find runs left behind.

A run is `running` while the process that began it lives. A process killed with SIGKILL (or
a machine that lost power) cannot mark its run failed; the next planshift that opens the store
on the same host sees that the owner is gone and marks the run failed, with a note. The start
time (from /proc, in clock ticks since boot) tells a recycled pid from the owner.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from detector.model.records import utc_now
from detector.store.core import StoreBase

OWNER_COLUMNS = ("owner_host", "owner_pid", "owner_started")


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    started: int | None  # clock ticks after boot (field 22 of /proc/PID/stat); None when unknown

    def describe(self) -> str:
        return f"process {self.pid} on {self.host}"


def this_process() -> Owner:
    return Owner(socket.gethostname(), os.getpid(), process_start(os.getpid()))


def process_start(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def is_gone(owner: Owner) -> bool:
    """True when `owner` ran on this host and is dead (or its pid now belongs to another process).

    Runs owned by other hosts are never judged: their processes cannot be seen from here.
    """
    if owner.host != socket.gethostname() or owner.pid <= 0:
        return False
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    try:
        stat = Path(f"/proc/{owner.pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rpartition(")")[2].split()[:1]
    if state == ["Z"]:
        return True
    started = process_start(owner.pid)
    return owner.started is not None and started is not None and started != owner.started


def gone_note(owner: Owner) -> str:
    return f"{owner.describe()} that ran it is gone (killed?); marked failed"


class StoreOwnerMixin(StoreBase):
    def _tracks_owners(self) -> bool:
        return all(column in self._types_of("runs") for column in (*OWNER_COLUMNS, "status_note"))

    def orphaned_runs(self) -> list[tuple[int, Owner]]:
        """Runs still `running` whose owning process on this host is gone."""
        if not self._tracks_owners():
            return []
        rows = self._con.execute(
            "SELECT run_id, owner_host, owner_pid, owner_started FROM runs "
            "WHERE status = 'running' AND owner_pid IS NOT NULL ORDER BY run_id"
        ).fetchall()
        owned = [(run_id, Owner(host, pid, started)) for run_id, host, pid, started in rows]
        return [(run_id, owner) for run_id, owner in owned if is_gone(owner)]

    def fail_orphaned_runs(self) -> list[int]:
        """Mark the orphaned runs failed, with a note saying why; returns their ids."""
        failed = []
        with self.transaction():
            for run_id, owner in self.orphaned_runs():
                self._con.execute(
                    "UPDATE runs SET status = 'failed', finished_at = ?, status_note = ? "
                    "WHERE run_id = ? AND status = 'running'",
                    [utc_now(), gone_note(owner), run_id],
                )
                failed.append(run_id)
        return failed
