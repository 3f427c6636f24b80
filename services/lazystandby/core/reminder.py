"""When a condition that goes on, or keeps coming back, is worth a log line: the first time, then once every
`every` seconds. A link that stays down, a refusal a peer keeps earning, an announcement Nu keeps refusing,
a takeover Nd keeps declining: each is said when it starts, then reminded, never once per occurrence (a
client that sends garbage in a loop cannot flood the log, and a standby cut off from a live primary for
an hour writes 120 lines, not 9,000). What was not said is counted, for the next line to say.

Clocks are injected, as everywhere in core."""

from __future__ import annotations

from collections.abc import Callable


class Reminder:
    def __init__(self, clock: Callable[[], float], every: float) -> None:
        self.clock, self.every = clock, every
        self.said: float | None = None
        self.suppressed = 0  # occurrences not said since the last line

    def recently(self) -> bool:
        """A line was said less than `every` seconds ago."""
        return self.said is not None and self.clock() - self.said < self.every

    def due(self) -> bool:
        """Whether to say it now. If so it counts as said; if not, as suppressed."""
        if self.recently():
            self.suppressed += 1
            return False
        self.said = self.clock()
        return True

    def say_now(self) -> None:
        """A line was said for another reason (the condition just began): remind from now."""
        self.said, self.suppressed = self.clock(), 0

    def take_suppressed(self) -> int:
        """How many were not said since the last line; counting starts again."""
        n, self.suppressed = self.suppressed, 0
        return n
