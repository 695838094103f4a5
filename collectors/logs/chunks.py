"""Where the parallel ingest cuts a log into chunks: after the last entry boundary (a line
that does not continue the previous entry) in about `size` bytes, looked for in the chunk's
last `tail` bytes first. A plain file's chunks are found by reading just those ends (the
workers read the chunks themselves); a gzip stream is read whole, its chunks kept as bytes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from functools import partial
from typing import BinaryIO

from collectors.logs.formats import BOM, MAX_ENTRY, Position


class ChunkCuts:
    """(where it starts, chunk) for each chunk of a file from `position`: its length (`plain`
    file) or its bytes; lastly (where the rest starts, None): the sequential reader's part."""

    def __init__(
        self,
        stream: BinaryIO,
        position: Position,
        boundary: re.Pattern[bytes],
        plain: bool,
        size: int,
        tail: int,
    ) -> None:
        self.stream = stream
        self.position = position
        self.boundary = boundary
        self.plain = plain
        self.size = size
        self.tail = tail
        self.rest: bytes | None = None  # a gzip stream's bytes after the last chunk

    def __iter__(self) -> Iterator[tuple[int, bytes | int | None]]:
        """(where it starts, chunk) for each chunk: a plain file's chunks as their length (the
        worker reads them), a gzip stream's as bytes; lastly (where the rest starts, None)."""
        if not self.plain:
            yield from self._stream_chunks()
            return
        handle = self.stream.fileno()
        offset = self.position.offset
        if offset == 0 and os.pread(handle, len(BOM), 0) == BOM:
            offset = len(BOM)
        size = self.size
        while True:
            cut = last_boundary(
                partial(_pread, handle), offset, offset + size, self.boundary, self.tail
            )
            if cut is not None:
                yield offset, cut - offset
                offset, size = cut, self.size
            elif offset + size >= os.fstat(handle).st_size or size > MAX_ENTRY:
                yield offset, None  # the sequential reader takes over
                return
            else:
                size += self.size

    def _stream_chunks(self) -> Iterator[tuple[int, bytes | None]]:
        self.stream.seek(self.position.offset)
        offset = self.position.offset
        buffer = b""
        while True:
            data = self.stream.read(self.size)
            if offset == 0 and data.startswith(BOM):
                data, offset = data[len(BOM) :], len(BOM)
            buffer = buffer + data if buffer else data
            read = partial(_slice, memoryview(buffer))
            cut = last_boundary(read, 0, len(buffer), self.boundary, self.tail)
            if not data or cut is None:
                if not data or len(buffer) > MAX_ENTRY:  # the sequential reader takes over
                    self.rest = buffer if not data else b""
                    yield offset, None
                    return
                continue
            chunk, buffer = buffer[:cut], buffer[cut:]
            yield offset, chunk
            offset += len(chunk)


def last_boundary(
    read: Callable[[int, int], bytes | memoryview],
    start: int,
    end: int,
    boundary: re.Pattern[bytes],
    window: int,
) -> int | None:
    """Where the last complete entry of the bytes [start, end) ends (just after a boundary
    newline that is not their last byte, so the next line's first bytes are known); `read`
    gives the bytes of a range (fewer at the end of the file)."""
    while True:
        low = max(start, end - window)
        piece = read(low, end)
        found = None
        for match in boundary.finditer(piece):
            if match.start() + 1 < len(piece):  # a newline at the very end decides nothing
                found = low + match.start() + 1
        if found is not None or low == start:
            return found
        window *= 4


def _pread(handle: int, low: int, high: int) -> bytes:
    return os.pread(handle, high - low, low)


def _slice(view: memoryview, low: int, high: int) -> memoryview:
    return view[low:high]
