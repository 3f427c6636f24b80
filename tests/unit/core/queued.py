"""Runs of tuples and filled output queues, for the queue, batching and ack tests."""

from lazystandby.core.queues import KeyedQueue
from lazystandby.core.tuples import TupleBatch


def run(first: int, n: int, sources: list[int] | None = None) -> TupleBatch:
    return TupleBatch(first=first, streams=[1] * n, seqs=list(range(first, first + n)),
                      payloads=[b"x%d" % i for i in range(first, first + n)], sources=sources)


def filled(n: int, chunk: int = 7) -> KeyedQueue:
    q = KeyedQueue("OQu")
    for start in range(1, n + 1, chunk):
        q.append(run(start, min(chunk, n - start + 1)))
    return q


