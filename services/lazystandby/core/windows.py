"""Window bookkeeping for keyed event-time windows: which windows a tick lies in, which input positions
the results of each window depend on, and how far a sender may trim its buffer once outputs depend on
more than the one input that made them.

A window is named by its start (ms of event time); it holds the ticks with start <= ts < start + size and
is final once the watermark (the event time that the link order has passed) reaches start + size +
lateness. Its results are emitted at the position where that watermark is in the link order, so they
depend on every input that fell into it, back to the first. The trim rules in seed 000 (Algorithm 4) let
Nu drop an input once Nd holds its output; with windows, an input's outputs come at the close of each of
its windows, later in the link order:

- `WindowLedger.needed_from(covered)`: the first input position any window not yet delivered at a
  checkpoint depends on (open at the processed position, or closed after the checkpoint's position);
- `trimmable_through`: the last position a sender may drop: Nd holds every output that depends on it
  (before `needed_from`, within the checkpoint) and the standby can rebuild its state without it (it has
  applied it).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class WindowSpec:
    size_ms: int
    slide_ms: int
    lateness_ms: int = 0

    def __post_init__(self) -> None:
        if self.size_ms < 1 or self.slide_ms < 1 or self.size_ms % self.slide_ms or self.lateness_ms < 0:
            raise ValueError(f"windows of {self.size_ms} ms sliding by {self.slide_ms} ms (lateness "
                             f"{self.lateness_ms} ms): the slide must divide the size, both above 0")

    @property
    def per_tick(self) -> int:
        """How many windows each tick lies in."""
        return self.size_ms // self.slide_ms

    def starts(self, ts: np.ndarray) -> np.ndarray:
        """The starts of the windows each tick lies in: shape (len(ts), per_tick), latest first. Windows are
        aligned on the epoch (a start is a multiple of the slide; numpy's floor for negative times too)."""
        ts = np.asarray(ts, np.int64)
        last = ts - np.mod(ts, self.slide_ms)
        return last[:, None] - self.slide_ms * np.arange(self.per_tick, dtype=np.int64)[None, :]

    def final_at(self, start: int | np.ndarray):
        """The watermark from which the window starting at `start` takes no more ticks."""
        return start + self.size_ms + self.lateness_ms

    def late(self, ts: np.ndarray, watermark: int) -> np.ndarray:
        """The ticks that come too late at `watermark`: every window they lie in is final already (the
        latest one, whose start is the largest, closes last)."""
        return self.final_at(self.starts(ts)[:, 0]) <= watermark


class WindowLedger:
    """The windows open at the processed position, each with the first input position that fell into it,
    and the windows that closed, at which position, with theirs. Identical on N and N' for the same link
    order: everything here follows input positions and event times, never arrival times."""

    def __init__(self, spec: WindowSpec) -> None:
        self.spec = spec
        self._first: dict[int, int] = {}  # open window start -> first input position in it
        self._closed: deque[tuple[int, int]] = deque()  # (close position, first position), in close order
        self.watermark: int | None = None

    def __len__(self) -> int:
        return len(self._first)

    def add(self, positions: np.ndarray, ts: np.ndarray) -> None:
        """Inputs at `positions` (increasing) with event times `ts`, not late, fall into their windows."""
        if not len(positions):
            return
        starts = self.spec.starts(ts).ravel()
        pos = np.repeat(np.asarray(positions, np.int64), self.spec.per_tick)
        uniq, at = np.unique(starts, return_index=True)  # the first occurrence is the lowest position
        for s, p in zip(uniq.tolist(), pos[at].tolist(), strict=True):
            self._first.setdefault(s, p)

    def close(self, position: int, watermark: int) -> list[int]:
        """The watermark `watermark` at link position `position`: the windows it makes final, by start
        (the order their results are emitted in), no longer open."""
        if self.watermark is not None and watermark < self.watermark:
            raise ValueError(f"watermark {watermark} at position {position} is behind {self.watermark}")
        self.watermark = watermark
        done = sorted(s for s in self._first if self.spec.final_at(s) <= watermark)
        if done:
            self._closed.append((position, min(self._first[s] for s in done)))
            for s in done:
                del self._first[s]
        return done

    def needed_from(self, covered: int) -> int | None:
        """The first input position that an output Nd does not hold yet depends on, given that Nd holds
        everything through input position `covered`: the windows still open, and those closed at a
        position after `covered`. None when no such window holds an input. Closes at or before `covered`
        are forgotten (they are delivered, and `covered` only grows)."""
        while self._closed and self._closed[0][0] <= covered:
            self._closed.popleft()
        firsts = [*self._first.values(), *(f for _, f in self._closed)]
        return min(firsts) if firsts else None


def trimmable_through(covered: int, needed_from: int | None, standby_applied: int | None) -> int:
    """The last input position a sender may drop from its output queue: covered by Nd's output (the
    Level-1 checkpoint's position `covered`), before the first input an undelivered window result needs
    (`needed_from`), and applied by the standby to its state (`standby_applied`; None: no standby to wait
    for). Never below 0."""
    through = covered
    if needed_from is not None:
        through = min(through, needed_from - 1)
    if standby_applied is not None:
        through = min(through, standby_applied)
    return max(0, through)
