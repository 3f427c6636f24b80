"""Where Nu's tuples come from, and where records that cannot enter the pipeline go."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..core.acks import Checkpoint
from ..core.tuples import TupleBatch, payload_array
from .generator import Interleaved


@dataclass(frozen=True, slots=True)
class Record:
    stream: str
    seq: int
    payload: bytes


class Records:
    """Records in arrival order, in columns: `stream[i]` indexes `names` (a dictionary encoding, so a poll
    of a million records names each stream once), `seqs` and `payloads` are the records' own."""

    __slots__ = ("names", "stream", "seqs", "payloads")

    def __init__(self, names: list[str], stream: Any, seqs: Any, payloads: Any) -> None:
        self.names = names
        self.stream = np.asarray(stream, dtype=np.int64)
        self.seqs = np.asarray(seqs, dtype=np.int64)
        self.payloads: pa.BinaryArray = payload_array(payloads)

    def __len__(self) -> int:
        return len(self.seqs)

    def record(self, i: int) -> Record:
        """The i-th record as an object (cold paths: dead letters, errors)."""
        return Record(self.names[int(self.stream[i])], int(self.seqs[i]), self.payloads[i].as_py() or b"")

    def __iter__(self):
        return (self.record(i) for i in range(len(self)))

    @classmethod
    def concat(cls, parts: list[Records]) -> Records:
        """One poll's records from several places (topics, partitions), in the order given."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls([], [], [], [])
        if len(parts) == 1:
            return parts[0]
        names: dict[str, int] = {}
        codes = []
        for p in parts:
            remap = np.array([names.setdefault(n, len(names)) for n in p.names] or [0], np.int64)
            codes.append(remap[p.stream])
        return cls(list(names), np.concatenate(codes), np.concatenate([p.seqs for p in parts]),
                   pa.concat_arrays([p.payloads for p in parts]))


@dataclass(frozen=True, slots=True)
class Membership:
    """Who Nu works with, in which epoch: part of its restart state (a takeover changes it)."""

    epoch: int
    primary: str
    standby: str = ""


@dataclass
class Restored:
    """What a restarted Nu needs to continue exactly where it was: the last Level-1 checkpoint, the epoch,
    primary and standby it had, and the tuples it held after its trim point (the checkpoint's position, or
    before it for a window query: `Source.covered`), at the same positions; `held.first - 1` is the trim
    point."""

    checkpoint: Checkpoint
    epoch: int
    primary: str
    held: TupleBatch
    last_seqs: dict[str, int]
    standby: str | None = None  # None: not recorded (a state written before standbys were kept)
    params: tuple[int, bytes] | None = None  # the control record in force at the checkpoint (position, payload)


class Source(ABC):
    """Nu's input.

    Lifecycle: `restore()` once at start; then `poll` hands out records in arrival order, in columns
    (Records, possibly empty); Nu validates
    them, numbers the admitted ones, calls `record_order(batch)` (durable when it returns) and only then
    puts them in OQu; `covered(...)` reports Level-1 progress so the source may commit. `exhausted` is True
    once a finite source has handed out everything.
    """

    # Records well-formed by construction (the built-in generator): Nu skips the format check, which costs
    # about a tenth of a microsecond per record. Anything from outside is checked.
    well_formed = False

    @abstractmethod
    def poll(self, max_records: int) -> Records: ...

    @property
    def exhausted(self) -> bool:
        return False

    def restore(self) -> Restored | None:
        """State of a previous run of this Nu, or None for a fresh start."""
        return None

    def record_order(self, batch: TupleBatch, names: dict[int, str]) -> None:  # noqa: B027
        """Make the link order of `batch` durable: a generator is deterministic and needs nothing."""

    def covered(self, checkpoint: Checkpoint, members: Membership,  # noqa: B027
                trimmed_through: int | None = None) -> None:
        """Every position <= checkpoint.input_pos is covered by a Level-1 ack (recorded soon, not at once).
        `trimmed_through` (<= the checkpoint's position; None: the checkpoint's) is the last position no
        node needs again: a window query keeps the inputs of windows still open at the checkpoint, and a
        restarted Nu must hold them (`Restored.held` starts right after it)."""

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

    well_formed = True  # tests/unit/core/test_columnar.py checks its output against the format

    def __init__(self, streams: list[str], *, seed: int = 7, total: int = 0, rate: float = 0.0,
                 keys: int = 0) -> None:
        self.streams = streams
        self.total = total
        self.rate = rate
        self._gen = Interleaved(streams, seed, keys=keys)
        self._t0: float | None = None

    @property
    def _n(self) -> int:
        return self._gen.n

    @property
    def exhausted(self) -> bool:
        return bool(self.total) and self._n >= self.total

    def lag(self) -> dict[str, int]:
        left = max(0, self.total - self._n) if self.total else 0
        return {s: left // len(self.streams) for s in self.streams}

    def poll(self, max_records: int) -> Records:
        if self._t0 is None:
            self._t0 = time.monotonic()
        want = max_records
        if self.rate > 0:
            allowed = int((time.monotonic() - self._t0) * self.rate) - self._n
            want = min(want, max(0, allowed))
        if self.total:
            want = min(want, self.total - self._n)
        if want <= 0:
            return Records(self.streams, [], [], [])
        stream, seqs, payloads = self._gen.take(want)
        return Records(self.streams, stream, seqs, payloads)


class DeadLetters:
    """Records refused at the edge, with the reason, kept in memory. The Kafka adapter writes a topic."""

    def __init__(self) -> None:
        self.items: list[tuple[str, Record]] = []
        self.unwritten = 0  # dead letters that could not be written (never here; the Kafka adapter counts them)
        self.truncated = 0  # dead letters cut to fit their topic

    def open(self) -> None:  # noqa: B027 - kept in memory: nothing to size
        """Ready to take dead letters (the Kafka adapter reads its topic's record limit here)."""

    def put(self, reason: str, record: Record) -> None:
        self.items.append((reason, record))

    def flush(self) -> None:
        pass
