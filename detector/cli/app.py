"""The `planshift` command: the Typer app at the bottom, every command module registered on it."""

from __future__ import annotations

import signal
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup, TyperOption

from detector.cli import (
    approve,
    calibrate,
    capture,
    census,
    compare,
    demo,
    fleet,
    noise,
    postmortem,
    rules,
    run,
    runs,
    servers,
)
from detector.cli.common import configure_logging, err, fail, out
from detector.errors import PlanshiftError


class _Commands(TyperGroup):
    """Every PlanshiftError a command lets through (rule config included) becomes exit 2."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except PlanshiftError as exc:
            fail(exc.message, exc.hint)


_value_type = getattr(TyperOption, "display_type_rich", None)


def _flag_type(option: TyperOption, ctx: Any) -> str | None:
    """Flags take no value: no `<bool>` beside them in --help (typer 0.29 shows one for every
    option). typer is pinned to 0.29.x; tests/test_cli.py fails if a typer stops honouring this."""
    return None if option.is_flag or _value_type is None else _value_type(option, ctx)


if _value_type is not None:
    setattr(TyperOption, "display_type_rich", _flag_type)  # noqa: B010

app = typer.Typer(
    cls=_Commands,
    name="planshift",
    help="Find PostgreSQL plan regressions across versions and settings before users do.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from detector.version import __version__

        out.print(f"planshift {__version__}", markup=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help="Log on stderr what each step reads, detects and skips (e.g. an ingest: each "
            "file's format, prefix, entries and every problem with its file:line).",
        ),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", help="Results and errors only: no progress or notes on stderr."),
    ] = False,
) -> None:
    """Find PostgreSQL plan regressions across versions and settings before users do."""
    configure_logging(debug=debug, quiet=quiet)


COMMANDS = (
    run.run,
    compare.compare,
    demo.demo,
    approve.approve,
    noise.noise,
    calibrate.calibrate,
    runs.runs,
    rules.rules,
    census.census,
    postmortem.ingest,
    postmortem.snapshot,
    postmortem.timeline,
    fleet.fleet,
    capture.capture,
)
for command in COMMANDS:
    app.command()(command)
app.command("setup-check")(postmortem.setup_check)
app.add_typer(servers.app, name="servers")


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    # exits planshift controls: clusters are stopped on the way out (context managers, atexit)
    signal.signal(signal.SIGTERM, _terminate)
    if hasattr(signal, "SIGHUP"):  # a closed terminal or ssh session
        signal.signal(signal.SIGHUP, _terminate)
    try:
        app(prog_name="planshift")
    except PlanshiftError as exc:
        try:
            fail(exc.message, exc.hint)
        except typer.Exit as done:
            sys.exit(done.exit_code)
    except KeyboardInterrupt:
        err.print("interrupted: embedded clusters stopped")
        sys.exit(130)
