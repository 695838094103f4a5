"""The layering of DESIGN.md, checked on the source's import statements (AST, no imports run)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = ("detector", "collectors", "rules")


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


def is_stdlib(name: str) -> bool:
    return name.split(".")[0] in sys.stdlib_module_names


def test_rules_import_only_the_model_the_errors_and_the_standard_library() -> None:
    permitted = ("rules", "detector.model", "detector.errors")
    bad = {
        module: sorted(n for n in names if not is_stdlib(n) and not allowed(n, permitted))
        for module, names in modules("rules").items()
    }
    assert {m: n for m, n in bad.items() if n} == {}


def test_collectors_never_import_rules_or_the_engine_above_the_store() -> None:
    permitted = (
        "collectors",
        "detector.__version__",
        "detector.model",
        "detector.store",
        "detector.errors",
        "detector.workload",
    )
    bad = {}
    for module, names in modules("collectors").items():
        first_party = [n for n in names if n.split(".")[0] in FIRST_PARTY and n != "detector"]
        wrong = sorted(n for n in first_party if not allowed(n, permitted))
        if wrong:
            bad[module] = wrong
    assert bad == {}


def test_only_the_store_imports_duckdb() -> None:
    users = sorted(
        module
        for package in FIRST_PARTY
        for module, names in modules(package).items()
        if any(allowed(n, ("duckdb",)) for n in names)
    )
    assert users and all(u.startswith("detector/store") for u in users), users


def test_the_model_has_no_io_dependencies() -> None:
    heavy = ("duckdb", "psycopg", "typer", "rich", "collectors", "rules")
    bad = {
        module: sorted(n for n in names if allowed(n, heavy))
        for module, names in modules("detector/model").items()
    }
    assert {m: n for m, n in bad.items() if n} == {}


def test_the_checker_sees_violations(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import duckdb\nfrom detector import stats\nfrom collectors.runner import x\n"
    )
    assert imports_of(sample) == {"duckdb", "detector", "detector.stats", "collectors.runner"}
