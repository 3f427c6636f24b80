"""What Nu admits from outside, and the event time it reads from each admitted record: the tick example's
rules (formats/ticks.py) or a pipeline's tables (formats/schema.py, one format per table). Nu asks a poll
at a time, columnar: `refusals` is None when every record is admitted (the common case), else the reason
for each refused one, by index.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import pyarrow as pa

from . import ticks
from .by_name import record_format
from .schema import Schema


class RecordRules(ABC):
    """Nu's admission of the records of its source streams (by stream name), and their event times."""

    @abstractmethod
    def refusals(self, names: list[str], stream: np.ndarray, payloads: pa.Array, *,
                 max_bytes: int) -> dict[int, str] | None:
        """The reason each refused record is refused, by index (None: all admitted). `stream[i]` indexes
        `names` (a record of a stream no table reads is left to Nu's stream check)."""

    @abstractmethod
    def event_times(self, payloads: pa.Array, stream_names: list[str]) -> np.ndarray:
        """Event times (ms) of admitted records (`stream_names[i]`: record i's stream; every admitted
        record of a table with an event time has one)."""


class TickRules(RecordRules):
    """The tick example's records: `symbol,price,volume,ts_ms,venue`, event time `ts`."""

    def refusals(self, names, stream, payloads, *, max_bytes):
        mask = ticks.valid_mask(payloads, max_bytes=max_bytes)
        if mask is None:
            return None
        out = {}
        for i in np.flatnonzero(~mask).tolist():
            try:
                ticks.validate(payloads[i].as_py() or b"", max_bytes=max_bytes)
            except ticks.MalformedRecord as e:
                out[i] = e.message
        return out or None

    def event_times(self, payloads, stream_names):
        return ticks.parse_columns(payloads, {"ts"}, admitted=True)[1]["ts"].to_numpy(
            zero_copy_only=False).astype(np.int64)


class TableRules(RecordRules):
    """A pipeline's tables, by the stream that carries each (a table's stream, or its partitions'
    `table/<n>`)."""

    def __init__(self, tables: dict[str, Schema]) -> None:
        self.formats = {name: record_format(s) for name, s in tables.items()}
        self.tables = tables
        # The event times `refusals` read off the poll it judged last, kept for `event_times` of that same
        # poll (Nu asks both of one poll, in that order): a record is parsed once at Nu.
        self._judged: tuple[pa.Array, np.ndarray] | None = None

    def _table(self, stream: str) -> str:
        return stream.split("/", 1)[0]

    def refusals(self, names, stream, payloads, *, max_bytes):
        out: dict[int, str] = {}
        times = np.zeros(len(payloads), np.int64)
        for code, name in enumerate(names):
            fmt = self.formats.get(self._table(name))
            if fmt is None:
                continue
            idx = np.flatnonzero(stream == code)
            if not len(idx):
                continue
            part = payloads if len(idx) == len(payloads) else payloads.take(pa.array(idx))
            decoded = fmt.decode(part, max_bytes=max_bytes)
            out.update({int(idx[i]): why for i, why in decoded.bad.items()})
            time = self.tables[self._table(name)].event_time
            if time:  # a record with no event time is in no window: refused, as Flink refuses a NULL rowtime
                col = decoded.table.column(time)
                missing = col.is_null().to_numpy(zero_copy_only=False)
                for i in np.flatnonzero(missing).tolist():
                    out.setdefault(int(idx[i]), f"column {time} is the event time and has no value")
                times[idx] = col.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        self._judged = None if out else (payloads, times)
        return out or None

    def event_times(self, payloads, stream_names):
        if self._judged is not None and self._judged[0] is payloads:
            return self._judged[1]
        out = np.zeros(len(payloads), np.int64)
        names = np.array(stream_names, dtype=object)
        for stream in set(stream_names):
            table = self._table(stream)
            schema = self.tables[table]
            if not schema.event_time:
                continue
            idx = np.flatnonzero(names == stream)
            part = payloads if len(idx) == len(payloads) else payloads.take(pa.array(idx))
            col = self.formats[table].decode_columns(part, [schema.event_time]).table.column(
                schema.event_time).combine_chunks()
            out[idx] = col.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        return out
