"""The queues of a node: the output queues trimmed by acks (OQu, OQ, OQ') and the bounded input queue.

Trimming and appending touch whole chunks, never single tuples, so a writer is never held up by a trim
(seed 004 lost a third of its throughput to readers that stalled writers).
"""

from __future__ import annotations

from collections import deque

from .errors import DuplicateSequence, QueueFull, SequenceGap
from .tuples import TupleBatch


class KeyedQueue:
    """Tuples held by consecutive key (link position or output sequence), trimmed from the front by acks.

    Invariants: keys in the queue run without a gap from `trimmed_through + 1` to `last`; `trim(k)`
    ("acked through k") drops every tuple with key <= k and never moves `trimmed_through` backwards;
    `append` accepts only the next key. `capacity` bounds the tuples held; `append` past it raises
    QueueFull so the caller can push back instead of growing without bound.
    """

    def __init__(self, name: str, *, capacity: int = 1 << 22, start: int = 0) -> None:
        self.name = name
        self.capacity = capacity
        self.trimmed_through = start
        self.last = start
        self._chunks: deque[TupleBatch] = deque()
        self._count = 0
        self._bytes = 0
        # For an output queue: the input position of the output at `trimmed_through`, when it was held at
        # its trim (None: unknown). Level-1 acks of an operator with several outputs per input need it.
        self.trimmed_source: int | None = None

    def __len__(self) -> int:
        return self._count

    @property
    def payload_bytes(self) -> int:
        return self._bytes

    @property
    def first(self) -> int:
        """Key of the oldest tuple held (last + 1 when empty)."""
        return self.trimmed_through + 1

    def room(self) -> int:
        return max(0, self.capacity - self._count)

    def append(self, batch: TupleBatch, *, over: bool = False) -> None:
        """Append the next keys. `over`: past `capacity` if need be (the outputs of one input, which cannot
        be split: the caller takes no more inputs until the queue has room again)."""
        if not len(batch):
            return
        if batch.first != self.last + 1:
            err = DuplicateSequence if batch.first <= self.last else SequenceGap
            raise err(f"{self.name}: got key {batch.first}; expected {self.last + 1}")
        if len(batch) > self.room() and not over:
            raise QueueFull(
                f"{self.name}: {len(batch)} tuples from key {batch.first} do not fit "
                f"({self._count} of {self.capacity} held)"
            )
        self._chunks.append(batch)
        self._count += len(batch)
        self._bytes += batch.payload_bytes()
        self.last = batch.last

    def trim(self, through: int) -> int:
        """Drop every tuple with key <= through; return how many were dropped."""
        if through <= self.trimmed_through:
            return 0
        self.trimmed_source = None
        dropped = 0
        while self._chunks and self._chunks[0].last <= through:
            c = self._chunks.popleft()
            dropped += len(c)
            self._bytes -= c.payload_bytes()
            if c.last == through and c.sources is not None:
                self.trimmed_source = int(c.sources[-1])
        if self._chunks and self._chunks[0].first <= through:
            c = self._chunks[0]
            if c.sources is not None:
                self.trimmed_source = int(c.sources[through - c.first])
            rest = c.slice(through + 1, c.end)
            dropped += len(c) - len(rest)
            self._bytes -= c.payload_bytes() - rest.payload_bytes()
            self._chunks[0] = rest
        self._count -= dropped
        self.trimmed_through = through
        if self.last < through:
            # Everything held was acked and the ack ran ahead of us (a standby jumping to a checkpoint).
            self.last = through
        return dropped

    def reset(self, through: int) -> None:
        """Forget everything and restart after key `through` (a standby resuming from a checkpoint)."""
        self._chunks.clear()
        self._count = 0
        self._bytes = 0
        self.trimmed_through = through
        self.last = through
        self.trimmed_source = None

    def read(self, start: int, max_count: int) -> TupleBatch | None:
        """Up to max_count tuples from key `start` on, joined into one batch; None when there are none."""
        start = max(start, self.first)
        if start > self.last or max_count <= 0:
            return None
        stop = min(self.last + 1, start + max_count)
        parts = []
        for c in self._chunks:
            if c.end <= start:
                continue
            if c.first >= stop:
                break
            parts.append(c.slice(start, stop))
        return TupleBatch.concat(parts)

    def source_of(self, key: int) -> int | None:
        """For an output queue: the input position that produced output `key`, if held."""
        if key < self.first or key > self.last:
            return None
        for c in self._chunks:
            if c.first <= key <= c.last:
                if c.sources is None:
                    return None  # a queue of inputs: keys are positions, and have no source
                return int(c.sources[key - c.first])
        return None


class InputQueue:
    """A node's input queue: a bounded FIFO of batches between the transport and the operator.

    `offer` never blocks: when the queue is full it raises QueueFull and the sender keeps its data and
    retries, which is how backpressure reaches the source. Each item keeps when it was offered, so that a
    standby can let its inputs wait (see OperatorNode's `standby_defer`).
    """

    def __init__(self, name: str, *, capacity: int = 1 << 20) -> None:
        self.name = name
        self.capacity = capacity
        self._items: deque[TupleBatch] = deque()
        self._since: deque[float] = deque()
        self._count = 0

    def __len__(self) -> int:
        """Tuples queued (markers, which hold no tuples, do not count)."""
        return self._count

    def empty(self) -> bool:
        return not self._items

    def offer(self, batch: TupleBatch, at: float = 0.0) -> None:
        if len(batch) and self._count and self._count + len(batch) > self.capacity:
            raise QueueFull(f"{self.name}: full ({self._count} of {self.capacity} tuples queued)")
        self._items.append(batch)
        self._since.append(at)
        self._count += len(batch)

    def head(self) -> tuple[TupleBatch, float] | None:
        """The oldest item and when it was offered; None when empty."""
        return (self._items[0], self._since[0]) if self._items else None

    def take_all(self, max_count: int, through: int | None = None) -> list[TupleBatch]:
        """Drain whole batches, up to about max_count tuples (at least one batch when any is queued).
        With `through`, no tuple past that position: a batch that crosses it is split, and its rest stays at
        the head. (Markers, which hold no tuples, are always taken.)"""
        out: list[TupleBatch] = []
        n = 0
        while self._items and (not out or n + len(self._items[0]) <= max_count):
            b = self._items[0]
            if through is not None and len(b):
                if b.first > through:
                    break
                if b.last > through:
                    self._items[0] = b.slice(through + 1, b.end)
                    b = b.slice(b.first, through + 1)
                    n += len(b)
                    out.append(b)
                    break
            self._items.popleft()
            self._since.popleft()
            n += len(b)
            out.append(b)
        self._count -= n
        return out

    def drop_from(self, pos: int) -> int:
        """Forget every queued tuple at position `pos` or later, and the markers after the last one kept;
        returns how many tuples were dropped."""
        dropped = 0
        while self._items:
            b = self._items[-1]
            if len(b) and b.first < pos:
                if b.end > pos:
                    self._items[-1] = b.slice(b.first, pos)
                    dropped += b.end - pos
                break
            self._items.pop()
            self._since.pop()
            dropped += len(b)
        self._count -= dropped
        return dropped

    def clear(self) -> None:
        self._items.clear()
        self._since.clear()
        self._count = 0
