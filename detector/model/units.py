"""THE number formats: durations, ratios, server versions. Every report and rule prints through these."""

from __future__ import annotations

import math


def fmt_ms(value: float | None) -> str:
    """A duration in ms with three significant digits, never in exponent form: 0.0621, 1.41,
    18.1, 1234; `-` when unknown. Tables put the unit in the header."""
    if value is None or math.isnan(value):
        return "-"
    if value == 0:
        return "0"
    digits = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{min(digits, 4)}f}"


def fmt_duration(value: float | None) -> str:
    """`fmt_ms` with its unit, for sentences: `1.41 ms`; `?` when unknown."""
    return "?" if value is None else f"{fmt_ms(value)} ms"


def fmt_ratio(value: float) -> str:
    """Two decimals, three when that would print 1.00 for a ratio that is not exactly 1."""
    text = f"{value:.2f}"
    return f"{value:.3f}" if text == "1.00" and value != 1.0 else text


def fmt_version(num: int | None) -> str:
    """A server_version_num as PostgreSQL writes it: `150018` -> `15.18`, `90624` -> `9.6.24`,
    unknown -> `?`."""
    if num is None:
        return "?"
    if num >= 100000:
        return f"{num // 10000}.{num % 10000}"
    return f"{num // 10000}.{num // 100 % 100}.{num % 100}"


def version_num(version: str) -> int:
    """`15.18` -> 150018, `18` -> 180000, `9.6.24` -> 90624: the inverse of `fmt_version`."""
    major, minor, patch = ([int(part) for part in version.split(".")] + [0, 0])[:3]
    return major * 10000 + (minor if major >= 10 else minor * 100 + patch)


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 query`, `2 queries`: the count and its noun in the right number."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def fmt_count(value: float | None) -> str:
    """Rows, loops and blocks: `2,000`, `1,234,567`, `2.5` (PG 18 fractional rows), `0.33`;
    `?` when unknown."""
    if value is None:
        return "?"
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:,.1f}" if abs(value) >= 1 else f"{value:.2g}"
