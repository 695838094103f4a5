"""Report formats for `planshift compare`: a registry of reporters and where their output goes.

Every format renders a ComparisonResult to text: `render("markdown", result, fail_on=...)`.
`terminal` is the rich report (detector.reports.comparison.terminal) rendered without colour; on a
terminal the CLI prints it through its own console instead. Reporters are imported lazily, so
asking for `json` never imports the HTML templates.

Outputs (`--output`, repeatable): `FILE` takes its format from the extension (.json, .md,
.xml = junit, .html, .txt = terminal) unless `--format` is given, which then applies to every
output; `FORMAT:FILE` names the format of one output; `-` is standard output.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from detector.errors import PlanshiftError
from detector.model import ComparisonResult, Severity

if TYPE_CHECKING:
    from rich.console import Console


class Reporter(Protocol):
    """A report format: `name` as given to --format, and the text it renders."""

    @property
    def name(self) -> str: ...

    @property
    def extensions(self) -> tuple[str, ...]: ...

    @property
    def summary(self) -> str: ...

    def render(self, result: ComparisonResult, *, fail_on: Severity | None) -> str: ...


@dataclass(frozen=True)
class LazyReporter:
    """A reporter whose module is imported on first use (`module:function`)."""

    name: str
    extensions: tuple[str, ...]
    summary: str
    target: str

    def render(self, result: ComparisonResult, *, fail_on: Severity | None) -> str:
        module, _, function = self.target.partition(":")
        text: str = getattr(import_module(module), function)(result, fail_on=fail_on)
        return text


def render_terminal_text(result: ComparisonResult, *, fail_on: Severity | None) -> str:
    """The terminal report as plain text (every query shown: a file is a record)."""
    from detector.reports.comparison.terminal import render_terminal
    from detector.reports.consoles import make_console

    buffer = io.StringIO()
    render_terminal(result, make_console(file=buffer), verbose=True)
    # a file has no background to fill: no cell padding at the ends of lines
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


def render_json_text(result: ComparisonResult, *, fail_on: Severity | None) -> str:
    from detector.reports.comparison.json_report import render_json

    return render_json(result)


_PACKAGE = "detector.reports"
_REPORTERS = (
    ("terminal", (".txt",), "the console report", ":render_terminal_text"),
    ("json", (".json",), "versioned JSON (schema: report-v1.schema.json)", ":render_json_text"),
    (
        "markdown",
        (".md", ".markdown"),
        "a pull-request comment",
        ".comparison.markdown:render_markdown",
    ),
    ("junit", (".xml",), "JUnit XML, one test case per query", ".comparison.junit:render_junit"),
    ("github", (), "GitHub Actions annotations (::error ...)", ".comparison.github:render_github"),
    (
        "html",
        (".html", ".htm"),
        "one offline HTML file: charts, plan diffs",
        ".comparison.html:render_html",
    ),
)
FORMATS: dict[str, Reporter] = {
    name: LazyReporter(name, extensions, summary, _PACKAGE + target)
    for name, extensions, summary, target in _REPORTERS
}


def get_reporter(name: str) -> Reporter:
    try:
        return FORMATS[name]
    except KeyError:
        raise PlanshiftError(
            f"unknown format {name!r}", f"use one of: {', '.join(FORMATS)}"
        ) from None


def render(
    format_name: str, result: ComparisonResult, *, fail_on: Severity | None = Severity.ERROR
) -> str:
    return get_reporter(format_name).render(result, fail_on=fail_on)


def format_for_path(path: Path) -> str | None:
    suffix = path.suffix.lower()
    for reporter in FORMATS.values():
        if suffix in reporter.extensions:
            return reporter.name
    return None


@dataclass(frozen=True)
class OutputSpec:
    format: str
    path: Path | None  # None: standard output


def resolve_outputs(format_name: str | None, outputs: Sequence[str]) -> list[OutputSpec]:
    """Where each report goes; no --output means `--format` (default terminal) on stdout."""
    if format_name is not None:
        get_reporter(format_name)
    if not outputs:
        return [OutputSpec(format_name or "terminal", None)]
    specs = []
    for text in outputs:
        prefix, sep, rest = text.partition(":")
        if sep and prefix in FORMATS:
            name, where = prefix, rest
        else:
            name, where = format_name or "", text
        path = None if where == "-" else Path(where)
        if not name:
            guessed = "terminal" if path is None else format_for_path(path)
            if guessed is None:
                raise PlanshiftError(
                    f"--output {text}: cannot tell the format from the extension",
                    "name it: --output junit:results.txt, or give --format "
                    "(extensions: .json .md .xml .html .txt)",
                )
            name = guessed
        specs.append(OutputSpec(name, path))
    paths = [s.path for s in specs if s.path is not None]
    if len(set(paths)) != len(paths):
        raise PlanshiftError("the same --output file is named twice")
    return specs


def gate_severity(fail_on: str | None) -> Severity | None:
    """`--fail-on` as a severity; `never` (or nothing) turns the gate off."""
    if fail_on is None or fail_on == "never":
        return None
    try:
        return Severity.parse(fail_on)
    except PlanshiftError:
        choices = ", ".join([*(s.value for s in Severity), "never"])
        raise PlanshiftError(
            f"unknown --fail-on {fail_on!r}", f"use one of: {choices} (never: no gate)"
        ) from None


def write_reports(
    result: ComparisonResult,
    specs: Sequence[OutputSpec],
    *,
    fail_on: Severity | None,
    console: Console,
    verbose: bool,
) -> None:
    """Render each requested output; the terminal format on stdout goes through `console`."""
    for spec in specs:
        if spec.path is None and spec.format == "terminal":
            from detector.reports.comparison.terminal import render_terminal

            render_terminal(result, console, verbose=verbose)
            continue
        text = render(spec.format, result, fail_on=fail_on)
        if spec.path is None:
            console.out(text, end="", highlight=False)
        else:
            spec.path.write_text(text)
