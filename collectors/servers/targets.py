"""Servers a workload runs on: embedded clusters from installed binaries, or existing DSNs."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.installations import find_installation
from detector.errors import PlanshiftError
from detector.model.workload import TargetSpec


@dataclass
class Server:
    """A running server. `conninfo` may hold a password: it never leaves this object."""

    name: str
    conninfo: str
    source: str  # embedded | dsn
    info: dict[str, Any] = field(default_factory=dict)
    setup: tuple[str, ...] = ()  # the target's own setup SQL, after the workload's

    @property
    def redacted(self) -> str:
        return redact_conninfo(self.conninfo)


def redact_conninfo(conninfo: str) -> str:
    """The conninfo with any password replaced by '***' (URIs and key=value strings); a
    conninfo libpq cannot parse is shown with its password patterns masked."""
    try:
        params = conninfo_to_dict(conninfo)
    except Exception:
        return redact_secrets(_unparsed(conninfo), conninfo)
    if "password" in params:
        params["password"] = "***"
    return make_conninfo("", **{k: str(v) for k, v in params.items()})


_SECRET_KEYS = {
    "password",
    "sslpassword",
    "oauth_client_secret",
    "scram_client_key",
    "scram_server_key",
}
_PAIR = re.compile(r"(\w+)(\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s'&]*)")
_URI = re.compile(r"(?i)^([a-z][a-z0-9+.-]*://)([^/?#]*)([^?#]*)(?:\?([^#]*))?")


@functools.cache
def _libpq_keys() -> frozenset[str]:
    return frozenset(option.keyword.decode() for option in pq.Conninfo.get_defaults())


def _unparsed(conninfo: str) -> str:
    """A conninfo libpq refused, shown without a value it could hide a secret in: values of
    unknown keys (a misspelled `passwrd=`), of secret keys and of URI passwords become ***,
    text outside `key=value` pairs too."""

    def pair(match: re.Match[str]) -> str:
        key, equals, value = match.groups()
        shown = key in _libpq_keys() and key not in _SECRET_KEYS
        return f"{key}{equals}{value if shown else '***'}"

    uri = _URI.match(conninfo)
    if uri:
        scheme, authority, path, query = uri.groups()
        user, at, host = authority.rpartition("@")
        authority = f"{user.split(':')[0]}{':***' if ':' in user else ''}{at}{host}"
        masked = "&".join(
            _PAIR.sub(pair, part) if "=" in part else "***"
            for part in (query or "").split("&")
            if part
        )
        return f"{scheme}{authority}{path}" + (f"?{masked}" if masked else "")
    pieces, at = [], 0
    for match in _PAIR.finditer(conninfo):
        if conninfo[at : match.start()].strip():
            pieces.append("***")
        pieces.append(pair(match))
        at = match.end()
    if conninfo[at:].strip():
        pieces.append("***")
    return " ".join(pieces)


def _libpq_message(message: str, conninfo: str) -> str:
    """libpq's complaint about a conninfo, its quoted fragments kept only when they are key
    names of that conninfo (`invalid connection option "passwrd"`), else ***."""
    keys = {match.group(1) for match in _PAIR.finditer(conninfo)}
    keep = keys | {"="}
    return re.sub(r'"([^"]*)"', lambda m: m.group(0) if m.group(1) in keep else '"***"', message)


_KEYWORD_PASSWORD = re.compile(r"(?i)\bpassword\s*=\s*('(?:[^'\\]|\\.)*'?|[^\s'\"&]+)")
_URI_SAFE = "!$&'()*+,;=~"  # RFC 3986 sub-delims: left as they are in a URI's userinfo
_URI_USERINFO = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s:/@?#]*):([^\s@/?#]*)@")


def redact_secrets(text: str, conninfo: str) -> str:
    """`text` (a libpq or psycopg message) with the password of `conninfo` masked: its literal
    value, percent-decoded and percent-encoded forms, and any `password=...` or `user:...@`
    pattern, even when `conninfo` cannot be parsed."""
    secrets = set(_passwords_in(conninfo))
    for secret in list(secrets):
        decoded = unquote(secret)
        secrets |= {decoded, quote(secret, safe=""), quote(decoded, safe="")}
        secrets.add(quote(decoded, safe=_URI_SAFE))
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "***")
    text = _KEYWORD_PASSWORD.sub("password=***", text)
    return _URI_USERINFO.sub(r"\1:***@", text)


def _passwords_in(conninfo: str) -> list[str]:
    found: list[str] = []
    try:
        password = conninfo_to_dict(conninfo).get("password")
    except Exception:
        password = None
    if password:
        found.append(str(password))
    for match in _KEYWORD_PASSWORD.finditer(conninfo):
        value = match.group(1)
        found.append(value)
        if value.startswith("'"):
            found.append(re.sub(r"\\(.)", r"\1", value.strip("'")))
    found.extend(match.group(2) for match in _URI_USERINFO.finditer(conninfo))
    return found


def check_conninfo(conninfo: str, what: str) -> None:
    """PlanshiftError (no password in it) when libpq cannot parse `conninfo` or its port is
    not a number."""
    hint = (
        "use postgresql://user@host:5432/db or 'host=... port=5432 dbname=...'; percent-encode "
        "special characters in URIs (% is %25) and put the password in PGPASSWORD or ~/.pgpass"
    )
    try:
        params = conninfo_to_dict(conninfo)
    except Exception as exc:
        raise PlanshiftError(
            f"{what}: malformed connection string {redact_conninfo(conninfo)}: "
            f"{redact_secrets(_libpq_message(str(exc).strip(), conninfo), conninfo)}",
            hint,
        ) from None
    ports = str(params.get("port") or "")
    if not all(port.strip().isdigit() for port in ports.split(",") if port.strip()):
        raise PlanshiftError(
            f"{what}: port {redact_secrets(ports, conninfo)!r} is not a number "
            f"in {redact_conninfo(conninfo)}",
            hint,
        )


def parse_dsn_option(text: str) -> tuple[str, str]:
    """`NAME=DSN` from the command line (`--dsn prod=postgresql://...`)."""
    name, sep, dsn = text.partition("=")
    if not sep or not name or not dsn or " " in name:
        raise PlanshiftError(
            f"--dsn {redact_conninfo(text)!s}: expected NAME=DSN",
            "for example --dsn old=postgresql://user@host:5432/db (put the password in PGPASSWORD or ~/.pgpass)",
        )
    check_conninfo(dsn, f"--dsn {name}")
    return name, dsn


def resolve_target_specs(
    declared: Sequence[TargetSpec], requested: Sequence[str], dsns: Mapping[str, str]
) -> list[TargetSpec]:
    """Targets to use: those named on the command line (workload names, versions like `pg17`,
    or `--dsn` names), else the workload's, else the embedded default installation."""
    by_name = {t.name: t for t in declared}
    chosen: list[TargetSpec] = []
    for name in requested:
        if name in by_name:
            chosen.append(by_name[name])
        elif name in dsns:
            chosen.append(TargetSpec(name=name, dsn_env=None))
        else:
            version = name.removeprefix("pg")
            if not version.isdigit():
                known = ", ".join(sorted(by_name) + sorted(dsns)) or "none declared"
                raise PlanshiftError(
                    f"unknown target {name!r}",
                    f"use a workload target ({known}), a version like pg15 or pg17, or --dsn {name}=DSN",
                )
            chosen.append(TargetSpec(name=f"pg{version}", postgres=version))
    chosen.extend(TargetSpec(name=n, dsn_env=None) for n in dsns if n not in requested)
    if chosen:
        return chosen
    if declared:
        return list(declared)
    default = find_installation(None)
    return [TargetSpec(name=default.name, postgres=str(default.major))]


@contextmanager
def open_servers(
    specs: Sequence[TargetSpec],
    *,
    dsns: Mapping[str, str] | None = None,
    keep: bool = False,
    pg_bins: Sequence[Path] = (),
) -> Iterator[list[Server]]:
    """Start embedded clusters and resolve DSNs; clusters are stopped on exit, errors included."""
    dsns = dict(dsns or {})
    with ExitStack() as stack:
        servers: list[Server] = []
        for spec in specs:
            if spec.postgres is not None:
                installation = find_installation(spec.postgres, pg_bins)
                cluster = EmbeddedCluster(
                    installation,
                    keep=keep,
                    settings=dict(spec.settings),
                    name=spec.name,
                    checksums=spec.checksums,
                )
                stack.enter_context(cluster)
                servers.append(
                    Server(
                        name=spec.name,
                        conninfo=cluster.conninfo,
                        source="embedded",
                        info={
                            "bindir": str(installation.bindir),
                            "origin": installation.origin,
                            "build": installation.build(),
                            "initdb_options": list(cluster.initdb_options),
                            "server_settings": dict(cluster.server_settings),
                            **({"kept_dir": str(cluster.cluster_dir)} if keep else {}),
                        },
                        setup=spec.setup,
                    )
                )
            else:
                dsn = dsns.get(spec.name)
                if dsn is None and spec.dsn_env:
                    dsn = os.environ.get(spec.dsn_env)
                    if dsn is None:
                        raise PlanshiftError(
                            f"target {spec.name}: environment variable {spec.dsn_env} is not set",
                            f"export {spec.dsn_env}='postgresql://user@host/db'",
                        )
                if dsn is None:
                    raise PlanshiftError(
                        f"target {spec.name}: no DSN given", f"--dsn {spec.name}=DSN"
                    )
                check_conninfo(dsn, f"target {spec.name}")
                servers.append(
                    Server(
                        name=spec.name,
                        conninfo=dsn,
                        source="dsn",
                        # build facts of a server planshift did not start: only what it
                        # says itself (detector.model.build), the builder unknown
                        info={"dsn": redact_conninfo(dsn), "build": {}},
                        setup=spec.setup,
                    )
                )
        yield servers
