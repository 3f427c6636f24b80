"""Event time in the link order: where Nu places watermark records, and which ticks come too late.

For a window query, time advances with input positions, never with arrival times or call boundaries:

- Nu places a watermark record at every link position that is a multiple of `every` (positions every,
  2 * every, ...). It carries the least, over the link's streams, of each stream's largest event time
  admitted before it (Flink's rule across source partitions): a stream read ahead of the others (Kafka
  hands Nu one partition's fetch before the next one's) leaves its ticks waiting in open windows rather
  than making the others' late. A stream that has not been heard from yet holds the watermark where it
  is; with `idle` > 0, a stream with no tick in the last `idle` positions stops holding it. The watermark
  never moves backwards and depends only on what came before it in the link order.
- A tick is late when every window it lies in is final at the watermark in force at its position (the
  last record before it): Nu sends it to the late-data stream instead of the link order. N and N' then
  never see a late tick, and decide nothing about lateness themselves: they close windows at the
  records, and only there.

So N and N' (and a node that rebuilds its state from any position, and the truth table) place, drop and
close identically. The ledger (`core/windows.WindowLedger`) that says how far Nu may trim OQu follows the
same records: Nu keeps every input a window result not yet delivered depends on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .windows import WindowLedger, WindowSpec


@dataclass(frozen=True, slots=True)
class Placed:
    """What placing a run of ticks gave: the order of the link (indices into the run, -1 for a watermark
    record), the watermark each record carries and the streams' state at it (`WatermarkPlacer.state`), in
    order, and the indices of the late ticks."""

    order: np.ndarray
    watermarks: list[int]
    late: np.ndarray
    states: list[dict]


class WatermarkPlacer:
    """Nu's side of event time for one link. `place` is called with runs of ticks in admission order,
    each numbered from the next link position; state carries over from run to run.

    Invariants: a record sits exactly at each position that is a multiple of `every`; the watermarks are
    non-decreasing; a tick kept is not late at its position; the ledger holds every kept tick and every
    record, in link order."""

    def __init__(self, spec: WindowSpec, every: int, streams: Iterable[int] = (), idle: int = 0,
                 per_stream: bool = True) -> None:
        """`streams`: the link's streams known from the start (each holds the watermark until heard from);
        `idle`: positions without a tick after which a stream stops holding it (0: never); `per_stream`
        False: every tick counts as one stream's, and the watermark is the largest event time admitted
        (what a Spark query's own watermark is: config.NodeConfig.watermark_per_stream)."""
        if every < 2:
            raise ValueError(f"watermark_every is {every}: a record every position leaves no room for ticks")
        if idle < 0:
            raise ValueError(f"watermark_idle is {idle}: expected a number of positions >= 0")
        self.spec = spec
        self.every = every
        self.idle = idle
        self.per_stream = per_stream
        self.watermark: int | None = None  # in force after the last record placed (None: none yet)
        # Per stream: [the largest event time admitted (None: not heard from), the position of its last tick].
        self.heard: dict[int, list] = {int(st): [None, 0] for st in streams} if per_stream else {}
        self.ledger = WindowLedger(spec)
        self.late_tuples = 0

    def state(self) -> dict[str, list]:
        """What a record carries besides its watermark, so that a restarted Nu places as this one would."""
        return {str(k): list(v) for k, v in sorted(self.heard.items())}

    def resume(self, watermark: int | None, state: dict | None, position: int) -> None:
        """A restarted Nu at the last record of what it restored (at `position`): the watermark and the
        streams' state it carried (`state`; None: no record yet, every known stream not heard from since
        `position`). The ticks held after it follow through `heard_from`."""
        self.watermark = watermark
        if state is not None:
            for k, (top, last) in state.items():
                self.heard[int(k)] = [top, last]
        else:
            for h in self.heard.values():
                h[1] = position

    def heard_from(self, positions: np.ndarray, ts: np.ndarray, streams: np.ndarray) -> None:
        """Ticks kept at `positions` (increasing) with event times `ts` on `streams`."""
        if not len(ts):
            return
        if not self.per_stream:
            streams = np.zeros(len(ts), np.int64)
        for st in np.unique(streams).tolist():
            on = streams == st
            top, last = int(ts[on].max()), int(positions[on][-1])
            h = self.heard.setdefault(int(st), [None, 0])
            h[0] = top if h[0] is None else max(h[0], top)
            h[1] = max(h[1], last)

    def _holding(self, pos: int) -> int | None:
        """The watermark the streams allow at a record at `pos`: the least of their largest event times,
        None while a stream that holds it has not been heard from (or no stream holds it)."""
        tops = []
        for top, last in self.heard.values():
            if self.idle and pos - last > self.idle:
                continue  # idle: holds nothing back
            if top is None:
                return None
            tops.append(top)
        return min(tops) if tops else None

    def place(self, first: int, ts: np.ndarray, streams: np.ndarray | None = None) -> Placed:
        """Place ticks with event times `ts` on `streams` (admission order; None: all on stream 0) from link
        position `first` on."""
        ts = np.asarray(ts, np.int64)
        streams = (np.zeros(len(ts), np.int64) if streams is None or not self.per_stream
                   else np.asarray(streams, np.int64))
        order: list[np.ndarray] = []
        marks: list[int] = []
        states: list[dict] = []
        late_parts: list[np.ndarray] = []
        pos, i, n = first, 0, len(ts)
        while i < n or pos % self.every == 0:
            if pos % self.every == 0:
                allowed = self._holding(pos)
                wm = max(allowed if allowed is not None else 0, self.watermark or 0)
                self.ledger.close(pos, wm)
                self.watermark = wm
                marks.append(wm)
                states.append(self.state())
                order.append(np.array([-1], np.int64))
                pos += 1
                if i >= n:
                    break
                continue
            room = self.every - pos % self.every  # ticks until the next record's position
            rest = ts[i:]
            late = (self.spec.late(rest, self.watermark) if self.watermark is not None
                    else np.zeros(len(rest), bool))
            on = np.flatnonzero(~late)
            cut = (on[room - 1] + 1) if len(on) >= room else len(rest)
            kept = on[on < cut] + i
            if len(kept):
                order.append(kept)
                at = np.arange(pos, pos + len(kept))
                self.ledger.add(at, ts[kept])
                self.heard_from(at, ts[kept], streams[kept])
            dropped = np.flatnonzero(late[:cut]) + i
            if len(dropped):
                late_parts.append(dropped)
            pos += len(kept)
            i += cut
        late_idx = np.concatenate(late_parts) if late_parts else np.empty(0, np.int64)
        self.late_tuples += len(late_idx)
        return Placed(np.concatenate(order) if order else np.empty(0, np.int64), marks, late_idx, states)

    def needed_from(self, covered: int) -> int | None:
        """The first position an undelivered window result depends on, once Nd holds everything through
        `covered` (WindowLedger.needed_from)."""
        return self.ledger.needed_from(covered)
