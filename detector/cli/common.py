"""What every command shares: its consoles, the common options, user errors as `error:`/`hint:`
exit 2."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.text import Text

from detector.errors import PlanshiftError
from detector.reports.consoles import make_console

out = make_console()
err = make_console(stderr=True)
# progress lines and notes of jobs quote workload, query and target names: printed as they are
progress = make_console(stderr=True, markup=False)
LOGGED = ("detector", "collectors", "rules")  # planshift's loggers (not the libraries')


def configure_logging(*, debug: bool, quiet: bool) -> None:
    """`--debug`: what each step reads, detects and skips, on stderr (`debug: module: ...`);
    `--quiet`: results and errors only, no progress or notes. Default: warnings."""
    if debug and quiet:
        fail("--debug and --quiet exclude each other", "use one of them")
    level = logging.DEBUG if debug else logging.ERROR if quiet else logging.WARNING
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname_lower)s: %(name)s: %(message)s"))
    handler.addFilter(_lower_level)
    for name in LOGGED:
        logger = logging.getLogger(name)
        logger.setLevel(level)
        logger.handlers[:] = [handler]
        logger.propagate = False
    progress.quiet = quiet


def _lower_level(record: logging.LogRecord) -> bool:
    record.levelname_lower = record.levelname.lower()
    return True


StoreOption = Annotated[
    Path, typer.Option("--store", "-s", help="DuckDB file holding runs and observations.")
]
DEFAULT_STORE = Path("planshift.duckdb")
DEFAULT_LOCK = Path("planshift.lock")
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config", help="planshift.toml (default: found in . or its parents, or pyproject.toml)."
    ),
]
FormatOption = Annotated[str, typer.Option("--format", "-f", help="terminal (default) or json.")]
SinceOption = Annotated[
    str | None, typer.Option(help="From this time (2026-11-22T14:00, or 14:00 UTC).")
]
UntilOption = Annotated[str | None, typer.Option(help="Until this time (excluded).")]
LakeOption = Annotated[
    str | None,
    typer.Option(
        "--lake",
        help="A fleet lake many hosts share: a directory of Parquet files, or ducklake:CATALOG "
        "(ducklake:postgres:CONNINFO or ducklake:FILE; see README, Fleets).",
    ),
]
LakeDataOption = Annotated[
    str | None,
    typer.Option(
        "--lake-data",
        help="Where a new DuckLake lake keeps its data files: a directory or s3://bucket/prefix/.",
    ),
]
AsOfOption = Annotated[
    str | None,
    typer.Option(
        "--as-of",
        help="A DuckLake lake as it was at this snapshot id or time (2026-11-22T14:05:00Z).",
    ),
]


def plain(value: object) -> Text:
    """User text (names, labels, paths) for a table cell: never read as markup."""
    return Text(str(value))


def colored() -> bool:
    return err.is_terminal and not os.environ.get("NO_COLOR")


def fail(message: str, hint: str | None = None) -> NoReturn:
    # messages quote user input and `[...]` (paths, names): never read them as rich markup
    style = colored()
    err.print(Text.assemble(("error:", "bold red" if style else ""), " ", message))
    if hint:
        err.print(Text.assemble(("hint:", "bold" if style else ""), " ", hint))
    raise typer.Exit(2)


def check_format(value: str) -> bool:
    """True for json, False for terminal; anything else is a usage error."""
    if value not in ("terminal", "json"):
        fail(f"unknown format {value!r}", "use --format terminal or json")
    return value == "json"


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=True, default=str) + "\n")


@contextmanager
def user_errors() -> Iterator[None]:
    try:
        yield
    except PlanshiftError as exc:
        fail(exc.message, exc.hint)
    except KeyboardInterrupt:
        err.print("interrupted: embedded clusters stopped, the run is marked failed")
        raise typer.Exit(130) from None
