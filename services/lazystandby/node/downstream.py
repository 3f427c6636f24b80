"""Nd: receives the output stream, drops anything it already holds, refuses stale epochs and gaps, and
answers every delivery with its Level-0 ack (the last output it holds)."""

from __future__ import annotations

from ..config import NodeConfig
from ..core import tuples
from ..core.dedup import DeliveryDedup
from ..core.roles import EpochFence, Role
from ..core.seq import CorruptBatch, StaleEpoch, StreamRegistry
from ..sinks.base import Sink
from ..v1 import lazystandby_pb2 as pb
from .common import NodeBase


class DownstreamNode(NodeBase):
    """Nd. Its dedup state is the sink's last output, so it survives a restart."""

    def __init__(self, cfg: NodeConfig, sink: Sink, **kw) -> None:
        super().__init__(cfg, **kw)
        self.sink = sink
        self.registry = StreamRegistry(cfg.stream_names)
        self.dedup = DeliveryDedup(cfg.name, sink.last_delivered())
        self.fence = EpochFence(cfg.name)
        self.state.become(Role.DOWNSTREAM)
        self.takeovers: list[dict] = []
        self.first_delivery_after_takeover: float | None = None

    def start(self) -> None:
        pass

    def handle_deliver(self, msg: pb.OutputFrame) -> pb.Level0Ack:
        with self.lock:
            self.fence.admit(msg.epoch, sender=msg.sender, what="delivery")
            self.state.epoch = self.fence.epoch
            if msg.count:
                adm = self.dedup.admit(msg.first_oseq, msg.count)
                batch = tuples.decode(msg.tuples, what=f"{self.name}: output frame {msg.first_oseq}")
                if batch.first != msg.first_oseq or len(batch) != msg.count:
                    raise CorruptBatch(f"{self.name}: output frame says {msg.count} from {msg.first_oseq}; "
                                       f"its bytes hold {len(batch)} from {batch.first}")
                self.registry.check_ids(batch.streams, batch.seqs, node=self.name)
                if adm.skip:
                    self.counters["duplicates_dropped"] += adm.skip
                if adm.take:
                    self.sink.append(batch.slice(batch.first + adm.skip, batch.end))
                    self.dedup.delivered(batch.last)
                    self.counters["delivered_tuples"] += adm.take
                    if self.takeovers and self.first_delivery_after_takeover is None:
                        self.first_delivery_after_takeover = self.clock()
                        self.takeovers[-1]["first_delivery_ms"] = (self.clock() - self.takeovers[-1]["at"]) * 1000
            return pb.Level0Ack(epoch=self.fence.epoch, received_through=self.dedup.delivered_through)

    def handle_takeover(self, msg: pb.TakeoverRequest) -> pb.TakeoverReply:
        """Step 3 of recovery, Nd's side: from now on refuse the old epoch; say what is held."""
        with self.lock:
            retry = bool(self.takeovers) and self.takeovers[-1]["epoch"] == msg.epoch \
                and self.takeovers[-1]["node"] == msg.node
            if msg.epoch <= self.fence.epoch and not retry:
                # A takeover must bring a newer epoch, or it would not fence the primary it replaces.
                raise StaleEpoch(f"{self.name}: takeover by {msg.node} with epoch {msg.epoch}; "
                                 f"current epoch is {self.fence.epoch}")
            self.fence.admit(msg.epoch, sender=msg.node, what="takeover")
            self.state.epoch = self.fence.epoch
            if not self.takeovers or self.takeovers[-1]["epoch"] != msg.epoch:
                self.takeovers.append({"epoch": msg.epoch, "node": msg.node, "at": self.clock(),
                                       "delivered_through": self.dedup.delivered_through})
                self.first_delivery_after_takeover = None
                self.counters["takeovers"] += 1
            return pb.TakeoverReply(epoch=self.fence.epoch, delivered_through=self.dedup.delivered_through)

    def snapshot(self) -> dict:
        s = super().snapshot()
        s.update({"delivered_through": self.dedup.delivered_through, "takeovers": self.takeovers})
        return s

    def stop(self) -> None:
        super().stop()
        self.sink.close()
