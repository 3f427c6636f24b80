"""Nd: an inbound link and a sink. The inbound link (node/delivery_inbound.py) receives the output
stream, drops anything the sink already holds, refuses stale epochs, other senders and gaps, and
answers every delivery with its Level-0 ack; the sink makes what it takes durable."""

from __future__ import annotations

from ..config import NodeConfig
from ..core import messages as m
from ..core.roles import Role
from ..core.tuples import TupleBatch
from ..sinks.base import Sink
from .common import NodeBase
from .delivery_inbound import DeliveryInbound


class DownstreamNode(NodeBase):
    """Nd. Its dedup state is the sink's last output, and its epoch the one the sink recorded with it, so
    both survive a restart."""

    def __init__(self, cfg: NodeConfig, sink: Sink, **kw) -> None:
        super().__init__(cfg, **kw)
        self.sink = sink
        self.fence = self.state.fence
        # The first primary runs in epoch 1 without a takeover; a restarted Nd resumes from the epoch its
        # sink recorded with its last output.
        self.state.become(Role.DOWNSTREAM, epoch=max(1, sink.last_epoch()))
        self.inbound = DeliveryInbound(cfg, self, delivered_through=sink.last_delivered(), write=self._write)

    def start(self) -> None:
        pass

    def _write(self, batch: TupleBatch, epoch: int) -> None:
        self.sink.append(batch, epoch=epoch)

    def handle_deliver(self, msg: m.OutputFrame) -> m.Level0Ack:
        arrived = self.clock()
        with self.lock:
            return self.inbound.receive(msg, arrived)

    def handle_takeover(self, msg: m.TakeoverRequest) -> m.TakeoverReply:
        """Step 3 of recovery, Nd's side (DeliveryInbound.take_over)."""
        with self.lock:
            return self.inbound.take_over(msg)

    def snapshot(self) -> dict:
        s = super().snapshot()
        s.update(self.inbound.status())
        return s

    def stop(self, join_timeout: float = 5.0) -> None:
        super().stop(join_timeout)
        self.sink.close()
