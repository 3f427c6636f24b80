"""N and N': one runtime, the role decides what it does.

  primary   Push frames from Nu -> IQ -> operator -> OQ -> Deliver to Nd; Nd's Level-0 ack trims OQ, and
            the Level-1 ack derived from it goes back to Nu in every Push reply (Algorithm 4).
  standby   Backup batches from Nu -> decompress -> IQ' -> operator -> OQ', kept, not sent (Algorithm 2);
            the Level-0 ack, forwarded by the primary in each heartbeat reply, trims OQ' (Algorithm 3).
            Missed heartbeats start the takeover (seed 000 section 3.6; steps in core/recovery.py).

Loops: `operator` drains IQ; `output` sends OQ to Nd (primary only); `heartbeat` watches the primary
(standby only). Handlers validate a whole frame before changing anything, so bad input leaves state as it was.

One module per part: `operator_base` (the shared state and the operator loop, which composes the rest),
`primary` (`node.primary_side`), `standby` (`node.standby_side`, with its own parts: `forecast`, `covering`,
`connection_watch`), `passive` (`node.snapshots`), `takeover` (`node.takeover`: the numbered steps). This
module is the node's face to the wire: each call goes to the part that answers it.
"""

from __future__ import annotations

from ..core import messages as m
from .operator_base import OperatorBase
from .operator_status import operator_status
from .runs import Jump, Run, _join_runs
from .takeover import GATHER_MAX_S

__all__ = ["GATHER_MAX_S", "Jump", "OperatorNode", "Run", "_join_runs"]


class OperatorNode(OperatorBase):
    """N (role primary) or N' (role standby): the calls its peers make, each answered by its part."""

    def handle_push(self, msg: m.Frame) -> m.FrameAck:
        return self.primary_side.handle_push(msg)

    def handle_heartbeat(self, msg: m.HeartbeatRequest) -> m.HeartbeatReply:
        return self.primary_side.handle_heartbeat(msg)

    def handle_backup(self, msg: m.BackupFrame) -> m.BackupAck:
        return self.standby_side.handle_backup(msg)

    def handle_handover(self, msg: m.HandoverNotice) -> m.HandoverAck:
        """A primary's handover notice: the takeover part answers it."""
        return self.takeover.handle_handover(msg)

    def handle_snapshot(self, msg: m.SnapshotFrame) -> m.SnapshotAck:
        return self.snapshots.handle(msg)

    def snapshot(self) -> dict:
        """What the node says of itself (node/operator_status.py)."""
        return operator_status(self, super().snapshot())

    def hand_over(self, timeout: float | None = None) -> str:
        """Asked to stop (SIGTERM): a primary hands its work to the standby (PrimarySide.hand_over)."""
        return self.primary_side.hand_over(timeout)
