"""What an installation says about its build, without starting it: pg_config's configure options
and CFLAGS, the llvmjit provider in its library directory, the compiler named in the binary.

The running server confirms or overrides these (detector.model.build.side_build): block_size,
segment_size and debug_assertions are preset options, pg_jit_available() and version() are
asked at run time.
"""

from __future__ import annotations

import mmap
import re
import subprocess
from pathlib import Path
from typing import Any

from detector.model.build import compiled_by

_OPTIMIZATION = re.compile(r"(?:^|\s)(-O\w*)")
_BLOCK_SIZE = re.compile(r"--with-blocksize=(\d+)")
_SEGMENT_SIZE = re.compile(r"--with-segsize=(\d+)")
_VERSION_STRING = re.compile(
    rb"PostgreSQL [^\x00]{1,200}?, compiled by [^\x00]{1,200}?, (?:32|64)-bit"
)
_LIBRARY_SUFFIXES = (".so", ".dylib", ".dll")


def installation_build(
    bindir: Path, builder: str, version: str, libdirs: list[Path]
) -> dict[str, Any]:
    """Build facts of the installation in `bindir` (None where it cannot tell)."""
    configure, cflags = _pg_config(bindir)
    optimization = _OPTIMIZATION.findall(cflags or "")
    block_kb = _BLOCK_SIZE.search(configure or "")
    segment_gb = _SEGMENT_SIZE.search(configure or "")
    return {
        "builder": builder,
        "version": version,
        "compiled_by": _binary_compiler(bindir / "postgres"),
        "optimization": optimization[-1] if optimization else None,
        "jit_available": any(
            (d / f"llvmjit{suffix}").is_file() for d in libdirs for suffix in _LIBRARY_SUFFIXES
        ),
        "assertions": None if configure is None else "--enable-cassert" in configure,
        "debug_symbols": None if configure is None else "--enable-debug" in configure,
        "block_size": None
        if configure is None
        else int(block_kb.group(1) if block_kb else 8) * 1024,
        "segment_size": None
        if configure is None
        else f"{segment_gb.group(1) if segment_gb else 1}GB",
        "configure": configure,
    }


def _pg_config(bindir: Path) -> tuple[str | None, str | None]:
    pg_config = bindir / "pg_config"
    if not pg_config.is_file():
        return None, None
    try:
        result = subprocess.run(
            [str(pg_config), "--configure", "--cflags"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except OSError:
        return None, None
    lines = result.stdout.splitlines()
    if result.returncode != 0 or len(lines) != 2:
        return None, None
    return lines[0].strip(), lines[1].strip()


def _binary_compiler(postgres: Path) -> str | None:
    """The compiler in the binary's PG_VERSION_STR (what `SELECT version()` prints)."""
    try:
        with (
            postgres.open("rb") as file,
            mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data,
        ):
            match = _VERSION_STRING.search(data)
            found = bytes(match.group(0)) if match else b""
    except (OSError, ValueError):
        return None
    return compiled_by(found.decode(errors="replace"))
