"""A standby's watch on its primary's connection (Peer.watch): which peer is watched, whether its transport
tells of a lost connection at all, and when it last did. The notice comes on the transport's thread and
wakes the heartbeat loop, which takes it (`take_lost`) and tells the failure detector."""

from __future__ import annotations

from collections.abc import Callable

from ..config import NodeConfig


class ConnectionWatch:
    """The primary's connection, watched once per peer."""

    def __init__(self, clock: Callable[[], float], wake: Callable[[], None]) -> None:
        self._clock = clock
        self._wake = wake
        self._watched = None
        self.notices = False  # whether the watched peer's transport tells of a lost connection
        self._lost_at: float | None = None

    def watch(self, peer) -> None:
        """Watch `peer` (a no-op for the one already watched, or None)."""
        if peer is None or peer is self._watched:
            return
        self._watched = peer

        def lost() -> None:
            if self._watched is peer:
                self._lost_at = self._clock()
                self._wake()

        self.notices = peer.watch(lost)

    def take_lost(self) -> float | None:
        """When the watched connection was last lost, once (None: not since the last take)."""
        lost_at, self._lost_at = self._lost_at, None
        return lost_at


def notice_hold_s(cfg: NodeConfig) -> float:
    """How long after the notice of a lost connection to the primary a refusal suspects it
    (core.detector): its lease at Nd, which runs at most that long after its last frame, and a tenth of
    an interval for that frame's arrival (Nd takes its time once its handler runs, later than the
    frame was sent on a busy node) against a takeover that would be declined and cost a whole round."""
    return min(cfg.lease_s + cfg.heartbeat_interval / 10, cfg.heartbeat_interval)
