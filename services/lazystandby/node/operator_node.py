"""N and N': one runtime, the role decides what it does.

  primary   Push frames from Nu -> IQ -> operator -> OQ -> Deliver to Nd; Nd's Level-0 ack trims OQ, and
            the Level-1 ack derived from it goes back to Nu in every Push reply (Algorithm 4).
  standby   Backup batches from Nu -> decompress -> IQ' -> operator -> OQ', kept, not sent (Algorithm 2);
            the Level-0 ack, forwarded by the primary in each heartbeat reply, trims OQ' (Algorithm 3).
            Missed heartbeats start the takeover (seed 000 section 3.6; steps in core/recovery.py).

Loops: `operator` drains IQ; `output` sends OQ to Nd (primary only); `heartbeat` watches the primary
(standby only). Handlers validate a whole frame before changing anything, so bad input leaves state as it was.

One module per side: `operator_base` (the shared state and the operator loop), `primary`, `standby`
(with its composed parts: `forecast`, `covering`, `connection_watch`), `passive`, `takeover` (a part:
the numbered steps).
"""

from __future__ import annotations

from ..core import messages as m
from .operator_base import GATHER_MAX_S, OperatorBase
from .primary import PrimarySide
from .runs import Jump, Run, _join_runs
from .standby import StandbySide
from .takeover import Takeover

__all__ = ["GATHER_MAX_S", "Jump", "OperatorNode", "Run", "_join_runs"]


class OperatorNode(PrimarySide, StandbySide, OperatorBase):
    """N (role primary) or N' (role standby). One object carries every side: a standby becomes the primary
    at a takeover (its part `takeover`), and a primary shown a newer epoch before it has worked rejoins as a
    standby."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)  # OperatorBase: the state every side shares, and the role it starts in
        self._init_primary()
        self._init_standby()
        self.takeover = Takeover(self)

    def handle_handover(self, msg: m.HandoverNotice) -> m.HandoverAck:
        """The gRPC handler of a primary's handover notice: the takeover part answers it."""
        return self.takeover.handle_handover(msg)
