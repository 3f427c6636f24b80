"""Where Nu's tuples come from, and where records that cannot enter the pipeline go."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

from .generator import ticks


@dataclass(frozen=True, slots=True)
class Record:
    stream: str
    seq: int
    payload: bytes


class Source(ABC):
    """Nu's input. `poll` returns records in the order Nu must number them; `exhausted` is True once a
    finite source has handed out everything. `covered(records)` tells the source how many of the records
    it handed out are now safe (Level-1 acked), so a Kafka source can commit their offsets."""

    @abstractmethod
    def poll(self, max_records: int) -> list[Record]: ...

    @property
    def exhausted(self) -> bool:
        return False

    def covered(self, count: int) -> None:  # noqa: B027 - a generator has nothing to commit
        """`count` records handed out so far are covered by Level-1 acks."""

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
        self.paused = False

    @property
    def exhausted(self) -> bool:
        return bool(self.total) and self._n >= self.total

    def poll(self, max_records: int) -> list[Record]:
        if self.paused:
            return []
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
    """Records refused at the edge, with the reason. The Kafka adapter writes them to a topic."""

    def __init__(self) -> None:
        self.items: list[tuple[str, Record]] = []

    def put(self, reason: str, record: Record) -> None:
        self.items.append((reason, record))
