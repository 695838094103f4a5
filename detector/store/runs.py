"""Writing a run: the run, its targets, queries and observations with the plans they show."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import duckdb

from detector.errors import PlanshiftError
from detector.model import Observation
from detector.model.records import (
    OBSERVATION_COLUMNS,
    RUN_KINDS,
    RUN_STATUSES,
    TARGET_SOURCES,
    utc_now,
)
from detector.model.rows import (
    PLAN_COLUMNS,
    PLAN_NODE_COLUMNS,
    NewPlan,
    observation_rows,
    reject_passwords,
    to_json,
)
from detector.store.owner import StoreOwnerMixin, this_process

PLAN_EXAMPLE_COLUMNS = ("target_id", "query_key", "point", "fingerprint", "plan_json")


class StoreRunsMixin(StoreOwnerMixin):
    def begin_run(
        self,
        label: str,
        *,
        workload_hash: str | None,
        tool_version: str,
        host: str,
        kind: str = "run",
    ) -> int:
        """A new `running` run, owned by this process (see detector.store.owner)."""
        if kind not in RUN_KINDS:
            raise PlanshiftError(f"unknown run kind {kind!r}", f"use one of {', '.join(RUN_KINDS)}")
        row = self._con.execute(
            "INSERT INTO runs (label, started_at, status, tool_version, workload_hash, host, kind) "
            "VALUES (?, ?, 'running', ?, ?, ?, ?) RETURNING run_id",
            [label, utc_now(), tool_version, workload_hash, host, kind],
        ).fetchone()
        run_id = int(row[0])
        if self._tracks_owners():
            owner = this_process()
            self._con.execute(
                "UPDATE runs SET owner_host = ?, owner_pid = ?, owner_started = ? WHERE run_id = ?",
                [owner.host, owner.pid, owner.started, run_id],
            )
        return run_id

    def finish_run(self, run_id: int, status: str = "complete", note: str | None = None) -> None:
        """Mark the run complete or failed; `note` says why (runs.status_note)."""
        if status not in RUN_STATUSES or status == "running":
            raise PlanshiftError(f"a run cannot finish as {status!r}", "use complete or failed")
        rows = self._con.execute(
            "UPDATE runs SET status = ?, finished_at = ?, status_note = coalesce(?, status_note) "
            "WHERE run_id = ? RETURNING run_id",
            [status, utc_now(), note, run_id],
        ).fetchall()
        if not rows:
            raise PlanshiftError(f"no run with id {run_id} in {self.path}")

    def add_target(
        self,
        run_id: int,
        name: str,
        *,
        source: str,
        server_version_num: int | None,
        gucs: Mapping[str, str],
        info: Mapping[str, Any],
    ) -> int:
        if source not in TARGET_SOURCES:
            raise PlanshiftError(f"unknown target source {source!r}", "use embedded, dsn or log")
        reject_passwords(info=info, gucs=gucs)
        with self.transaction():
            if not self._con.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchall():
                raise PlanshiftError(f"no run with id {run_id} in {self.path}")
            row = self._con.execute(
                "INSERT INTO targets (run_id, name, source, server_version_num, gucs, info) "
                "VALUES (?, ?, ?, ?, ?, ?) RETURNING target_id",
                [run_id, name, source, server_version_num, to_json(dict(gucs)), to_json(info)],
            ).fetchone()
        return int(row[0])

    def file_target_info(self, target_id: int, key: str, entry: str, value: dict[str, Any]) -> None:
        """Merge value into info[key][entry] of a target (what a run learns after adding it)."""
        with self.transaction():
            row = self._con.execute(
                "SELECT info FROM targets WHERE target_id = ?", [target_id]
            ).fetchone()
            if row is None:
                raise PlanshiftError(f"no target with id {target_id} in {self.path}")
            info = json.loads(row[0]) if isinstance(row[0], str) else dict(row[0] or {})
            info.setdefault(key, {}).setdefault(entry, {}).update(value)
            self._con.execute(
                "UPDATE targets SET info = ? WHERE target_id = ?", [to_json(info), target_id]
            )

    def upsert_query(
        self, query_key: str, *, name: str, sql: str, queryid: int | None = None
    ) -> None:
        """Insert or update a query; a known queryid is kept when the new one is None."""
        self._con.execute(
            "INSERT INTO queries VALUES (?, ?, ?, ?) ON CONFLICT (query_key) DO UPDATE SET "
            "name = excluded.name, sql = excluded.sql, "
            "queryid = coalesce(excluded.queryid, queries.queryid)",
            [query_key, name, sql, queryid],
        )

    def add_observations(self, observations: Sequence[Observation]) -> int:
        """Store a batch: plans and plan_nodes of unseen fingerprints, then one row each.

        One transaction: if anything fails, nothing of the batch is stored. Returns the count.
        """
        if not observations:
            return 0
        try:
            with self.transaction():
                run_of_target = self._runs_of_targets({obs.target_id for obs in observations})
                rows, shapes = observation_rows(observations, run_of_target)
                new = self._unseen(shapes)
                plan_rows = [shape.plan_row for shape in new]
                node_rows = [node for shape in new for node in shape.nodes]
                self._insert_rows("plans", PLAN_COLUMNS, plan_rows)
                self._insert_rows("plan_nodes", PLAN_NODE_COLUMNS, node_rows)
                self._insert_rows("observations", OBSERVATION_COLUMNS[1:], rows)
                self._insert_rows(
                    "plan_examples", PLAN_EXAMPLE_COLUMNS, self._new_examples(observations, rows)
                )
        except (duckdb.ConversionException, duckdb.ConstraintException) as exc:
            raise PlanshiftError(
                f"cannot store {len(observations)} observations: {exc}",
                "nothing of this batch was stored; check the observation values",
            ) from exc
        return len(observations)

    def _new_examples(
        self, observations: Sequence[Observation], rows: Sequence[Sequence[Any]]
    ) -> list[tuple[Any, ...]]:
        """The first EXPLAIN of each target x query x point x shape not stored yet."""
        first: dict[tuple[int, str, str | None, str], tuple[int, str]] = {}
        for obs, row in zip(observations, rows, strict=True):
            key = (
                obs.target_id,
                obs.query_key,
                obs.point,
                row[OBSERVATION_COLUMNS.index("fingerprint") - 1],
            )
            if key not in first or obs.sample_index < first[key][0]:
                first[key] = (obs.sample_index, obs.plan_json)
        stored = set(
            self._con.execute(
                "SELECT target_id, query_key, point, fingerprint FROM plan_examples "
                "WHERE target_id IN (SELECT unnest($1::BIGINT[]))",
                [sorted({key[0] for key in first})],
            ).fetchall()
        )
        return [(*key, plan_json) for key, (_, plan_json) in first.items() if key not in stored]

    def _runs_of_targets(self, target_ids: Iterable[int]) -> dict[int, int]:
        rows = self._con.execute(
            "SELECT target_id, run_id FROM targets WHERE target_id IN (SELECT unnest($1))",
            [sorted(target_ids)],
        ).fetchall()
        return dict(rows)

    def _unseen(self, shapes: Mapping[str, NewPlan]) -> list[NewPlan]:
        """The shapes whose fingerprint is not in `plans` yet, by fingerprint."""
        rows = self._con.execute(
            "SELECT fingerprint FROM plans WHERE fingerprint IN (SELECT unnest($1))",
            [sorted(shapes)],
        ).fetchall()
        seen = {row[0] for row in rows}
        return [shapes[key] for key in sorted(shapes) if key not in seen]
