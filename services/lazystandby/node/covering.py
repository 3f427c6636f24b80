"""A standby's covering checkpoints not applied yet (Nu's Level-1 points, sent with the backup).

One applies once the standby holds what it covers and a heartbeat has shown the primary got that far (a
Level-1 point is never ahead of the primary), whichever comes last, so both events ask (`reached`). The
backup runs behind the primary (at Bsize 1 by tens of thousands of inputs at full speed, each frame's
checkpoint past its runs), and at moderate rates most frames come just before the heartbeat that vouches
for them: applied only when both held at once, covering would lag by up to a heartbeat interval, and the
standby would process what it could skip.
"""

from __future__ import annotations

from collections import deque

from ..core import messages as m
from ..core.acks import Checkpoint

KEPT = 64  # past this many, the newest replaces the one before it (the older ones still apply in turn)


class PendingCovers:
    """Covering checkpoints kept until they may apply, oldest first. Its caller holds the node's lock."""

    def __init__(self) -> None:
        self._held: deque[tuple[Checkpoint, m.Params | None]] = deque()

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, ckpt: Checkpoint, params: m.Params | None, covered_pos: int) -> None:
        """Keep `ckpt` (with the control record in force there) unless it is no newer than what is already
        covered (`covered_pos`) or kept."""
        held = self._held
        if ckpt.input_pos <= max(covered_pos, held[-1][0].input_pos if held else 0):
            return
        if len(held) >= KEPT:
            held.pop()
        held.append((ckpt, params))

    def reached(self, limit: int) -> tuple[Checkpoint, m.Params | None] | None:
        """The newest kept checkpoint at or before `limit` (both what the standby holds and what the
        primary has received), taken with every older one; None when none is."""
        reached = None
        while self._held and self._held[0][0].input_pos <= limit:
            reached = self._held.popleft()
        return reached
