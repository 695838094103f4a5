"""The layering of DESIGN.md, checked on the source's import statements (AST, no imports run).

One rule per layer, no per-file exceptions:

    rules              -> detector.model, detector.errors
    collectors         -> detector.model (the sink Protocols included), detector.errors, detector.version
    detector.model     -> detector.errors; no I/O library
    detector.store     -> detector.model, detector.errors, detector.version; the only duckdb importer
    detector.engine    -> detector.store, detector.model, rules; never collectors, jobs, cli, reports
    detector.reports   -> detector.engine, detector.model, rules; never collectors, store, jobs, cli
    detector.jobs      -> anything below the CLI
    detector.cli       -> everything (nothing imports it but `python -m detector`)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = ("detector", "collectors", "rules")
IO_LIBRARIES = ("duckdb", "psycopg", "typer", "rich")
BASE = ("detector.model", "detector.errors", "detector.version")

# layer -> first-party (or I/O library) prefixes it may import, besides itself
LAYERS: dict[str, tuple[str, ...]] = {
    "rules": ("detector.model", "detector.errors"),
    "collectors": (*BASE, "psycopg"),
    "detector/model": ("detector.errors",),
    "detector/store": (*BASE, "duckdb"),
    "detector/engine": (*BASE, "detector.store", "rules"),
    "detector/reports": (*BASE, "detector.engine", "rules", "rich"),
    "detector/jobs": (
        *BASE,
        "detector.store",
        "detector.engine",
        "detector.reports",
        "collectors",
        "rules",
        "psycopg",
        "rich",
    ),
}


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            if node.module in FIRST_PARTY:  # `from detector import stats`
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def modules(package: str) -> dict[str, set[str]]:
    return {
        str(path.relative_to(ROOT)): imports_of(path)
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def allowed(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def governed(name: str) -> bool:
    """First-party modules and the I/O libraries are what layers may or may not import."""
    return name.split(".")[0] in (*FIRST_PARTY, *IO_LIBRARIES) and name != "detector"


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_each_layer_imports_only_what_its_rule_allows(layer: str) -> None:
    own = layer.replace("/", ".")
    permitted = (own, *LAYERS[layer])
    bad = {
        module: sorted(n for n in names if governed(n) and not allowed(n, permitted))
        for module, names in modules(layer).items()
    }
    assert {m: n for m, n in bad.items() if n} == {}


def test_only_the_store_imports_duckdb() -> None:
    users = sorted(
        module
        for package in FIRST_PARTY
        for module, names in modules(package).items()
        if any(allowed(n, ("duckdb",)) for n in names)
    )
    assert users and all(u.startswith("detector/store/") for u in users), users


def test_nothing_imports_the_cli() -> None:
    users = sorted(
        module
        for package in FIRST_PARTY
        for module, names in modules(package).items()
        if any(allowed(n, ("detector.cli",)) for n in names)
        and not module.startswith("detector/cli/")
        and module != "detector/__main__.py"
    )
    assert users == []


def test_every_module_belongs_to_a_layer() -> None:
    layered = (*LAYERS, "detector/cli")
    top = {
        "detector/__init__.py",
        "detector/__main__.py",
        "detector/errors.py",
        "detector/version.py",
    }
    loose = sorted(
        module
        for package in FIRST_PARTY
        for module in modules(package)
        if module not in top and not any(module.startswith(layer + "/") for layer in layered)
    )
    assert loose == []


def test_the_checker_sees_violations(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import duckdb\nfrom detector import engine\nfrom collectors.runner import x\n"
    )
    assert imports_of(sample) == {"duckdb", "detector", "detector.engine", "collectors.runner"}
    assert not allowed("detector.engine.stats", LAYERS["collectors"])
    assert allowed("detector.model.sink", LAYERS["collectors"])


def test_standard_library_is_never_governed() -> None:
    assert not any(governed(name) for name in sys.stdlib_module_names)
