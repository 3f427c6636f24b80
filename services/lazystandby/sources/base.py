"""Where Nu's tuples come from, and where records that cannot enter the pipeline go."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

from ..core.acks import Checkpoint
from ..core.tuples import TupleBatch
from .generator import ticks


class SourceGap(RuntimeError):
    """Records the source no longer holds were needed: deleted (retention, truncation) before Nu read them or
    before a restart could read them back. Nu stops admitting there instead of skipping: skipping would pass
    off an incomplete stream as the whole one."""


@dataclass(frozen=True, slots=True)
class Record:
    stream: str
    seq: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Membership:
    """Who Nu works with, in which epoch: part of its restart state (a takeover changes it)."""

    epoch: int
    primary: str
    standby: str = ""


@dataclass
class Restored:
    """What a restarted Nu needs to continue exactly where it was: the last Level-1 checkpoint, the epoch,
    primary and standby it had, and the tuples it held after the checkpoint, at the same positions."""

    checkpoint: Checkpoint
    epoch: int
    primary: str
    held: TupleBatch
    last_seqs: dict[str, int]
    standby: str | None = None  # None: not recorded (a state written before standbys were kept)
    params: tuple[int, bytes] | None = None  # the control record in force at the checkpoint (position, payload)


class Source(ABC):
    """Nu's input.

    Lifecycle: `restore()` once at start; then `poll` hands out records in arrival order; Nu validates
    them, numbers the admitted ones, calls `record_order(batch)` (durable when it returns) and only then
    puts them in OQu; `covered(...)` reports Level-1 progress so the source may commit. `exhausted` is True
    once a finite source has handed out everything.
    """

    @abstractmethod
    def poll(self, max_records: int) -> list[Record]: ...

    @property
    def exhausted(self) -> bool:
        return False

    def restore(self) -> Restored | None:
        """State of a previous run of this Nu, or None for a fresh start."""
        return None

    def record_order(self, batch: TupleBatch, names: dict[int, str]) -> None:  # noqa: B027
        """Make the link order of `batch` durable: a generator is deterministic and needs nothing."""

    def covered(self, checkpoint: Checkpoint, members: Membership) -> None:  # noqa: B027
        """Every position <= checkpoint.input_pos is covered by a Level-1 ack (recorded soon, not at once)."""

    def record_membership(self, members: Membership) -> None:  # noqa: B027
        """Make a takeover durable before Nu answers it: a Nu restarted after this returns knows the new
        primary and epoch. Raises when it cannot (the takeover is then retried). Nothing to keep for a
        source that has no restart state."""

    def lag(self) -> dict[str, int]:
        """Records per stream that exist at the source but were not consumed yet."""
        return {}

    def close(self) -> None:  # noqa: B027
        pass


class GeneratorSource(Source):
    """The deterministic tick generator: streams round robin, `total` tuples (0 = forever) at `rate`/s."""

    def __init__(self, streams: list[str], *, seed: int = 7, total: int = 0, rate: float = 0.0) -> None:
        self.streams = streams
        self.total = total
        self.rate = rate
        self._gens = [(s, ticks(s, seed)) for s in streams]
        self._n = 0
        self._t0: float | None = None

    @property
    def exhausted(self) -> bool:
        return bool(self.total) and self._n >= self.total

    def lag(self) -> dict[str, int]:
        left = max(0, self.total - self._n) if self.total else 0
        return {s: left // len(self.streams) for s in self.streams}

    def poll(self, max_records: int) -> list[Record]:
        if self._t0 is None:
            self._t0 = time.monotonic()
        want = max_records
        if self.rate > 0:
            allowed = int((time.monotonic() - self._t0) * self.rate) - self._n
            want = min(want, max(0, allowed))
        if self.total:
            want = min(want, self.total - self._n)
        out = []
        gens = self._gens
        for _ in range(want):
            name, gen = gens[self._n % len(gens)]
            seq, payload = next(gen)
            out.append(Record(name, seq, payload))
            self._n += 1
        return out


class DeadLetters:
    """Records refused at the edge, with the reason, kept in memory. The Kafka adapter writes a topic."""

    def __init__(self) -> None:
        self.items: list[tuple[str, Record]] = []

    def put(self, reason: str, record: Record) -> None:
        self.items.append((reason, record))

    def flush(self) -> None:
        pass
