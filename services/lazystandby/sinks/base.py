"""Where Nd puts the output stream. A sink must know, after a restart, the last output it holds: that is
Nd's dedup state and its Level-0 ack, so a restarted Nd loses nothing and duplicates nothing."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.seq import StreamRegistry
from ..core.tuples import TupleBatch, offsets_of


class Sink(ABC):
    @abstractmethod
    def append(self, outputs: TupleBatch, *, epoch: int = 0) -> None:
        """Store outputs outputs.first .. outputs.last durably, in order, delivered in `epoch`."""

    @abstractmethod
    def last_delivered(self) -> int:
        """The last output sequence number stored (0 when empty)."""

    def last_epoch(self) -> int:
        """The epoch of the last output stored (0 when unknown): a restarted Nd fences from it."""
        return 0

    def close(self) -> None:  # noqa: B027
        pass


class MemorySink(Sink):
    """Keeps (oseq, stream, seq, payload) rows in a list: for tests."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, bytes]] = []
        self.epoch = 0

    def last_epoch(self) -> int:
        return self.epoch

    def append(self, outputs: TupleBatch, *, epoch: int = 0) -> None:
        self.epoch = max(self.epoch, epoch)
        rows = zip(outputs.streams.tolist(), outputs.seqs.tolist(), outputs.payload_list(), strict=True)
        self.rows.extend((outputs.first + i, sid, seq, p) for i, (sid, seq, p) in enumerate(rows))

    def last_delivered(self) -> int:
        return self.rows[-1][0] if self.rows else 0


class FileSink(Sink):
    """One line per output: `oseq<TAB>stream<TAB>seq<TAB>source_pos<TAB>payload`, flushed per append.

    A torn last line (Nd killed mid-write) is cut off on open, so the file always ends on a whole output.
    The epoch of the latest delivery is kept beside it, in `<path>.epoch`.
    """

    def __init__(self, path: str, registry: StreamRegistry) -> None:
        self.path = path
        self.registry = registry
        self._last = 0
        self._epoch = 0
        if os.path.exists(path):
            self._repair()
        if os.path.exists(path + ".epoch"):
            with open(path + ".epoch") as f:
                self._epoch = int(f.read().strip() or 0)
        self._f = open(path, "ab")  # noqa: SIM115 - held for the sink's life

    def _repair(self) -> None:
        with open(self.path, "rb+") as f:
            data = f.read()
            cut = data.rfind(b"\n") + 1
            if cut != len(data):
                f.truncate(cut)
            data = data[:cut]
        if data:
            last_line = data[data.rstrip(b"\n").rfind(b"\n") + 1 :]
            self._last = int(last_line.split(b"\t", 1)[0])

    def last_epoch(self) -> int:
        return self._epoch

    def append(self, outputs: TupleBatch, *, epoch: int = 0) -> None:
        if epoch > self._epoch:
            with open(self.path + ".epoch", "w") as f:
                f.write(str(epoch))
            self._epoch = epoch
        if len(outputs):
            self._f.write(self._lines(outputs))
            self._f.flush()
        self._last = outputs.last

    def _lines(self, outputs: TupleBatch) -> memoryview:
        """The lines of a batch, built column by column (Arrow joins them), as one buffer."""
        n = len(outputs)
        # Nd checked the ids: every id up to the largest is a stream of this deployment.
        names = pa.array([self.registry.name_of(i).encode() for i in range(int(outputs.streams.max()) + 1)])
        src = outputs.sources if outputs.sources is not None else np.zeros(n, np.int64)

        def text(col: np.ndarray) -> pa.Array:
            return pa.array(col).cast(pa.string()).cast(pa.binary())

        lines = pc.binary_join_element_wise(
            text(np.arange(outputs.first, outputs.end)),
            names.take(pa.array(outputs.streams)),
            text(outputs.seqs),
            text(src),
            pc.binary_join_element_wise(outputs.payloads, pa.scalar(b""), b"\n"),
            b"\t",
        )
        off = offsets_of(lines)
        return memoryview(lines.buffers()[2])[int(off[0]):int(off[-1])]

    def last_delivered(self) -> int:
        return self._last

    def close(self) -> None:
        self._f.close()


def read_output_file(path: str) -> list[tuple[int, str, int, bytes]]:
    """(oseq, stream, seq, payload) for each line a FileSink wrote."""
    rows = []
    with open(path, "rb") as f:
        for line in f:
            oseq, stream, seq, _src, payload = line.rstrip(b"\n").split(b"\t", 4)
            rows.append((int(oseq), stream.decode(), int(seq), payload))
    return rows
