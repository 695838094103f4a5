"""detector.model.bulk: the fast constructors make the same frozen records as __init__."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass

import pytest

from detector.model import PlanVariant, Side, TimingComparison, TimingStats, Verdict
from detector.model.bulk import builder


def test_builder_makes_the_record_init_makes() -> None:
    stats = builder(TimingStats)(10, 1.5, 2.0, 2.5, 1.0, 3.0)
    assert stats == TimingStats(10, 1.5, 2.0, 2.5, 1.0, 3.0)
    assert type(stats) is TimingStats and repr(stats).startswith("TimingStats(n=10,")
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.n = 11  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(stats)) == stats
    assert dataclasses.replace(stats, n=11).n == 11

    timing = TimingComparison(Verdict.UNCHANGED, 1.0, 0.9, 1.1, 0.5, 0.1, None, "r")
    assert builder(TimingComparison)(*dataclasses.astuple(timing)) == timing
    variant = PlanVariant("fp", "Seq Scan", None, 3, 1.0, 2.0, None)  # type: ignore[arg-type]
    side = builder(Side)("pg15", 150018, {}, (variant,), (1.0,), stats, None, (), (), (), {}, None)
    assert side == Side("pg15", 150018, {}, (variant,), (1.0,), stats)
    assert side.dominant is variant


def test_builder_refuses_what_it_would_get_wrong_and_fills_slots() -> None:
    @dataclass(frozen=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            assert self.value >= 0

    @dataclass(frozen=True, slots=True)
    class Slotted:
        value: int

    for cls in (Checked, int):
        with pytest.raises(TypeError):
            builder(cls)
    assert builder(Slotted)(3) == Slotted(3)
    with pytest.raises(TypeError):
        builder(TimingStats)(10, 1.5)  # every field, positionally
