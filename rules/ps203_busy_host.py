"""PS203 busy-host: a timing verdict measured on a busy host, in a way a busy host changes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, QueryComparison, Severity, Verdict
from detector.model.comparison import NOT_COMPARED
from detector.model.host_risk import busy_hosts, host_text, verdict_risks
from rules.base import rule


@rule(
    "PS203",
    "busy-host",
    "timing",
    Severity.WARNING,
    gate=lambda c, _: bool(busy_hosts(c)),
)
def busy_host(comparison: QueryComparison, options: Mapping[str, Any]) -> Iterator[Finding]:
    """The timing verdict was measured on a busy host that can reverse it.

    ## What it flags
    A query whose sides were measured while the host was busy (the report's
    `host` line: load per CPU >= 1.0, CPU pressure >= 25% of the time, steal
    >= 5%, I/O pressure >= 10%, or the run's read and CPU probe at least 2x
    slower than on the quiet host that `planshift calibrate` measured), when
    the verdict depends on that: the plans changed and read blocks from
    outside shared buffers (`reads`), the plans changed while the CPUs were
    contended (`cpu`, parallel workers included), the same plan reads under
    different I/O settings or versions (`io-path`), or the sides were measured
    in different runs (`host-differs`). Whatever the verdict: a regression can
    pass for `unchanged` as well as the reverse. Warning; `compare --busy-host
    inconclusive` also makes those verdicts inconclusive, `--busy-host fail`
    makes this an error.

    ## Why it matters
    Interleaved sides share the host's state, so a busy host slows both alike,
    unless they use it differently. On a saturated 2-core host a bitmap heap
    scan's single-block reads cost 12 us against 5 us per block for the seq
    scan it was compared with: a seq scan 1.3x slower on a quiet host measured
    1.4x faster. A preempted execution waits for a CPU whatever its work, so
    two plans' ratio is pulled toward 1: a 1.27x regression (330 against
    3,526 buffers) measured `unchanged` at load 10-19.

    ## Example
    random_page_cost 4 -> 30, Bitmap Heap Scan -> Seq Scan, four CPU burners:

        the host was busy (load 2.6 per CPU (5.2 on 2 CPUs) >= 1.0; tasks
        waited for a CPU 97% of the time >= 25%): the improved verdict
        (1.41x faster) may not hold on a quiet host: the plans read
        differently (current reads 5,214 blocks, one at a time (Bitmap Heap
        Scan), 12.1 us each; proposed reads 20,010 blocks, sequentially (Seq
        Scan), 4.9 us each): on a busy host each read costs more ...

    ## What to do
    Rerun when the host is quiet (`planshift run --max-load 2` pauses while
    the 1-minute load is above 2), on a dedicated runner, or with the cache
    mode production has. `planshift calibrate` on the idle host gives the probe
    a quiet baseline to compare with.

    ## References
    - track_io_timing:
      https://www.postgresql.org/docs/current/runtime-config-statistics.html
    - EXPLAIN ANALYZE and its caveats:
      https://www.postgresql.org/docs/current/using-explain.html
    """
    timing = comparison.timing
    if timing.reason.startswith(NOT_COMPARED):  # durations that do not compare anyway
        return
    risks = verdict_risks(comparison)
    if not risks:
        return
    hosts = busy_hosts(comparison)
    verdict = timing.verdict.value
    if timing.ratio is not None:
        moved = (
            f"{timing.ratio:.2f}x slower"
            if timing.ratio >= 1
            else f"{1 / timing.ratio:.2f}x faster"
        )
        verdict += f" ({moved})"
    consequence = (
        f"a quiet host may decide this {verdict} verdict"
        if timing.verdict is Verdict.INCONCLUSIVE
        else f"the {verdict} verdict may not hold on a quiet host"
    )
    message = f"{host_text(hosts)}: {consequence}: " + "; ".join(risk.why for risk in risks)
    evidence = {
        "verdict": timing.verdict.value,
        "risks": [{"kind": risk.kind, "why": risk.why} for risk in risks],
        "hosts": {label: host.as_dict() for label, host in hosts},
    }
    yield busy_host.finding(comparison, message, evidence)
