"""The suite runs against the installed planshift (what users get), and that installation is
this checkout's code: `make test` reinstalls it before running the tests."""

from __future__ import annotations

from pathlib import Path

import collectors
import detector
import rules

ROOT = Path(__file__).resolve().parent.parent


def test_the_packages_come_from_the_installation_not_the_checkout() -> None:
    for package in (detector, collectors, rules):
        where = Path(package.__file__).resolve().parent
        assert where != ROOT / package.__name__ and "site-packages" in where.parts, (
            f"{package.__name__} imported from the checkout ({where}): run `make test`, which "
            "installs planshift into the venv and tests that"
        )


def test_the_installation_is_this_checkout() -> None:
    stale = []
    for package in (detector, collectors, rules):
        installed = Path(package.__file__).resolve().parent
        for source in sorted((ROOT / package.__name__).rglob("*.py")):
            copy = installed / source.relative_to(ROOT / package.__name__)
            if not copy.is_file() or copy.read_bytes() != source.read_bytes():
                stale.append(str(source.relative_to(ROOT)))
    assert stale == [], (
        f"the installed planshift differs from the checkout: {stale[:5]}; run `make test`"
    )


def test_package_data_is_installed() -> None:
    installed = Path(detector.__file__).resolve().parent
    assert (installed / "py.typed").is_file()
    assert (
        (installed / "jobs" / "demo_workload.toml").read_text().startswith("# The planshift demo")
    )
    migrations = sorted(p.name for p in (installed / "store" / "migrations").glob("*.sql"))
    assert migrations == sorted(p.name for p in (ROOT / "detector/store/migrations").glob("*.sql"))
    assert (installed / "reports" / "schema" / "report-v1.schema.json").is_file()
