"""False discovery control across the queries of one comparison (Benjamini-Hochberg).

One comparison asks the same question of every query: at alpha = 0.05 each, a thousand
unchanged queries would give about fifty "significant" answers by chance. The q-value of a
query is the smallest false discovery rate at which its verdict stands; a regression or
improvement stands only when its q-value is below alpha.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from operator import attrgetter

import numpy as np
from scipy import stats as sps

from detector.engine.stats import new_timing_comparison
from detector.model.comparison import TimingComparison, Verdict


def control_false_discoveries(
    results: Sequence[TimingComparison], alpha: float = 0.05
) -> list[TimingComparison]:
    """Benjamini-Hochberg across the queries of one comparison: each result gets its q-value
    (over every result with a p-value), and a regression or improvement whose q-value is not
    below alpha becomes inconclusive. The expected share of false alarms among the verdicts
    left standing is then at most alpha."""
    return _controlled(results, alpha, own=False)


def control_own_false_discoveries(
    results: Sequence[TimingComparison], alpha: float = 0.05
) -> list[TimingComparison]:
    """`control_false_discoveries` of results made for this call and held nowhere else: their
    q-values are filled in, not copied (a million copies in a large comparison)."""
    return _controlled(results, alpha, own=True)


def _controlled(
    results: Sequence[TimingComparison], alpha: float, own: bool
) -> list[TimingComparison]:
    p_values = list(map(_P_VALUE, results))
    tested = [i for i, p in enumerate(p_values) if p is not None]
    if not tested:
        return list(results)
    q = sps.false_discovery_control([p_values[i] for i in tested], method="bh")
    q_values = np.asarray(q, np.float64).tolist()
    out = list(results)
    every = len(tested) == len(out)  # then in order: tested ascends
    out_tested = out if every else list(map(out.__getitem__, tested))
    if own:  # frozen to everyone but its maker: set through the slot, as `builder` does
        deque(map(_SET_Q_VALUE, out_tested, q_values), maxlen=0)
    else:
        out_tested = list(map(_with_q_value, out_tested, q_values))
    moved = (Verdict.REGRESSED, Verdict.IMPROVED)
    for k in [k for k, result in enumerate(out_tested) if result.verdict in moved]:
        result, q_value = out_tested[k], q_values[k]
        if q_value >= alpha:
            out_tested[k] = replace(
                result,
                verdict=Verdict.INCONCLUSIVE,
                reason=f"p={result.p_value:.2g} alone, but q={q_value:.2g} across {len(tested)} "
                "queries (false discovery control)",
            )
    if not every:
        for i, result in zip(tested, out_tested, strict=True):
            out[i] = result
    return out_tested if every else out


def _with_q_value(result: TimingComparison, q_value: float) -> TimingComparison:
    """`replace(result, q_value=q_value)` without `__init__`: a million of them per comparison."""
    values = list(_TIMING_FIELDS(result))
    values[_Q_VALUE] = q_value
    return new_timing_comparison(*values)


_SET_Q_VALUE: Callable[[TimingComparison, float], None] = vars(TimingComparison)["q_value"].__set__
_TIMING_NAMES = [f.name for f in fields(TimingComparison)]
_TIMING_FIELDS = attrgetter(*_TIMING_NAMES)
_Q_VALUE = _TIMING_NAMES.index("q_value")
_P_VALUE = attrgetter("p_value")
