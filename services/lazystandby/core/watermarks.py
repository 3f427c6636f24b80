"""Event time in the link order: where Nu places watermark records, and which ticks come too late.

For a window query, time advances with input positions, never with arrival times or call boundaries:

- Nu places a watermark record at every link position that is a multiple of `every` (positions every,
  2 * every, ...). It carries the largest event time admitted before it (`max_ts`), so the watermark
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

from dataclasses import dataclass

import numpy as np

from .windows import WindowLedger, WindowSpec


@dataclass(frozen=True, slots=True)
class Placed:
    """What placing a run of ticks gave: the order of the link (indices into the run, -1 for a watermark
    record), the watermark each record carries (in order), and the indices of the late ticks."""

    order: np.ndarray
    watermarks: list[int]
    late: np.ndarray


class WatermarkPlacer:
    """Nu's side of event time for one link. `place` is called with runs of ticks in admission order,
    each numbered from the next link position; state carries over from run to run.

    Invariants: a record sits exactly at each position that is a multiple of `every`; the watermarks are
    non-decreasing; a tick kept is not late at its position; the ledger holds every kept tick and every
    record, in link order."""

    def __init__(self, spec: WindowSpec, every: int) -> None:
        if every < 2:
            raise ValueError(f"watermark_every is {every}: a record every position leaves no room for ticks")
        self.spec = spec
        self.every = every
        self.watermark: int | None = None  # in force after the last record placed (None: none yet)
        self.max_ts: int | None = None  # the largest event time admitted
        self.ledger = WindowLedger(spec)
        self.late_tuples = 0

    def resume(self, watermark: int | None, max_ts: int | None) -> None:
        """A restarted Nu: the watermark in force at the end of what it restored and the largest event time
        admitted since (both from the restored link order: every tick after the last record is still held,
        since its windows are open)."""
        self.watermark = watermark
        self.max_ts = max(v for v in (watermark, max_ts) if v is not None) if (watermark, max_ts) != (None, None) \
            else None

    def place(self, first: int, ts: np.ndarray) -> Placed:
        """Place ticks with event times `ts` (admission order) from link position `first` on."""
        ts = np.asarray(ts, np.int64)
        order: list[np.ndarray] = []
        marks: list[int] = []
        late_parts: list[np.ndarray] = []
        pos, i, n = first, 0, len(ts)
        while i < n or pos % self.every == 0:
            if pos % self.every == 0:
                wm = self.max_ts if self.max_ts is not None else 0
                wm = max(wm, self.watermark or 0)
                self.ledger.close(pos, wm)
                self.watermark = wm
                marks.append(wm)
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
                self.ledger.add(np.arange(pos, pos + len(kept)), ts[kept])
                top = int(ts[kept].max())
                self.max_ts = top if self.max_ts is None else max(self.max_ts, top)
            dropped = np.flatnonzero(late[:cut]) + i
            if len(dropped):
                late_parts.append(dropped)
            pos += len(kept)
            i += cut
        late_idx = np.concatenate(late_parts) if late_parts else np.empty(0, np.int64)
        self.late_tuples += len(late_idx)
        return Placed(np.concatenate(order) if order else np.empty(0, np.int64), marks, late_idx)

    def needed_from(self, covered: int) -> int | None:
        """The first position an undelivered window result depends on, once Nd holds everything through
        `covered` (WindowLedger.needed_from)."""
        return self.ledger.needed_from(covered)
