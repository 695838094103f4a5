"""Parsed chunks of the parallel ingest stored several to a transaction (`grouped`): fewer,
larger commits and statements in the ingest process, which inserts while the workers parse.
A group is stored as if its chunks had been one batch: the ledger row after it is the one
after its last chunk, and counts are the sums."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from collectors.logs.batches import ParsedBatch
from collectors.logs.formats import Batch
from detector.model.log_rows import LogBatchColumns

GROUP_CHUNKS = 4  # parsed chunks stored in one transaction


def grouped(
    pairs: Iterator[tuple[Batch, ParsedBatch | None]], size: int = GROUP_CHUNKS
) -> Iterator[tuple[Batch, ParsedBatch | None]]:
    """Consecutive parsed chunks merged by `size` (each group is stored as one batch, as if
    its chunks had been one); batches read sequentially pass as they are, in order."""
    held: list[tuple[Batch, ParsedBatch]] = []
    for batch, parsed in pairs:
        if parsed is not None:
            held.append((batch, parsed))
            if len(held) < size:
                continue
        if held:
            yield _merged(held)
            held = []
        if parsed is None:
            yield batch, None
    if held:
        yield _merged(held)


def _merged(held: list[tuple[Batch, ParsedBatch]]) -> tuple[Batch, ParsedBatch]:
    if len(held) == 1:
        return held[0]
    batches = [batch for batch, _ in held]
    parts = [parsed for _, parsed in held]
    batch = Batch(
        entries=[],
        problems=[problem for b in batches for problem in b.problems],
        checkpoint=batches[-1].checkpoint,  # the ledger after the last, as stored one by one
        messages=sum(b.messages for b in batches),
        incomplete=[problem for b in batches for problem in b.incomplete],
        unknown_zones=frozenset().union(*(b.unknown_zones for b in batches)),
        events=[event for b in batches for event in b.events],
    )
    parsed = ParsedBatch()
    for part in parts:
        for fingerprint, shape in part.shapes.items():
            parsed.shapes.setdefault(fingerprint, shape)
        for key, query in part.queries.items():
            parsed.queries.setdefault(key, query)
        parsed.problems.extend(part.problems)
        parsed.ambiguous.extend(part.ambiguous)
    parsed.columns = _concatenated([p.columns for p in parts if p.columns and p.columns.size])
    return batch, parsed


def _concatenated(columns: list[LogBatchColumns]) -> LogBatchColumns:
    if not columns:
        return LogBatchColumns({}, {}, 0)

    def joined(arrays: list[Any]) -> Any:
        if len({array.dtype for array in arrays}) > 1:  # a null in some: objects, as built
            arrays = [array.astype(object) for array in arrays]
        return np.concatenate(arrays)

    observations = {
        k: joined([c.observations[k] for c in columns]) for k in columns[0].observations
    }
    entries = {k: joined([c.entries[k] for c in columns]) for k in columns[0].entries}
    return LogBatchColumns(observations, entries, sum(c.size for c in columns))
