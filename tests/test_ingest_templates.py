"""Query identity through statement templates (collectors/logs/templates.py): texts that differ
only in plain constants get, from their template, exactly the identity the full way gives
(fingerprint, normalized SQL, literals); texts where a constant's value may change the parse
tree, or the lexer would cut them otherwise, never use a template."""

from __future__ import annotations

import pytest

from collectors.logs.plans import QueryKeys
from collectors.logs.templates import Templates, template_of

SAME_TEMPLATE = [
    "SELECT a, b FROM t WHERE id = {} AND name = '{}' LIMIT 5",
    "SELECT x::varchar({}) FROM t WHERE y > {}.5 AND z = '{}'",
    "SELECT sum(v) FROM \"t 1\" WHERE v BETWEEN {} AND {} AND k IN ('{}', 'b')",
    "SELECT * FROM t WHERE d >= date '2025-01-0{}' AND s LIKE 'x{}%'",
    "SET work_mem = '{}MB'",
    "SELECT interval '{}' day, $1 FROM t WHERE k = '{}'",
    "INSERT INTO t (a, b) VALUES ({}, 'n{}')",
]
NEVER = [  # a constant's value is used by the grammar, or the lexer joins or reads otherwise
    "SELECT x::float({}) FROM t",
    "SELECT CURRENT_TIME({})",
    "SELECT * FROM t WHERE a = -{}",
    "FETCH {} FROM c",
    "CREATE TABLE t (a int) WITH (fillfactor = {})",
]
NO_TEMPLATE = [
    "SELECT E'a{}'",
    "SELECT 'a''{}'",
    "SELECT 1 -- {}",
    "SELECT $$x{}$$",
    "SELECT 'é{}'",
    "SELECT U&'d{}'",
    "SELECT 12345678901{}",
]


def full(text: str) -> tuple[object, ...]:
    identity = QueryKeys()._compute(text)
    return identity.key, identity.sql, identity.literals, identity.secret, identity.explain_only


@pytest.mark.parametrize("pattern", SAME_TEMPLATE + NEVER)
def test_a_template_gives_the_identity_of_the_full_way(pattern: str) -> None:
    keys = QueryKeys()
    for value in range(1, 9):
        text = pattern.format(*[str(value * 7 + n) for n in range(pattern.count("{}"))])
        identity = keys.identify(text)
        got = identity.key, identity.sql, identity.literals, identity.secret, identity.explain_only
        assert got == full(text), text
    proven = [t for t in keys.templates.known.values() if t is not None and t.checked]
    assert bool(proven) == (pattern in SAME_TEMPLATE), keys.templates.known


@pytest.mark.parametrize("pattern", NO_TEMPLATE)
def test_texts_the_regex_cannot_cut_safely_have_no_template(pattern: str) -> None:
    assert template_of(pattern.format(5)) is None


def test_passwords_and_explain_are_identified_per_text() -> None:
    templates = Templates()
    assert templates.find("ALTER ROLE a PASSWORD 'x1'") is None
    assert templates.find("SELECT dblink('host=a password=1')") is None
    assert templates.find("EXPLAIN SELECT 1 FROM t WHERE a = 5") is None
    keys = QueryKeys()
    for value in range(5):
        identity = keys.identify(f"SELECT dblink('host=a password={value}')")
        assert identity.secret and identity.literals == ()


def test_a_template_that_disagrees_is_dropped() -> None:
    templates = Templates()
    first = templates.find("SELECT a FROM t WHERE b = 1")
    assert first is not None
    templates.learn(first, "key", "SELECT a FROM t WHERE b = $1", ("1",), plain=True)
    second = templates.find("SELECT a FROM t WHERE b = 2")
    assert second is not None and second.proven is None
    templates.learn(second, "other", "SELECT a FROM t WHERE b = $1", ("2",), plain=True)
    third = templates.find("SELECT a FROM t WHERE b = 3")
    assert third is not None and third.template is None and third.proven is None
