"""Which timing verdicts a busy host puts at risk, and why (PS203, `compare --busy-host`).

Interleaved sides share the host's state sample by sample, so a busy host slows both alike
and their ratio holds, unless the two sides use the host differently:
- `reads`: the plans differ and read blocks from outside shared buffers. A saturated host
  makes each read cost more (waiting for a CPU after every syscall, or for the disk), and the
  plan that reads more blocks, or reads them one at a time (index and bitmap heap scans)
  where the other reads sequentially, pays more of it than on a quiet host: the two plans
  can rank the other way there.
- `cpu`: the plans differ and the CPUs were contended. A preempted execution waits for a CPU
  whatever its own work, which adds the same milliseconds to both plans and pulls their ratio
  toward 1 (the demo's 1.27x regression, 330 against 3,526 buffers, measured `unchanged` at
  load 10-19); parallel workers (plans on different numbers of processes) wait for CPUs a
  quiet host would give them.
- `io-path`: the same plan reads blocks under different I/O settings or server versions
  (prefetching, io_method, read streams): what they gain depends on how busy the disk and
  CPUs are.
- `host-differs`: the sides were not measured together (two runs, `NAME@RUN`) and one of
  them on a busy host: any difference can be the host's rather than the query's.
"""

from __future__ import annotations

from dataclasses import dataclass

from detector.model.comparison import QueryComparison, Side
from detector.model.host import HostConditions
from detector.model.plan import Plan
from detector.model.settings import category

SINGLE_BLOCK_SCANS = frozenset({"Index Scan", "Index Only Scan", "Bitmap Heap Scan"})


@dataclass(frozen=True)
class Risk:
    kind: str  # reads | cpu | io-path | host-differs
    why: str


def busy_hosts(comparison: QueryComparison) -> list[tuple[str, HostConditions]]:
    """(side label, its conditions) of the sides measured on a busy host."""
    return [
        (side.label, side.host)
        for side in (comparison.baseline, comparison.candidate)
        if side.host is not None and side.host.busy
    ]


def host_text(hosts: list[tuple[str, HostConditions]]) -> str:
    """`the host was busy (load 2.8 per CPU ...; reads 11.9 us/block, 2.5x ...)`, once when
    both sides share the same reasons."""
    texts = {label: "; ".join(r.text for r in host.busy_reasons()) for label, host in hosts}
    if len(set(texts.values())) == 1:
        return f"the host was busy ({next(iter(texts.values()))})"
    return "the host was busy: " + ", ".join(f"{label}: {text}" for label, text in texts.items())


def verdict_risks(comparison: QueryComparison) -> tuple[Risk, ...]:
    """Why this query's timing verdict may not hold on a quiet host (empty: it holds, or the
    host was not busy)."""
    base, cand = comparison.baseline, comparison.candidate
    hosts = busy_hosts(comparison)
    if not hosts or base.timing is None or cand.timing is None:
        return ()
    cpu_busy = any(r.kind == "cpu" for _, host in hosts for r in host.busy_reasons())
    risks: list[Risk] = []
    if not comparison.timing.paired:
        labels = " and ".join(label for label, _ in hosts)
        risks.append(
            Risk(
                "host-differs",
                f"the sides were not measured together and {labels} ran on a busy host: the "
                "difference can be the host's rather than the query's",
            )
        )
    reads = (_reads(base.dominant.plan), _reads(cand.dominant.plan))
    if comparison.plan_changed:
        if reads[0] or reads[1]:
            risks.append(
                Risk(
                    "reads",
                    f"the plans read differently ({_read_text(base)}; {_read_text(cand)}): "
                    "on a busy host each read costs more, and the plan that reads more blocks, "
                    "or one block at a time, pays more of it than on a quiet host, so the two "
                    "plans can rank the other way there",
                )
            )
        if cpu_busy:
            risks.append(Risk("cpu", _cpu_text(base, cand)))
    elif reads[0] or reads[1]:
        differs = _io_differences(base, cand)
        if differs:
            risks.append(
                Risk(
                    "io-path",
                    f"the same plan reads {max(reads)} blocks under different {differs}: "
                    "what prefetching and the I/O path gain depends on how busy the disk and "
                    "CPUs are",
                )
            )
    return tuple(risks)


def _reads(plan: Plan) -> int:
    return plan.buffers_total().shared_read


def _read_text(side: Side) -> str:
    """`current reads 330 blocks, one at a time (Bitmap Heap Scan), 12.1 us each`."""
    plan = side.dominant.plan
    buffers = plan.buffers_total()
    if not buffers.shared_read:
        return f"{side.label} reads nothing from outside shared buffers"
    scans = {n.node_type for _, n in plan.nodes() if n.buffers.shared_read}
    single = sorted(scans & SINGLE_BLOCK_SCANS)
    how = f", one at a time ({', '.join(single)})" if single else ""
    if not single and "Seq Scan" in scans:
        how = ", sequentially (Seq Scan)"
    each = ""
    if buffers.io_read_ms is not None:
        each = f", {buffers.io_read_ms * 1000 / buffers.shared_read:.1f} us each"
    return f"{side.label} reads {buffers.shared_read:,} blocks{how}{each}"


def _cpu_text(base: Side, cand: Side) -> str:
    """Why contended CPUs can change the ratio of two different plans."""
    workers = (_processes(base.dominant.plan), _processes(cand.dominant.plan))
    if workers[0] != workers[1]:
        return (
            f"the plans run on {workers[0]} and {workers[1]} processes on contended CPUs: "
            "parallel workers waited for CPUs a quiet host would give them"
        )
    work = [side.dominant.median_shared_blocks for side in (base, cand)]
    did = ""
    if work[0] is not None and work[1] is not None and work[0] != work[1]:
        did = f" ({work[0]:,.0f} against {work[1]:,.0f} shared buffers per execution)"
    return (
        f"the plans do different work{did} on contended CPUs: a preempted execution waits for "
        "a CPU as long as other tasks hold it, not in proportion to its own work, which can "
        "pull the measured ratio toward 1 or scatter it"
    )


def _processes(plan: Plan) -> int:
    """Processes a plan runs on: the leader plus the workers its Gather nodes planned."""
    return 1 + sum(node.workers_planned or 0 for _, node in plan.nodes())


def _io_differences(base: Side, cand: Side) -> str:
    """`effective_io_concurrency, server versions` that differ between the sides."""
    names = sorted(
        name
        for name in set(base.settings) | set(cand.settings)
        if category(name) == "i/o" and base.settings.get(name) != cand.settings.get(name)
    )
    if base.server_version_num != cand.server_version_num:
        names.append("server versions")
    return ", ".join(names)
