"""TupleBatch: a run of consecutive tuples in columnar form, and its wire encoding.

A batch covers keys first .. first+len-1, where the key is Nu's link position for input tuples and the
output sequence number for outputs. Columns rather than one object per tuple: every hop handles thousands
of tuples per frame, and per-tuple Python objects would cap throughput long before the network does.

Wire encoding (little-endian), shared by the primary and backup links:
    b"LSB1" | flags u8 | first u64 | n u32 | streams u16*n | seqs u64*n | lens u32*n | [sources u64*n] | payloads
"""

from __future__ import annotations

import struct
import sys
from array import array
from dataclasses import dataclass, field

from .seq import CorruptBatch

_MAGIC = b"LSB1"
_HEADER = struct.Struct("<4sBQI")
_HAS_SOURCES = 1
_BIG_ENDIAN = sys.byteorder == "big"


@dataclass(slots=True)
class TupleBatch:
    """Tuples with keys first, first+1, ...; `sources` is set on outputs: the input position of each."""

    first: int
    streams: list[int] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)
    sources: list[int] | None = None

    def __len__(self) -> int:
        return len(self.payloads)

    @property
    def last(self) -> int:
        """Key of the last tuple (first - 1 when empty)."""
        return self.first + len(self.payloads) - 1

    @property
    def end(self) -> int:
        """Key one past the last tuple."""
        return self.first + len(self.payloads)

    def slice(self, start_key: int, stop_key: int) -> TupleBatch:
        """Tuples whose keys lie in [start_key, stop_key)."""
        lo = max(start_key, self.first) - self.first
        hi = min(stop_key, self.end) - self.first
        hi = max(hi, lo)
        return TupleBatch(
            first=self.first + lo,
            streams=self.streams[lo:hi],
            seqs=self.seqs[lo:hi],
            payloads=self.payloads[lo:hi],
            sources=None if self.sources is None else self.sources[lo:hi],
        )

    def select(self, indices: list[int], first: int) -> TupleBatch:
        """Outputs made of the tuples at `indices`, renumbered from `first`, remembering their positions."""
        return TupleBatch(
            first=first,
            streams=[self.streams[i] for i in indices],
            seqs=[self.seqs[i] for i in indices],
            payloads=[self.payloads[i] for i in indices],
            sources=[self.first + i for i in indices],
        )

    def payload_bytes(self) -> int:
        return sum(map(len, self.payloads))

    @staticmethod
    def concat(batches: list[TupleBatch]) -> TupleBatch:
        """Join consecutive batches; their keys must follow on."""
        if not batches:
            raise ValueError("concat of no batches")
        if len(batches) == 1:
            return batches[0]
        out = TupleBatch(first=batches[0].first, sources=[] if batches[0].sources is not None else None)
        for b in batches:
            if b.first != out.end:
                raise ValueError(f"batches do not follow on: {out.end} then {b.first}")
            out.streams.extend(b.streams)
            out.seqs.extend(b.seqs)
            out.payloads.extend(b.payloads)
            if out.sources is not None:
                if b.sources is None:
                    raise ValueError("cannot join outputs with inputs")
                out.sources.extend(b.sources)
        return out


def _col(typecode: str, values: list[int]) -> bytes:
    a = array(typecode, values)
    if _BIG_ENDIAN:
        a.byteswap()
    return a.tobytes()


def _uncol(typecode: str, data: memoryview) -> list[int]:
    a = array(typecode)
    a.frombytes(data)
    if _BIG_ENDIAN:
        a.byteswap()
    return a.tolist()


def encode(batch: TupleBatch) -> bytes:
    n = len(batch)
    flags = _HAS_SOURCES if batch.sources is not None else 0
    parts = [
        _HEADER.pack(_MAGIC, flags, batch.first, n),
        _col("H", batch.streams),
        _col("Q", batch.seqs),
        _col("I", [len(p) for p in batch.payloads]),
    ]
    if batch.sources is not None:
        parts.append(_col("Q", batch.sources))
    parts.extend(batch.payloads)
    return b"".join(parts)


def decode(data: bytes, *, what: str = "batch") -> TupleBatch:
    """Decode `encode`'s bytes; anything inconsistent raises CorruptBatch naming `what`."""
    view = memoryview(data)
    if len(view) < _HEADER.size:
        raise CorruptBatch(f"{what}: {len(view)} bytes is shorter than the {_HEADER.size}-byte header")
    magic, flags, first, n = _HEADER.unpack_from(view)
    if magic != _MAGIC:
        raise CorruptBatch(f"{what}: bad magic {magic!r}; expected {_MAGIC!r}")
    off = _HEADER.size
    per = 2 + 8 + 4 + (8 if flags & _HAS_SOURCES else 0)
    if off + per * n > len(view):
        raise CorruptBatch(f"{what}: header says {n} tuples but only {len(view)} bytes arrived")
    streams = _uncol("H", view[off : off + 2 * n])
    off += 2 * n
    seqs = _uncol("Q", view[off : off + 8 * n])
    off += 8 * n
    lens = _uncol("I", view[off : off + 4 * n])
    off += 4 * n
    sources = None
    if flags & _HAS_SOURCES:
        sources = _uncol("Q", view[off : off + 8 * n])
        off += 8 * n
    if off + sum(lens) != len(view):
        raise CorruptBatch(
            f"{what}: payload lengths add up to {sum(lens)} but {len(view) - off} payload bytes arrived"
        )
    payloads = []
    for ln in lens:
        payloads.append(bytes(view[off : off + ln]))
        off += ln
    return TupleBatch(first=first, streams=streams, seqs=seqs, payloads=payloads, sources=sources)


def decode_frame(data: bytes, first: int, count: int, *, what: str) -> TupleBatch:
    """Decode a frame's tuples and check them against what its header says (first key and count): the
    check every receiving link applies, so a frame whose bytes disagree with its header is refused whole."""
    batch = decode(data, what=what)
    if batch.first != first or len(batch) != count:
        raise CorruptBatch(f"{what} says {count} tuples from {first}; its bytes hold {len(batch)} from {batch.first}")
    return batch
