"""Opening a DuckLake lake: `--lake ducklake:CATALOG`, credentials from the environment only.

CATALOG is `postgres:CONNINFO` (the catalog in a PostgreSQL database, e.g.
`postgres:dbname=lake host=db1 user=planshift`; the password comes from PGPASSWORD or
~/.pgpass, never from the command line) or the path of a DuckDB file. The data files live where
the lake was created (`--lake-data DIR` or `s3://bucket/prefix/`; default: `CATALOG.files/`
beside a DuckDB-file catalog). S3 credentials come from the standard variables
(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL)
into a temporary in-memory DuckDB secret, or from a DuckDB secret the user created; planshift
stores and prints none of them. Once attached, the connection is locked down like a store's:
files only under the lake's data path and the directories named, no extension loaded, no other
database attached, configuration locked.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import duckdb

from detector.errors import PlanshiftError
from detector.store.extensions import load

PREFIX = "ducklake:"
_ATTACH_ATTEMPTS = 8
_PASSWORD = re.compile(r"(^|\s)password\s*=|://[^/@\s]*:[^/@\s]*@", re.IGNORECASE)
_NO_PASSWORD_HINT = (
    "put the password in PGPASSWORD or ~/.pgpass (a command line is visible to every user of "
    "the machine, and planshift never stores a password)"
)


@dataclass(frozen=True)
class DuckLakeSpec:
    catalog: str  # postgres:CONNINFO, or a DuckDB file (absolute)
    data: str | None = None  # the data path of a new lake
    as_of: str | None = None  # a snapshot id, or a time: the lake as it was then

    @property
    def name(self) -> str:
        return PREFIX + self.catalog

    @property
    def in_postgres(self) -> bool:
        return self.catalog.startswith("postgres:")


def is_ducklake(text: str) -> bool:
    return text.startswith(PREFIX)


def parse_spec(text: str, data: str | None = None, as_of: str | None = None) -> DuckLakeSpec:
    catalog = text.removeprefix(PREFIX).strip()
    if not catalog:
        raise PlanshiftError(
            f"{text!r} names no catalog",
            "ducklake:postgres:dbname=lake host=db1, or ducklake:/path/lake.ducklake",
        )
    if catalog.startswith("postgres:"):
        if _PASSWORD.search(catalog):
            raise PlanshiftError("a password in --lake is refused", _NO_PASSWORD_HINT)
    else:
        catalog = str(Path(catalog).expanduser().resolve())
    if data is not None and not data.startswith("s3://"):
        data = str(Path(data).expanduser().resolve()) + "/"
    return DuckLakeSpec(catalog, data, _check_as_of(as_of))


def _check_as_of(as_of: str | None) -> str | None:
    if as_of is None or as_of.strip().isdigit():
        return None if as_of is None else as_of.strip()
    try:
        datetime.fromisoformat(as_of.strip().replace("Z", "+00:00"))
    except ValueError:
        raise PlanshiftError(
            f"cannot read --as-of {as_of!r}",
            "a snapshot id (DuckDB: SELECT * FROM lake.snapshots()) or a time, e.g. "
            "2026-11-22T14:05:00Z",
        ) from None
    return as_of.strip()


@contextmanager
def attached(
    spec: DuckLakeSpec, *, write: bool, directories: Sequence[Path] = (), files: Sequence[Path] = ()
) -> Iterator[Any]:
    """A DuckDB connection with the lake attached as `lake`, locked down to its data path and
    `directories` / `files` (a store to export or to fill)."""
    scratch = Path(tempfile.mkdtemp(prefix="planshift-duckdb-"))
    con = duckdb.connect(
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "allow_community_extensions": False,
        }
    )
    try:
        load(con, "ducklake")
        if spec.in_postgres:
            load(con, "postgres")
        data = spec.data or _default_data(spec)
        if (data or "").startswith("s3://") or _remote_lake(spec):
            load(con, "httpfs")
            _s3_secret(con)
        _attach(con, spec, write, data)
        row = con.execute(
            "SELECT value FROM __ducklake_metadata_lake.ducklake_metadata WHERE key = 'data_path'"
        ).fetchone()
        data_path = str(row[0]) if row else ""
        data_path += "" if data_path.endswith("/") else "/"
        if data_path.startswith("s3://") and not _loaded(con, "httpfs"):
            load(con, "httpfs")
            _s3_secret(con)
        allowed = [data_path, *(f"{d.resolve()}/" for d in directories), f"{scratch}/"]
        con.execute(f"SET temp_directory = {_quote(str(scratch))}")
        con.execute(f"SET allowed_directories = [{', '.join(map(_quote, allowed))}]")
        if files:
            con.execute(
                f"SET allowed_paths = [{', '.join(_quote(str(f.resolve())) for f in files)}]"
            )
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        yield con
    finally:
        con.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _default_data(spec: DuckLakeSpec) -> str | None:
    if spec.in_postgres or Path(spec.catalog).exists():
        return None  # an existing lake knows its data path; a PostgreSQL one needs --lake-data
    return spec.catalog + ".files/"


def _remote_lake(spec: DuckLakeSpec) -> bool:
    """An existing lake whose data path is not known before attaching: S3 credentials are set
    up when the environment has them (the secret is in memory only)."""
    return spec.data is None and bool(os.environ.get("AWS_ACCESS_KEY_ID"))


def _attach(con: Any, spec: DuckLakeSpec, write: bool, data: str | None) -> None:
    options = []
    if data is not None:
        options.append(f"DATA_PATH {_quote(data)}")
        if write and "://" not in data:
            _make_directory(Path(data))
    if spec.as_of is not None:
        options.append(
            f"SNAPSHOT_VERSION {int(spec.as_of)}" if spec.as_of.isdigit()
            else f"SNAPSHOT_TIME {_quote(spec.as_of)}"
        )  # fmt: skip
    if not write:
        options.append("READ_ONLY")
    if not write and not spec.in_postgres and not Path(spec.catalog).exists():
        raise PlanshiftError(f"no lake at {spec.name}", "ingest with --lake first")
    listed = f" ({', '.join(options)})" if options else ""
    for attempt in range(_ATTACH_ATTEMPTS):
        try:
            con.execute(f"ATTACH {_quote(PREFIX + spec.catalog)} AS lake{listed}")
            return
        except duckdb.Error as exc:
            # writers that find a new catalog at once all create its tables: one wins, the
            # others' transactions fail and roll back, and their next attach finds the lake
            racing = "Failed to initialize DuckLake" in str(exc) and write
            if not racing or attempt == _ATTACH_ATTEMPTS - 1:
                raise _attach_error(spec, exc, data) from None
        time.sleep(0.05 * (attempt + 1) * (0.5 + random.random()))


def _make_directory(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PlanshiftError(
            f"cannot create the lake's data directory {path}: {exc.strerror}",
            "pass a --lake-data directory this user can write",
        ) from None


def _attach_error(spec: DuckLakeSpec, exc: BaseException, data: str | None) -> PlanshiftError:
    text = str(exc)
    if "DATA_PATH" in text or ("data path" in text.lower() and data is None):
        return PlanshiftError(
            f"cannot create lake {spec.name}: it needs a place for its data files",
            "pass --lake-data DIR or --lake-data s3://bucket/prefix/ (once, when the lake is new)",
        )
    if spec.in_postgres:
        return PlanshiftError(
            f"cannot open the lake's catalog {spec.name}: {_first_line(text)}",
            "check the conninfo, that the database exists and that PGPASSWORD or ~/.pgpass "
            "holds the password",
        )
    return PlanshiftError(f"cannot open lake {spec.name}: {_first_line(text)}", None)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _loaded(con: Any, name: str) -> bool:
    rows = con.execute(
        "SELECT loaded FROM duckdb_extensions() WHERE extension_name = ?", [name]
    ).fetchall()
    return bool(rows and rows[0][0])


def _s3_secret(con: Any) -> None:
    """A temporary (in-memory) S3 secret from the standard AWS variables, when they are set."""
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if not key or not secret:
        return  # a DuckDB secret of the user's, or the bucket is public
    fields = {"KEY_ID": key, "SECRET": secret}
    if token := os.environ.get("AWS_SESSION_TOKEN"):
        fields["SESSION_TOKEN"] = token
    if region := os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"):
        fields["REGION"] = region
    settings = ", ".join(f"{name} {_quote(value)}" for name, value in fields.items())
    if endpoint := os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"):
        url = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
        settings += (
            f", ENDPOINT {_quote(url.netloc)}, URL_STYLE 'path', "
            f"USE_SSL {'true' if url.scheme == 'https' else 'false'}"
        )
    try:
        con.execute(f"CREATE TEMPORARY SECRET planshift_s3 (TYPE s3, {settings})")
    except duckdb.Error:
        raise PlanshiftError(
            "cannot use the S3 credentials of the environment",
            "check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and AWS_ENDPOINT_URL",
        ) from None  # the statement holds the secret: its error is never shown


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
