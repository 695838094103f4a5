"""Turn a postgresql.conf change into a planshift workload: old settings vs new settings.

    python3 conf_gate.py OLD.conf NEW.conf WORKLOAD.toml OUT.toml [--postgres 17]

Reads both configuration files, keeps the settings whose values differ, and writes OUT.toml:
WORKLOAD.toml (setup and queries; no [variants]) plus the two sides, named `current` (OLD) and
`proposed` (NEW), so that `planshift compare -b current -c proposed` gates the change.

- Only settings a session can change (random_page_cost, work_mem, jit, enable_*, ...): two
  [variants] measured interleaved on one embedded server, started with the settings both files
  share (unless WORKLOAD.toml has its own [[targets]]).
- Any server-start setting (shared_buffers, io_method, ...): two [[targets]], each started with
  its file's settings (WORKLOAD.toml must then have no [[targets]]).

Settings that describe the machine (listen_addresses, port, paths, ssl, logging) are never
copied; --postgres picks the major version of the embedded servers (default 17).

Exit status: 0 written, 3 no setting differs (nothing to gate), 2 usage or input error.
Standard library only: runs with any Python >= 3.11.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from pathlib import Path

# postmaster-context settings: need a server start, cannot be set per transaction
SERVER_START = {
    "shared_buffers", "max_connections", "huge_pages", "huge_page_size", "wal_buffers",
    "max_worker_processes", "max_parallel_workers_per_gather_limit", "shared_preload_libraries",
    "io_method", "io_workers", "io_max_concurrency", "max_locks_per_transaction",
    "max_pred_locks_per_transaction", "max_prepared_transactions", "track_activity_query_size",
    "max_files_per_process", "debug_io_direct", "data_checksums", "wal_level", "max_wal_senders",
    "autovacuum_max_workers", "max_replication_slots", "shared_memory_type", "jit_provider",
}  # fmt: skip
NOT_PORTABLE = {  # describe the production machine, not the plans: never copied into a test server
    "listen_addresses", "port", "data_directory", "hba_file", "ident_file", "external_pid_file",
    "unix_socket_directories", "ssl", "ssl_cert_file", "ssl_key_file", "ssl_ca_file",
    "log_directory", "log_filename", "logging_collector", "log_destination", "include",
    "include_dir", "include_if_exists", "archive_command", "restore_command", "primary_conninfo",
}  # fmt: skip
LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=?\s*(.*?)\s*$")


class GateError(Exception):
    pass


def parse_conf(text: str) -> dict[str, str]:
    """postgresql.conf `name = value` lines (last one wins, as in PostgreSQL); comments dropped."""
    settings: dict[str, str] = {}
    for raw in text.splitlines():
        line = _strip_comment(raw).strip()
        if not line:
            continue
        match = LINE.match(line)
        if not match or not match.group(2):
            raise GateError(f"cannot read postgresql.conf line: {raw!r}")
        name, value = match.group(1).lower(), match.group(2)
        if len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1].replace("''", "'")
        settings[name] = value
    return settings


def _strip_comment(line: str) -> str:
    quoted = False
    for i, char in enumerate(line):
        if char == "'":
            quoted = not quoted
        elif char == "#" and not quoted:
            return line[:i]
    return line


def differing(old: dict[str, str], new: dict[str, str]) -> dict[str, tuple[str, str]]:
    changed = {}
    for name in sorted(set(old) | set(new)):
        if name in NOT_PORTABLE or old.get(name) == new.get(name):
            continue
        if name not in old or name not in new:
            side = "old" if name not in old else "new"
            raise GateError(
                f"{name} is set in one file only (missing from the {side} one): planshift cannot "
                "tell its default; write the value out explicitly in both files"
            )
        changed[name] = (old[name], new[name])
    return changed


def toml_table(values: dict[str, str]) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in values.items()) + " }"


def gate_workload(
    base: str, old_conf: dict[str, str], new_conf: dict[str, str], postgres: str
) -> str:
    """WORKLOAD plus the two sides. The servers get every portable setting of the files (so the
    test server resembles the configured one); the differing settings make the two sides."""
    parsed = tomllib.loads(base)
    if "variants" in parsed:
        raise GateError("the workload defines [variants]; the gate writes its own two sides")
    changed = differing(old_conf, new_conf)
    server_start = sorted(set(changed) & SERVER_START)
    if server_start and "targets" in parsed:
        raise GateError(
            f"server-start settings changed ({', '.join(server_start)}): the gate starts two "
            "servers itself, so the workload must not define [[targets]]"
        )
    lines = [base.rstrip(), "", "# written by examples/ci/conf_gate.py: the postgresql.conf change"]
    if server_start:
        for name, conf in (("current", old_conf), ("proposed", new_conf)):
            lines += _target(name, postgres, portable(conf))
        return "\n".join(lines) + "\n"
    if "targets" not in parsed:
        shared = {k: v for k, v in portable(old_conf).items() if k not in changed}
        lines += _target(f"pg{postgres}", postgres, shared)
    for name, index in (("current", 0), ("proposed", 1)):
        lines += ["", f"[variants.{name}]"]
        lines += [f"{k} = {json.dumps(pair[index])}" for k, pair in changed.items()]
    return "\n".join(lines) + "\n"


def portable(conf: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(conf.items()) if k not in NOT_PORTABLE}


def _target(name: str, postgres: str, settings: dict[str, str]) -> list[str]:
    return ["", "[[targets]]", f'name = "{name}"', f'postgres = "{postgres}"',
            f"settings = {toml_table(settings)}"]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("workload", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--postgres", default="17", help="major version for server-start changes")
    args = parser.parse_args(argv)
    try:
        old_conf, new_conf = parse_conf(args.old.read_text()), parse_conf(args.new.read_text())
        changed = differing(old_conf, new_conf)
        if not changed:
            print("conf_gate: no setting differs between the two files; nothing to gate")
            return 3
        text = gate_workload(args.workload.read_text(), old_conf, new_conf, args.postgres)
        args.out.write_text(text)
    except (GateError, OSError, tomllib.TOMLDecodeError) as exc:
        print(f"conf_gate: error: {exc}", file=sys.stderr)
        return 2
    for name, (old, new) in changed.items():
        print(f"conf_gate: {name} {old} -> {new}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
