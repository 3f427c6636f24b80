"""Sample batches of generated ticks, for the core tests."""

from lazystandby.core.tuples import TupleBatch
from lazystandby.sources.generator import interleave


def sample(first: int = 1, n: int = 50) -> TupleBatch:
    recs = list(interleave(["I1", "I2"], n))
    return TupleBatch(first=first, streams=[1 if s == "I1" else 2 for s, _, _ in recs],
                      seqs=[q for _, q, _ in recs], payloads=[p for _, _, p in recs])


