"""Host readings of runs, quiet baselines per host, and each side's reads (tables of migration 9).

A mixin of `detector.store.Store` (which owns the DuckDB connection; this module does not
import duckdb).
"""

from __future__ import annotations

from collections.abc import Sequence

from detector.model.host import HOST_SAMPLE_COLUMNS, HostBaseline, HostSample
from detector.model.records import from_utc_naive, to_utc_naive
from detector.store.core import StoreBase

_BASELINE_COLUMNS = (
    "host",
    "measured_at",
    "read_warm_us",
    "read_cold_us",
    "cpu_loop_ms",
    "load1",
    "cpus",
    "cpu_pressure",
    "forced",
)


class StoreHostMixin(StoreBase):
    def _has_host_tables(self) -> bool:
        return bool(self._types_of("host_samples"))

    def add_host_samples(self, run_id: int, samples: Sequence[HostSample]) -> None:
        rows = [(run_id, to_utc_naive(sample.taken_at), *sample.row()[1:]) for sample in samples]
        with self.transaction():
            self._insert_rows("host_samples", ("run_id", *HOST_SAMPLE_COLUMNS), rows)

    def host_samples(self, run_id: int) -> list[HostSample]:
        """The run's readings by time (none in stores older than schema 9)."""
        if not self._has_host_tables():
            return []
        rows = self._con.execute(
            f"SELECT {', '.join(HOST_SAMPLE_COLUMNS)} FROM host_samples WHERE run_id = ? "
            "ORDER BY taken_at",
            [run_id],
        ).fetchall()
        return [HostSample(from_utc_naive(row[0]), *row[1:]) for row in rows]

    def add_host_baseline(self, baseline: HostBaseline) -> None:
        row = tuple(getattr(baseline, name) for name in _BASELINE_COLUMNS)
        row = (row[0], to_utc_naive(baseline.measured_at), *row[2:])
        with self.transaction():
            self._insert_rows("host_baselines", _BASELINE_COLUMNS, [row])

    def host_baseline(self, host: str) -> HostBaseline | None:
        """The host's latest quiet baseline (`planshift calibrate`)."""
        if not self._has_host_tables():
            return None
        row = self._con.execute(
            f"SELECT {', '.join(_BASELINE_COLUMNS)} FROM host_baselines WHERE host = ? "
            "ORDER BY measured_at DESC LIMIT 1",
            [host],
        ).fetchone()
        if row is None:
            return None
        return HostBaseline(row[0], from_utc_naive(row[1]), *row[2:])

    def side_reads(self, target_id: int) -> tuple[int, float | None]:
        """(shared blocks read, their I/O time in ms) over the target's observations; the time
        is None when the server did not measure it (track_io_timing off)."""
        row = self._con.execute(
            "SELECT coalesce(sum(shared_read), 0), "
            "sum(io_read_ms) FILTER (WHERE io_read_ms IS NOT NULL) "
            "FROM observations WHERE target_id = ?",
            [target_id],
        ).fetchone()
        blocks = int(row[0]) if row else 0
        return blocks, None if row is None or row[1] is None else float(row[1])
