"""TupleBatch: a run of consecutive tuples in columnar form, and its wire encoding.

A batch covers keys first .. first+len-1, where the key is Nu's link position for input tuples and the
output sequence number for outputs. Columns rather than one object per tuple: every hop handles thousands
of tuples per frame, and per-tuple Python objects capped the pipeline near 0.1 M tuples/s.

Layout: the fixed-width columns (stream ids, seqs, and for outputs the input position of each) are numpy
arrays, which are Arrow's own fixed-width buffers (zero-copy either way); the payloads are one Arrow
BinaryArray: an offsets buffer and one data buffer. Slicing is a view, selecting is one `take`, joining
one concatenation per column: no Python loop over tuples anywhere on the data path.

Wire encoding (little-endian), shared by the primary, backup and output links:
    b"LSB1" | flags u8 | first u64 | n u32 | streams u16*n | seqs u64*n | lens u32*n | [sources u64*n] | payloads
Decoding is a handful of zero-copy views over the received bytes plus one cumulative sum.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from .errors import CorruptBatch
from .seq import streams_present

_MAGIC = b"LSB1"
_HEADER = struct.Struct("<4sBQI")
_HAS_SOURCES = 1
_SEQ_DELTAS = 2  # in a run only: each seq is the step from the stream's previous tuple in the run
_EMPTY_PAYLOADS = pa.array([], pa.binary())

STREAM_DTYPE = np.dtype("<u2")
KEY_DTYPE = np.dtype("<i8")


def payload_array(payloads: Any) -> pa.BinaryArray:
    """An Arrow binary array from a list of bytes or from an Arrow (large) binary array."""
    if isinstance(payloads, pa.ChunkedArray):
        payloads = payloads.combine_chunks()
    if isinstance(payloads, pa.Array):
        if payloads.type != pa.binary():
            payloads = payloads.cast(pa.binary())
        return payloads
    if not len(payloads):
        return _EMPTY_PAYLOADS
    return pa.array(payloads, pa.binary())


def offsets_of(arr: pa.BinaryArray) -> np.ndarray:
    """The n+1 offsets of a (possibly sliced) binary array into its data buffer, as int32 (a view)."""
    buf = arr.buffers()[1]
    if buf is None:  # an empty array may have no buffers
        return np.zeros(1, np.int32)
    return np.frombuffer(buf, np.int32, count=len(arr) + 1, offset=4 * arr.offset)


def binary_from(offsets: np.ndarray, data: Any) -> pa.BinaryArray:
    """A binary array over `data` (any buffer) cut at `offsets` (int32, n+1, starting anywhere)."""
    return pa.Array.from_buffers(pa.binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _column(values: Any, dtype: np.dtype) -> np.ndarray:
    a = np.asarray(values)
    if a.dtype != dtype:
        a = a.astype(dtype)
    return a


class TupleBatch:
    """Tuples with keys first, first+1, ...; `sources` is set on outputs: the input position of each.

    The columns are read-only views (they may share buffers with a frame or with other batches): build a
    new batch rather than changing one. Lists are accepted by the constructor for tests and cold paths.
    """

    __slots__ = ("first", "streams", "seqs", "payloads", "sources")

    def __init__(self, first: int, streams: Any = (), seqs: Any = (), payloads: Any = (),
                 sources: Any = None) -> None:
        self.first = int(first)
        self.streams: np.ndarray = _column(streams, STREAM_DTYPE)
        self.seqs: np.ndarray = _column(seqs, KEY_DTYPE)
        self.payloads: pa.BinaryArray = payload_array(payloads)
        self.sources: np.ndarray | None = None if sources is None else _column(sources, KEY_DTYPE)
        n = len(self.streams)
        if len(self.seqs) != n or len(self.payloads) != n or (self.sources is not None and len(self.sources) != n):
            raise ValueError(f"columns of different lengths: streams {n}, seqs {len(self.seqs)}, "
                             f"payloads {len(self.payloads)}, sources "
                             f"{None if self.sources is None else len(self.sources)}")

    @classmethod
    def of_columns(cls, first: int, streams: np.ndarray, seqs: np.ndarray, payloads: pa.BinaryArray,
                   sources: np.ndarray | None) -> TupleBatch:
        """Constructor for columns already of the right types (the data path: no checks, no copies)."""
        b = object.__new__(cls)
        b.first, b.streams, b.seqs, b.payloads, b.sources = first, streams, seqs, payloads, sources
        return b

    def __len__(self) -> int:
        return len(self.streams)

    def __repr__(self) -> str:
        return f"TupleBatch(first={self.first}, n={len(self)}, outputs={self.sources is not None})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TupleBatch):
            return NotImplemented
        return (self.first == other.first and np.array_equal(self.streams, other.streams)
                and np.array_equal(self.seqs, other.seqs) and self.payloads.equals(other.payloads)
                and ((self.sources is None and other.sources is None) or (
                    self.sources is not None and other.sources is not None
                    and np.array_equal(self.sources, other.sources))))

    __hash__ = None  # type: ignore[assignment]

    @property
    def last(self) -> int:
        """Key of the last tuple (first - 1 when empty)."""
        return self.first + len(self.streams) - 1

    @property
    def end(self) -> int:
        """Key one past the last tuple."""
        return self.first + len(self.streams)

    def payload(self, i: int) -> bytes:
        """The payload of the i-th tuple (cold paths: dead letters, control records, logs)."""
        return self.payloads[i].as_py()

    def payload_list(self) -> list[bytes]:
        return self.payloads.to_pylist()

    def slice(self, start_key: int, stop_key: int) -> TupleBatch:
        """Tuples whose keys lie in [start_key, stop_key): views, nothing copied."""
        lo = max(start_key, self.first) - self.first
        hi = min(stop_key, self.end) - self.first
        hi = max(hi, lo)
        return TupleBatch.of_columns(self.first + lo, self.streams[lo:hi], self.seqs[lo:hi],
                                     self.payloads.slice(lo, hi - lo),
                                     None if self.sources is None else self.sources[lo:hi])

    def select(self, indices: Any, first: int) -> TupleBatch:
        """Outputs made of the tuples at `indices`, renumbered from `first`, remembering their positions."""
        idx = np.asarray(indices, dtype=np.int64)
        return TupleBatch.of_columns(first, self.streams[idx], self.seqs[idx],
                                     self.payloads.take(pa.array(idx)) if len(idx) else _EMPTY_PAYLOADS,
                                     idx + self.first)

    def max_payload_bytes(self) -> int:
        """Size of the largest payload (0 when empty)."""
        return int(np.diff(offsets_of(self.payloads)).max()) if len(self.streams) else 0

    def payload_bytes(self) -> int:
        off = offsets_of(self.payloads)
        return int(off[-1]) - int(off[0])

    @staticmethod
    def concat(batches: Sequence[TupleBatch]) -> TupleBatch:
        """Join consecutive batches; their keys must follow on."""
        if not batches:
            raise ValueError("concat of no batches")
        if len(batches) == 1:
            return batches[0]
        outputs = batches[0].sources is not None
        end = batches[0].first
        for b in batches:
            if b.first != end:
                raise ValueError(f"batches do not follow on: {end} then {b.first}")
            if (b.sources is not None) != outputs:
                raise ValueError("cannot join outputs with inputs")
            end = b.end
        return TupleBatch.of_columns(
            batches[0].first,
            np.concatenate([b.streams for b in batches]),
            np.concatenate([b.seqs for b in batches]),
            pa.concat_arrays([b.payloads for b in batches]),
            np.concatenate([b.sources for b in batches]) if outputs else None,  # type: ignore[misc]
        )


def encode(batch: TupleBatch) -> bytes:
    n = len(batch)
    flags = _HAS_SOURCES if batch.sources is not None else 0
    off = offsets_of(batch.payloads)
    parts: list[Any] = [
        _HEADER.pack(_MAGIC, flags, batch.first, n),
        batch.streams.astype(STREAM_DTYPE, copy=False).tobytes(),
        batch.seqs.astype("<u8").tobytes(),
        np.diff(off).astype("<u4").tobytes(),
    ]
    if batch.sources is not None:
        parts.append(batch.sources.astype("<u8").tobytes())
    if n:
        data = batch.payloads.buffers()[2]
        if data is not None:
            parts.append(memoryview(data)[int(off[0]):int(off[-1])])
    return b"".join(parts)


def seq_steps(streams: np.ndarray, seqs: np.ndarray) -> np.ndarray:
    """Each seq as the step from the previous tuple of its stream (the first of each stream as it is):
    mostly 1, which compresses to almost nothing where the seqs themselves cost bytes per tuple."""
    out = seqs.copy()
    for sid in streams_present(streams):
        at = np.flatnonzero(streams == sid)
        out[at[1:]] = np.diff(seqs[at])
    return out


def seq_sums(streams: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """The inverse of `seq_steps`."""
    out = steps.copy()
    for sid in streams_present(streams):
        at = np.flatnonzero(streams == sid)
        out[at] = np.cumsum(steps[at])
    return out


def _run_dtype(size: int) -> np.dtype:
    """The fixed part of the encoding of `size` input tuples (header and columns), as one packed record."""
    return np.dtype([("magic", "S4"), ("flags", "u1"), ("first", "<u8"), ("n", "<u4"),
                     ("streams", "<u2", (size,)), ("seqs", "<u8", (size,)), ("lens", "<u4", (size,))])


_HEAD_FIXED = _run_dtype(0).itemsize  # bytes of header, then per tuple its stream, seq and length
_PER_TUPLE = _run_dtype(1).itemsize - _HEAD_FIXED


def run_head_bytes(count: int) -> int:
    """The fewest bytes that encode `count` input tuples (`encode_runs`): their header and columns, with
    every payload empty. Arithmetic, not `_run_dtype`: a forged count past a C int is still just a number."""
    return _HEAD_FIXED + _PER_TUPLE * count


def common_count(counts: Sequence[int]) -> int | None:
    """The count every batch of a run holds (what Nu sends: Bsize), or None when they differ or there are
    none. At C speed on a list of thousands, with no array or set built."""
    if counts and counts.count(counts[0]) == len(counts):
        return counts[0]
    return None


def short_batches(counts: list[int], raw_sizes: list[int]) -> int | None:
    """The index of the first batch whose declared raw size cannot hold the encoding of its count of
    tuples, or None. Checked where batches are kept undecoded: a size list that is garbled but still adds
    up would otherwise surface only at a takeover, when they are decoded."""
    if not counts:
        return None
    count = common_count(counts)
    if count is not None:
        least = run_head_bytes(count)
        return None if min(raw_sizes) >= least else next(i for i, r in enumerate(raw_sizes) if r < least)
    least_each = run_head_bytes(np.asarray(counts, dtype=np.int64))
    short = np.flatnonzero(np.asarray(raw_sizes, dtype=np.int64) < least_each)
    return int(short[0]) if len(short) else None


@dataclass(frozen=True, slots=True)
class RunLayout:
    """The encodings of `count` whole batches of a run, before they are joined: batch r is
    heads[r * head_size:(r + 1) * head_size] followed by data[cuts[r] - cuts[0]:cuts[r + 1] - cuts[0]].
    A compressor that takes the two parts of each batch in turn (native.RunCompressor) needs no join."""

    heads: memoryview
    head_size: int
    data: memoryview
    cuts: np.ndarray  # int64, count + 1 offsets of the batches' payloads (data starts at cuts[0])

    @property
    def count(self) -> int:
        return len(self.cuts) - 1

    def raw_sizes(self) -> list[int]:
        return (np.diff(self.cuts) + self.head_size).tolist()

    def joined(self) -> list[bytes]:
        heads, fs, data = self.heads, self.head_size, self.data
        cuts = (self.cuts - self.cuts[0]).tolist()
        join = b"".join
        return [join((heads[r * fs:(r + 1) * fs], data[cuts[r]:cuts[r + 1]])) for r in range(self.count)]


def layout_runs(batch: TupleBatch, size: int, *, seq_deltas: bool = False) -> RunLayout:
    """The whole batches of `encode_runs(batch, size)` as a RunLayout (len(batch) // size of them): the
    fixed parts of every batch are laid out by one structured array, the payloads stay where they are."""
    return _layout(_as_steps(batch) if seq_deltas else _inputs(batch), size, seq_deltas)


def _inputs(batch: TupleBatch) -> TupleBatch:
    if batch.sources is not None:
        raise ValueError("encode_runs cuts input tuples, not outputs")
    return batch


def _as_steps(batch: TupleBatch) -> TupleBatch:
    """`batch` with its seqs written as steps per stream (flag _SEQ_DELTAS)."""
    batch = _inputs(batch)
    return TupleBatch.of_columns(batch.first, batch.streams, seq_steps(batch.streams, batch.seqs), batch.payloads, None)


def _layout(batch: TupleBatch, size: int, seq_deltas: bool) -> RunLayout:
    full = len(batch) // size
    dt = _run_dtype(size)
    m = full * size
    off = offsets_of(batch.payloads)
    fixed = np.empty(full, dt)
    fixed["magic"] = _MAGIC
    fixed["flags"] = _SEQ_DELTAS if seq_deltas else 0
    fixed["first"] = batch.first + np.arange(full, dtype=np.int64) * size
    fixed["n"] = size
    fixed["streams"] = batch.streams[:m].reshape(full, size)
    fixed["seqs"] = batch.seqs[:m].reshape(full, size)
    fixed["lens"] = np.diff(off[: m + 1]).reshape(full, size)
    cuts = off[: m + 1 : size].astype(np.int64)
    data = memoryview(batch.payloads.buffers()[2] or b"")[int(cuts[0]):int(cuts[-1])] if full else memoryview(b"")
    return RunLayout(memoryview(fixed.tobytes()), dt.itemsize, data, cuts)


def encode_runs(batch: TupleBatch, size: int, *, seq_deltas: bool = False) -> list[bytes]:
    """`encode` of batch[0:size], batch[size:2*size], ... (inputs; the last one may be shorter): the whole
    batches through `layout_runs`, so the per-batch Python is two slices and a join (Nu cuts a frame's worth
    of Bsize batches at once). With `seq_deltas` the seqs are written as steps per stream across the whole
    run (flag _SEQ_DELTAS): the batches then decode only as that run, in order (`decode_runs`), as the
    backup's do."""
    batch = _as_steps(batch) if seq_deltas else _inputs(batch)
    full, rest = divmod(len(batch), size)
    out = _layout(batch, size, seq_deltas).joined() if full else []
    if rest:
        tail = encode(batch.slice(batch.first + full * size, batch.end))
        out.append(tail[:4] + bytes([_SEQ_DELTAS]) + tail[5:] if seq_deltas else tail)
    return out


def decode_runs(data: bytes | memoryview, first: int, size: int, raw_sizes: Sequence[int], *,
                what: str = "batches") -> TupleBatch:
    """The inverse of `encode_runs` for whole runs: `data` holds len(raw_sizes) encodings of `size` input
    tuples each, back to back (raw_sizes[i] bytes each), from key `first` on; returns them joined. Every
    header is checked (magic, first key, count, payload bytes against raw_sizes) in one pass over arrays;
    anything inconsistent raises CorruptBatch naming `what`."""
    k = len(raw_sizes)
    view = memoryview(data)
    if not k:
        return TupleBatch(first)
    fs = run_head_bytes(size)
    sizes = np.asarray(raw_sizes, dtype=np.int64)
    if int(sizes.sum()) != len(view) or (sizes < fs).any():
        raise CorruptBatch(f"{what}: {k} batches of {size} tuples in {len(view)} bytes do not fit their "
                           f"declared sizes ({int(sizes.sum())} bytes)")
    dt = _run_dtype(size)  # size is now bounded by the bytes at hand (a forged one may not fit a C int)
    heads, payload = _split_heads(view, sizes, fs)
    fixed = np.frombuffer(heads, dt, count=k)
    expect = first + np.arange(k, dtype=np.int64) * size
    flags = int(fixed["flags"][0])
    bad = ((fixed["magic"] != _MAGIC) | (fixed["flags"] != flags) | (flags & ~_SEQ_DELTAS != 0) | (fixed["n"] != size)
           | (fixed["first"].astype(np.int64) != expect)
           | (fixed["lens"].sum(axis=1, dtype=np.int64) != sizes - fs))
    if bad.any():
        i = int(np.argmax(bad))
        raise CorruptBatch(f"{what}: batch {i} (from {int(expect[i])}) does not hold {size} tuples from "
                           f"{int(expect[i])} in {int(sizes[i])} bytes")
    lens = fixed["lens"].reshape(-1)
    offsets = np.zeros(k * size + 1, np.int32)
    np.cumsum(lens, out=offsets[1:], dtype=np.int32)
    streams = fixed["streams"].reshape(-1)
    seqs = fixed["seqs"].reshape(-1).view(KEY_DTYPE)
    if flags & _SEQ_DELTAS:
        seqs = seq_sums(streams, seqs)
    return TupleBatch.of_columns(first, streams, seqs, binary_from(offsets, payload), None)


def _split_heads(view: memoryview, sizes: np.ndarray, fs: int) -> tuple[memoryview, np.ndarray]:
    """Batches laid back to back (sizes[i] bytes each, a head of `fs` bytes then payload bytes) as all heads
    joined and all payloads joined. The bytes are read as one Arrow array of 2k values, head, payload, head,
    ..., and one `take` of the heads then the payloads lays them out in that order: one Arrow call whatever
    the number of batches, where a slice and a join per batch costs a Python step each (and a 2-D gather of
    the heads needs a mask over every byte)."""
    k = len(sizes)
    offsets = np.empty(2 * k + 1, np.int64)
    offsets[0] = 0
    np.cumsum(sizes, out=offsets[2::2])
    offsets[1::2] = offsets[0:-1:2] + fs
    both = pa.Array.from_buffers(pa.large_binary(), 2 * k, [None, pa.py_buffer(offsets), pa.py_buffer(view)])
    order = np.concatenate([np.arange(0, 2 * k, 2, dtype=np.int64), np.arange(1, 2 * k, 2, dtype=np.int64)])
    split = memoryview(both.take(pa.array(order)).buffers()[2])[: int(offsets[-1])]
    return split[: k * fs], np.frombuffer(split[k * fs:], np.uint8)


def decode(data: bytes | memoryview, *, what: str = "batch") -> TupleBatch:
    """Decode `encode`'s bytes (views into `data`, which must stay unchanged); anything inconsistent raises
    CorruptBatch naming `what`."""
    view = memoryview(data)
    if len(view) < _HEADER.size:
        raise CorruptBatch(f"{what}: {len(view)} bytes is shorter than the {_HEADER.size}-byte header")
    magic, flags, first, n = _HEADER.unpack_from(view)
    if magic != _MAGIC:
        raise CorruptBatch(f"{what}: bad magic {magic!r}; expected {_MAGIC!r}")
    if flags & _SEQ_DELTAS:
        raise CorruptBatch(f"{what}: seqs written as steps decode only with the rest of their run")
    off = _HEADER.size
    per = 2 + 8 + 4 + (8 if flags & _HAS_SOURCES else 0)
    if off + per * n > len(view):
        raise CorruptBatch(f"{what}: header says {n} tuples but only {len(view)} bytes arrived")
    streams = np.frombuffer(view, STREAM_DTYPE, n, off)
    off += 2 * n
    seqs = np.frombuffer(view, "<u8", n, off).view(KEY_DTYPE)
    off += 8 * n
    lens = np.frombuffer(view, "<u4", n, off)
    off += 4 * n
    sources = None
    if flags & _HAS_SOURCES:
        sources = np.frombuffer(view, "<u8", n, off).view(KEY_DTYPE)
        off += 8 * n
    total = int(lens.sum(dtype=np.int64))
    if off + total != len(view):
        raise CorruptBatch(
            f"{what}: payload lengths add up to {total} but {len(view) - off} payload bytes arrived"
        )
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lens, out=offsets[1:], dtype=np.int32)
    payloads = binary_from(offsets, view[off:]) if n else _EMPTY_PAYLOADS
    return TupleBatch.of_columns(first, streams, seqs, payloads, sources)


def decode_counted(data: bytes | memoryview, first: int, counts: Sequence[int], raw_sizes: Sequence[int], *,
                   what: str) -> TupleBatch:
    """A backup run's decoded bytes as one batch from key `first`: batch i holds counts[i] tuples in
    raw_sizes[i] bytes. Batches of one size (what Nu sends) in one pass (`decode_runs`), others one at a
    time."""
    common = common_count(counts)
    if common is not None:
        return decode_runs(data, first, common, raw_sizes, what=what)
    parts, off = [], 0
    for count, size in zip(counts, raw_sizes, strict=True):
        parts.append(decode_frame(data[off:off + size], first, count, what=what))
        off += size
        first += count
    return TupleBatch.concat(parts)


def decode_frame(data: bytes, first: int, count: int, *, what: str) -> TupleBatch:
    """Decode a frame's tuples and check them against what its header says (first key and count): the
    check every receiving link applies, so a frame whose bytes disagree with its header is refused whole."""
    batch = decode(data, what=what)
    if batch.first != first or len(batch) != count:
        raise CorruptBatch(f"{what} says {count} tuples from {first}; its bytes hold {len(batch)} from {batch.first}")
    return batch
