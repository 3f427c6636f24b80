"""A deterministic generator of the source streams I1 and I2: stock ticks of 30-60 bytes.

Same seed, same tuples: the truth-table checker regenerates them to rebuild the expected output.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from ..formats.ticks import Tick

SYMBOLS = ("ACME", "GLOBX", "INITECH", "UMBRL", "HOOLI", "STARK", "WAYNE", "TYREL", "CYBDN", "SOYLNT")
VENUES = ("XTKS", "XNYS", "XLON", "XNAS")


def ticks(stream: str, seed: int = 7, start_ts: int = 1_764_000_000_000) -> Iterator[tuple[int, bytes]]:
    """(seq, payload) for one stream, seq = 1, 2, ... forever."""
    rng = random.Random(f"{seed}:{stream}")
    prices = {s: rng.uniform(20, 200) for s in SYMBOLS}
    ts = start_ts
    seq = 0
    while True:
        seq += 1
        sym = SYMBOLS[rng.randrange(len(SYMBOLS))]
        prices[sym] = max(1.0, prices[sym] * (1 + rng.gauss(0, 0.002)))
        ts += rng.randrange(1, 5)
        tick = Tick(sym, prices[sym], rng.randrange(1, 50) * 100, ts, VENUES[rng.randrange(len(VENUES))])
        yield seq, tick.encode()


def interleave(streams: list[str], total: int, seed: int = 7) -> Iterator[tuple[str, int, bytes]]:
    """`total` tuples from all streams, round robin: (stream, seq, payload)."""
    gens = [(s, ticks(s, seed)) for s in streams]
    for i in range(total):
        name, gen = gens[i % len(gens)]
        seq, payload = next(gen)
        yield name, seq, payload
