"""`--format json` of the listing commands: servers, runs, rules, noise (format_version 1).

Each document is a dict with `format_version` and one list; the CLI prints it with sorted keys.
Schemas: detector/reports/schema/{servers,runs,rules,noise}-v1.schema.json.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from detector.model.records import RunRecord, TargetRecord

if TYPE_CHECKING:
    from rules.base import Rule


class Installation(Protocol):
    """What the servers listing shows of `collectors.servers.installations.Installation`."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def version_num(self) -> int: ...

    @property
    def major(self) -> int: ...

    @property
    def origin(self) -> str: ...

    @property
    def builder(self) -> str: ...

    @property
    def has_auto_explain(self) -> bool: ...

    @property
    def has_pg_stat_statements(self) -> bool: ...

    @property
    def bindir(self) -> Path: ...


class Cluster(Protocol):
    """What the listing shows of `collectors.servers.embedded.ClusterDir`."""

    @property
    def path(self) -> Path: ...

    @property
    def owner_pid(self) -> int: ...

    @property
    def state(self) -> str: ...

    @property
    def postmaster_pid(self) -> int | None: ...


class ServersListing(Protocol):
    """`detector.jobs.servers.Listing`."""

    @property
    def installations(self) -> Sequence[tuple[Installation, Mapping[str, Any]]]: ...

    @property
    def addable(self) -> Sequence[int]: ...

    @property
    def clusters(self) -> Sequence[Cluster]: ...

    @property
    def home(self) -> Path: ...


FORMAT_VERSION = 1


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def servers_document(listing: ServersListing) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "servers": [
            {
                "name": inst.name,
                "major": inst.major,
                "version": inst.version,
                "version_num": inst.version_num,
                "origin": inst.origin,
                "builder": inst.builder,
                "auto_explain": inst.has_auto_explain,
                "pg_stat_statements": inst.has_pg_stat_statements,
                "bindir": str(inst.bindir),
                "build": {key: value for key, value in build.items() if value is not None},
            }
            for inst, build in listing.installations
        ],
        "addable": [
            {"name": f"pg{major}", "major": major, "command": f"planshift servers add {major}"}
            for major in listing.addable
        ],
        "home": str(listing.home),
        "clusters": [
            {
                "path": str(cluster.path),
                "state": cluster.state,
                "owner_pid": cluster.owner_pid,
                "postmaster_pid": cluster.postmaster_pid,
            }
            for cluster in listing.clusters
        ],
    }


def runs_document(
    runs: Sequence[RunRecord],
    targets: Sequence[TargetRecord],
    failed: Mapping[int, Sequence[tuple[str, str | None, Sequence[str]]]] | None = None,
) -> dict[str, Any]:
    """`failed`: per run, the queries (name, sweep point) with failed executions and the
    targets they failed on (Store.failed_queries)."""
    failed = failed or {}
    return {
        "format_version": FORMAT_VERSION,
        "runs": [
            {
                "run_id": run.run_id,
                "label": run.label,
                "started_at": _time(run.started_at),
                "finished_at": _time(run.finished_at),
                "status": run.status,
                "note": run.note,
                "tool_version": run.tool_version,
                "host": run.host,
                "targets": [_target(t) for t in targets if t.run_id == run.run_id],
                "failed_queries": [
                    {"query": name, "point": point, "targets": list(names)}
                    for name, point, names in failed.get(run.run_id, ())
                ],
            }
            for run in runs
        ],
    }


def _target(target: TargetRecord) -> dict[str, Any]:
    return {
        "name": target.name,
        "source": target.source,
        "server": target.info.get("server"),
        "variant": target.info.get("variant"),
        "server_version_num": target.server_version_num,
        "settings": dict(target.gucs),
    }


def rules_document(rules: Sequence[Rule]) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "rules": [
            {
                "code": rule.code,
                "name": rule.name,
                "family": rule.family,
                "severity": rule.severity.value,
                "summary": rule.summary,
                "options": dict(rule.options),
                "doc": rule.doc,
                "file": rule.file,
            }
            for rule in rules
        ],
    }


def noise_document(run_id: int, floors: Mapping[str, float]) -> dict[str, Any]:
    """Floors by query label (`name` or `name [point]`), as `planshift noise` computes them."""
    rows = []
    for label, floor in floors.items():
        name, _, point = label.partition(" [")
        rows.append({"query": name, "point": point[:-1] if point else None, "noise_floor": floor})
    rows.sort(key=lambda row: (row["query"], row["point"] or ""))
    return {"format_version": FORMAT_VERSION, "run_id": run_id, "queries": rows}
