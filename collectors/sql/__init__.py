"""Server SQL kept as files (the pg_activity way): read with `load(name)`."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def load(name: str) -> str:
    """The statement in `NAME.sql`, without its comment lines and trailing semicolon."""
    text = resources.files(__name__).joinpath(f"{name}.sql").read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return "\n".join(lines).strip().rstrip(";")
