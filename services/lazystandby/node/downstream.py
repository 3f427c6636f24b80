"""Nd: receives the output stream, drops anything it already holds, refuses stale epochs and gaps, and
answers every delivery with its Level-0 ack (the last output it holds)."""

from __future__ import annotations

from ..config import NodeConfig
from ..core import messages as m
from ..core.dedup import DeliveryDedup
from ..core.errors import NotThePrimary, UnknownEpoch
from ..core.recovery import PrimaryLease, TakeoverLog, TakeoverRecord
from ..core.roles import Role
from ..core.seq import StreamRegistry
from ..sinks.base import Sink
from .common import NodeBase


class DownstreamNode(NodeBase):
    """Nd. Its dedup state is the sink's last output, so it survives a restart."""

    def __init__(self, cfg: NodeConfig, sink: Sink, **kw) -> None:
        super().__init__(cfg, **kw)
        self.sink = sink
        self.registry = StreamRegistry(cfg.stream_names)
        self.dedup = DeliveryDedup(cfg.name, sink.last_delivered())
        self.fence = self.state.fence
        # The first primary runs in epoch 1 without a takeover; a restarted Nd resumes from the epoch its
        # sink recorded with its last output.
        self.state.become(Role.DOWNSTREAM, epoch=max(1, sink.last_epoch()))
        self.takeovers = TakeoverLog(cfg.name)
        # The node that delivers in the current epoch: the one whose takeover made it, or (in the first
        # epoch, or after a restart) the first that delivered in it.
        self.primary_node = ""
        # A standby's word on its primary counts for at most the detector's timeout (core.recovery.PrimaryLease).
        self.lease = PrimaryLease(cfg.lease_s, unheard_max=cfg.heartbeat_timeout)
        self.first_delivery_after_takeover: float | None = None

    def start(self) -> None:
        pass

    def handle_deliver(self, msg: m.OutputFrame) -> m.Level0Ack:
        arrived = self.clock()
        with self.lock:
            self.fence.check(msg.epoch, sender=msg.sender, what="delivery")
            if self.fence.is_newer(msg.epoch):
                raise UnknownEpoch(f"{self.name}: delivery from {msg.sender} in epoch {msg.epoch}; Nd is in epoch "
                                   f"{self.fence.epoch} and only a takeover moves it (the sender announces itself)")
            if not self.primary_node:
                self.primary_node = msg.sender
            elif msg.sender != self.primary_node:
                raise NotThePrimary(f"{self.name}: delivery from {msg.sender} refused; {self.primary_node} is the "
                                    f"primary of epoch {self.fence.epoch}")
            self.lease.arrived(arrived)
            batch = msg.batch
            if batch is not None:
                adm = self.dedup.admit(batch.first, len(batch))
                self.registry.check_ids(batch.streams, batch.seqs, node=self.name)
                if adm.skip:
                    self.counters["duplicates_dropped"] += adm.skip
                if adm.take:
                    self.sink.append(batch.slice(batch.first + adm.skip, batch.end), epoch=self.fence.epoch)
                    self.dedup.delivered(batch.last)
                    self.counters["delivered_tuples"] += adm.take
                    last = self.takeovers.last
                    if last is not None and self.first_delivery_after_takeover is None:
                        self.first_delivery_after_takeover = self.clock()
                        last.facts["first_delivery_ms"] = (self.clock() - last.at) * 1000
            # Renewed again once the frame is handled: the primary waits for this reply before it sends its
            # next frame, so the time the sink took (a results topic's flush, a busy machine) is Nd's, not a
            # silence of the primary's. Renewed at arrival alone, a takeover queued behind a slow flush found
            # a lease that had lapsed while the primary was being served, and deposed it.
            self.lease.renew(self.clock())
            if msg.leaving and not self.lease.released:
                # Its last frame: the standby may take over at once, not only after the lease has run out.
                self.lease.release()
                self.counters["lease_released"] += 1
                self.log.info("%s: %s hands over (its last frame in epoch %d, through output %d); its lease "
                              "ends", self.name, msg.sender, msg.epoch, self.dedup.delivered_through)
            return m.Level0Ack(epoch=self.fence.epoch, received_through=self.dedup.delivered_through)

    def handle_takeover(self, msg: m.TakeoverRequest) -> m.TakeoverReply:
        """Step 3 of recovery, Nd's side: from now on refuse the old epoch; say what is held. Declined
        (PrimaryAlive) while the primary in force holds its lease."""
        with self.lock:
            retry = self.takeovers.check(self.fence, msg.epoch, msg.node)
            now = self.clock()
            if retry is None and self.primary_node:
                self.lease.check(now, node=msg.node, primary=self.primary_node, receiver=self.name,
                                 unheard=msg.primary_unheard_ms / 1000)
            heard, handed_over = self.lease.renewed_at, self.lease.released
            self.fence.advance(msg.epoch)
            self.primary_node = msg.node
            self.lease.grant(now)
            if retry is None:
                # How long the deposed primary had been silent at Nd: a takeover well inside the detector's
                # timeout of it would mean the standby suspected a primary that was still delivering.
                facts = {"delivered_through": self.dedup.delivered_through,
                         "primary_silent_ms": None if heard is None else round((now - heard) * 1000, 1),
                         "handed_over": handed_over}
                self.takeovers.add(TakeoverRecord(msg.epoch, msg.node, now, facts=facts))
                self.first_delivery_after_takeover = None
                self.counters["takeovers"] += 1
            return m.TakeoverReply(epoch=self.fence.epoch, delivered_through=self.dedup.delivered_through)

    def snapshot(self) -> dict:
        s = super().snapshot()
        s.update({"delivered_through": self.dedup.delivered_through, "takeovers": self.takeovers.as_status(),
                  "primary_node": self.primary_node,
                  "primary_longest_silence_ms": round(self.lease.longest_gap * 1000, 1),
                  "takeover_lease_ms": round(self.lease.duration * 1000, 1)})
        return s

    def stop(self, join_timeout: float = 5.0) -> None:
        super().stop(join_timeout)
        self.sink.close()
