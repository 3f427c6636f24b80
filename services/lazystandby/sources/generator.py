"""A deterministic generator of the source streams I1 and I2: stock ticks of 30-60 bytes.

Same seed, same tuples, however they are asked for (one at a time or a million): each stream is made in
fixed blocks of BLOCK ticks by numpy's PCG64 seeded from (seed, stream), and the text is built column by
column with Arrow. The truth-table checker regenerates them to rebuild the expected output. A tick is
`symbol,price,volume,ts_ms,venue` (formats/ticks.py); prices follow a random walk per symbol.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.tuples import payload_array

SYMBOLS = ("ACME", "GLOBX", "INITECH", "UMBRL", "HOOLI", "STARK", "WAYNE", "TYREL", "CYBDN", "SOYLNT")
VENUES = ("XTKS", "XNYS", "XLON", "XNAS")
BLOCK = 8192
_SYMBOLS = pa.array(SYMBOLS)
_VENUES = pa.array(VENUES)
_VOLUMES = pa.array([str(k * 100) for k in range(50)])


def _seed_of(seed: int, stream: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{stream}".encode()).digest()[:8], "little")


KEYS_MAX = 1_000_000


def key_names(keys: int) -> pa.Array:
    """The symbols of a generator with `keys` distinct ones: K0 .. K<keys-1> (0: the ten named SYMBOLS)."""
    return _SYMBOLS if not keys else pa.array([f"K{i}" for i in range(keys)])


class TickStream:
    """One stream's ticks, seq = 1, 2, ...: `take(n)` hands out the next n as (seqs, payloads).

    `keys`: how many distinct symbols (up to KEYS_MAX), drawn uniformly, each with a price walk of its own,
    so that a window query's state grows with it; 0 keeps the ten named SYMBOLS (and the same ticks as
    ever for a seed)."""

    def __init__(self, stream: str, seed: int = 7, start_ts: int = 1_764_000_000_000, *, keys: int = 0) -> None:
        if not 0 <= keys <= KEYS_MAX:
            raise ValueError(f"keys is {keys}: expected 0 (the named symbols) to {KEYS_MAX:,}")
        self.stream = stream
        self.keys = keys
        self._names = key_names(keys)
        self._rng = np.random.Generator(np.random.PCG64(_seed_of(seed, stream)))
        self._log_price = np.log(self._rng.uniform(20, 200, keys or len(SYMBOLS)))
        self._ts = start_ts
        self._next_seq = 1  # seq of the first tick not yet handed out
        self._made = 0  # ticks generated so far
        self._buf = pa.array([], pa.binary())
        self._buf_first = 1  # seq of _buf[0]

    def _block(self) -> pa.Array:
        rng, n = self._rng, BLOCK
        sym = rng.integers(0, self.keys or len(SYMBOLS), n)
        step = rng.normal(0.0, 0.002, n)
        gaps = rng.integers(1, 5, n)
        volume = rng.integers(1, 50, n)  # hundreds
        venue = rng.integers(0, len(VENUES), n)
        log_price = np.empty(n)
        if not self.keys:
            for k in range(len(SYMBOLS)):
                at = np.flatnonzero(sym == k)
                if len(at):
                    walk = self._log_price[k] + np.cumsum(step[at])
                    log_price[at] = walk
                    self._log_price[k] = walk[-1]
        else:
            # Every key's walk at once: the steps grouped by key (in tick order within it), summed per group.
            order = np.argsort(sym, kind="stable")
            by_key, st = sym[order], step[order]
            total = np.cumsum(st)
            starts = np.flatnonzero(np.r_[True, by_key[1:] != by_key[:-1]])
            group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
            walk = self._log_price[by_key] + total - (total[starts] - st[starts])[group]
            log_price[order] = walk
            ends = np.r_[starts[1:], n] - 1
            self._log_price[by_key[ends]] = walk[ends]
        cents = np.maximum(100, np.rint(np.exp(log_price) * 100)).astype(np.int64)
        ts = self._ts + np.cumsum(gaps)
        self._ts = int(ts[-1])
        # The price as a decimal with two places: Arrow prints it as "123.45" in one cast (the fastest way
        # to two fixed decimals found: an integer cast and a join of the parts costs half as much again).
        unscaled = np.zeros((n, 2), np.int64)  # decimal128: 16-byte little-endian integers, all positive
        unscaled[:, 0] = cents
        price = pa.Array.from_buffers(pa.decimal128(18, 2), n, [None, pa.py_buffer(unscaled)]).cast(pa.string())
        text = pc.binary_join_element_wise(
            self._names.take(pa.array(sym)), price, _VOLUMES.take(pa.array(volume)),
            pa.array(ts).cast(pa.string()), _VENUES.take(pa.array(venue)), ",")
        self._made += n
        return text.cast(pa.binary())

    def take(self, n: int) -> tuple[np.ndarray, pa.BinaryArray]:
        parts = []
        want = n
        while want:
            have = len(self._buf) - (self._next_seq - self._buf_first)
            if have == 0:
                self._buf_first = self._made + 1
                self._buf = self._block()
                continue
            k = min(want, have)
            parts.append(self._buf.slice(self._next_seq - self._buf_first, k))
            self._next_seq += k
            want -= k
        seqs = np.arange(self._next_seq - n, self._next_seq, dtype=np.int64)
        payloads = payload_array(pa.concat_arrays(parts)) if len(parts) > 1 else (
            parts[0] if parts else payload_array([]))
        return seqs, payloads


class Interleaved:
    """Streams round robin: tuple i (from 0) is stream i % len(streams)'s tick number i // len(streams) + 1."""

    def __init__(self, streams: list[str], seed: int = 7, *, keys: int = 0) -> None:
        self.streams = list(streams)
        self._gens = [TickStream(s, seed, keys=keys) for s in streams]
        self.n = 0  # tuples handed out so far

    def take(self, count: int) -> tuple[np.ndarray, np.ndarray, pa.BinaryArray]:
        """The next `count` tuples as (stream index into `streams`, seq, payload) columns."""
        s = len(self.streams)
        idx = (np.arange(self.n, self.n + count) % s).astype(np.int64)
        seqs = np.empty(count, np.int64)
        parts, where = [], []
        for k, gen in enumerate(self._gens):
            at = np.flatnonzero(idx == k)
            if not len(at):
                continue
            q, p = gen.take(len(at))
            seqs[at] = q
            parts.append(p)
            where.append(at)
        self.n += count
        if len(parts) <= 1:
            return idx, seqs, parts[0] if parts else payload_array([])
        order = np.argsort(np.concatenate(where), kind="stable")
        return idx, seqs, pa.concat_arrays(parts).take(pa.array(order))


def ticks(stream: str, seed: int = 7) -> Iterator[tuple[int, bytes]]:
    """(seq, payload) for one stream, seq = 1, 2, ... forever (one at a time: tests and tools)."""
    gen = TickStream(stream, seed)
    while True:
        seqs, payloads = gen.take(1024)
        yield from zip(seqs.tolist(), payloads.to_pylist(), strict=True)


def interleave(streams: list[str], total: int, seed: int = 7, *, keys: int = 0) -> Iterator[tuple[str, int, bytes]]:
    """`total` tuples from all streams, round robin: (stream, seq, payload)."""
    gen = Interleaved(streams, seed, keys=keys)
    left = total
    while left:
        k = min(left, 65536)
        idx, seqs, payloads = gen.take(k)
        names = [streams[i] for i in idx.tolist()]
        yield from zip(names, seqs.tolist(), payloads.to_pylist(), strict=True)
        left -= k
