"""`--format github`: GitHub Actions workflow commands, one annotation per finding.

`::error title=PS200 timing-regression: q::message`. Findings at or above `--fail-on` are
errors; below it, warnings stay warnings and the rest are notices. A last plain line sums up.
Printed to the log of a workflow step, they show on the run's summary and the pull request.
"""

from __future__ import annotations

from detector.model import ComparisonResult, Finding, QueryComparison, Severity
from detector.reports.common import failing_findings, ranked_findings, verdict_summary
from detector.reports.escape import single_line, visible


def escape_data(text: str) -> str:
    """A command's message: GitHub's escapes, and no control character (the log renders ANSI)."""
    text = visible(text, keep="\r\n\t")
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def level(finding: Finding, fail_on: Severity | None) -> str:
    if fail_on is not None and finding.severity.rank >= fail_on.rank:
        return "error"
    return "warning" if finding.severity.rank >= Severity.WARNING.rank else "notice"


def annotation(finding: Finding, query: QueryComparison | None, fail_on: Severity | None) -> str:
    where = query.label if query else finding.query_name
    heading = f"planshift {finding.code} {finding.name}: {where}"
    return f"::{level(finding, fail_on)} title={escape_property(heading)}::{escape_data(finding.message)}"


def render_github(result: ComparisonResult, *, fail_on: Severity | None) -> str:
    ordered = sorted(ranked_findings(result), key=lambda row: (-row[1].severity.rank, -row[0]))
    lines = [annotation(finding, query, fail_on) for _, finding, query in ordered]
    failing = len(failing_findings(result, fail_on))
    lines.append(
        f"planshift {single_line(result.baseline)} -> {single_line(result.candidate)}: "
        f"{verdict_summary(result)}; "
        f"{len(result.findings)} findings, {failing} at or above --fail-on "
        f"{fail_on.value if fail_on else 'never'}"
    )
    return "\n".join(lines) + "\n"
