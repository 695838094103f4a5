"""`--format junit`: JUnit XML that CI systems (GitHub, GitLab, Jenkins) display as test results.

One test suite per comparison, one test case per query and sweep point (classname
`planshift.<query>`, name the query's label), the queries not compared because they failed on a
side included. A case fails when it has findings at or above `--fail-on`; its other findings go
to `system-out`. `time` is the candidate's median duration
in seconds. Properties record the sides, versions and settings that differ.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from detector.model import ComparisonResult, Finding, QueryComparison, Severity
from detector.reports.common import (
    findings_by_query,
    findings_of_failed,
    not_compared_reason,
    settings_text,
    title,
)
from detector.reports.escape import for_xml


def _finding_line(finding: Finding) -> str:
    return f"{finding.severity.value} {finding.code} {finding.name}: {finding.message}"


def _seconds(query: QueryComparison | None) -> str:
    timing = query.candidate.timing if query else None
    return f"{timing.median_ms / 1000:.6f}" if timing else "0"


def _case(
    suite: ET.Element,
    classname: str,
    name: str,
    query: QueryComparison | None,
    findings: list[Finding],
    fail_on: Severity | None,
    note: str | None = None,
) -> bool:
    case = ET.SubElement(
        suite, "testcase", {"classname": classname, "name": name, "time": _seconds(query)}
    )
    failing = [f for f in findings if fail_on is not None and f.severity.rank >= fail_on.rank]
    if failing:
        worst = failing[0]
        failure = ET.SubElement(
            case,
            "failure",
            {"message": f"{worst.code} {worst.name}: {worst.message}", "type": worst.code},
        )
        failure.text = "\n".join(_finding_line(f) for f in failing) + "\n"
    lines = [] if note is None else [note]
    if query is not None:
        lines.append(f"{query.timing.verdict.value}: {query.timing.describe()}")
        lines.append(f"baseline plan:  {query.baseline.dominant.signature}")
        lines.append(f"candidate plan: {query.candidate.dominant.signature}")
    lines.extend(_finding_line(f) for f in findings if f not in failing)
    if lines:
        ET.SubElement(case, "system-out").text = "\n".join(lines) + "\n"
    return bool(failing)


def _clean(root: ET.Element) -> None:
    """Every text and attribute as XML 1.0 allows (names and messages are user text)."""
    for element in root.iter():
        if element.text:
            element.text = for_xml(element.text)
        for key, value in list(element.attrib.items()):
            element.set(key, for_xml(value))


def render_junit(result: ComparisonResult, *, fail_on: Severity | None) -> str:
    owned, _ = findings_by_query(result)
    root = ET.Element("testsuites", {"name": "planshift"})
    suite = ET.SubElement(
        root,
        "testsuite",
        {"name": f"planshift compare {result.baseline} -> {result.candidate}"},
    )
    properties = ET.SubElement(suite, "properties")
    values = [
        ("baseline", result.baseline),
        ("candidate", result.candidate),
        ("comparison", title(result)),
        ("runs", ",".join(map(str, result.run_ids))),
        ("fail_on", fail_on.value if fail_on else "never"),
        *(("setting", text) for text in settings_text(result)),
    ]
    for name, value in values:
        ET.SubElement(properties, "property", {"name": name, "value": value})
    failures = 0
    for index, query in enumerate(result.queries):
        classname = f"planshift.{query.query_name}"
        findings = owned.get(index, [])
        failures += _case(suite, classname, query.label, query, findings, fail_on)
    of_failed, orphans = findings_of_failed(result)
    for index, query in enumerate(result.failed):
        note = f"not compared: {not_compared_reason(query)}"
        findings = of_failed.get(index, [])
        classname = f"planshift.{query.query_name}"
        failures += _case(suite, classname, query.label, None, findings, fail_on, note)
    if orphans:
        failures += _case(suite, "planshift", "comparison", None, orphans, fail_on)
    tests = len(result.queries) + len(result.failed) + bool(orphans)
    total = sum(float(_seconds(q)) for q in result.queries)
    for element in (root, suite):
        element.set("tests", str(tests))
        element.set("failures", str(failures))
        element.set("errors", "0")
        element.set("skipped", "0")
        element.set("time", f"{total:.6f}")
    _clean(root)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
