"""Nd's inbound link: the output frames of the primary in force, fenced by epoch, deduplicated by output
position and answered with Level-0 acks (the last output held); and Nd's side of a takeover's step 3.

A part Nd composes (`node.inbound`), holding its own state: the dedup of output positions, the primary of
the current epoch, that primary's lease, the takeovers granted, and when the first delivery after the
last one came. It reads and calls of the node only its name, clock, fence, counters and log; what it
holds it writes through `write`, before the ack that says so. Its caller holds the node's lock.

Contract: a frame from a stale epoch, from a node that is not the primary of its epoch, or with a gap is
refused before anything is written; a repeat is dropped and acknowledged; `delivered_through` only grows,
and only once `write` has returned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..config import NodeConfig
from ..core import messages as m
from ..core.dedup import DeliveryDedup
from ..core.errors import NotThePrimary, UnknownEpoch
from ..core.recovery import PrimaryLease, TakeoverLog, TakeoverRecord
from ..core.seq import StreamRegistry
from ..core.tuples import TupleBatch

if TYPE_CHECKING:
    from .common import NodeBase


class DeliveryInbound:
    """The primary's frames into `write`, exactly once, and the takeovers that move the epoch."""

    def __init__(self, cfg: NodeConfig, node: NodeBase, *, delivered_through: int,
                 write: Callable[[TupleBatch, int], None]) -> None:
        """`delivered_through`: the last output the sink holds (a restarted Nd resumes there); `write(batch,
        epoch)`: makes the outputs of `batch` durable in the sink, in the epoch that delivered them."""
        self.n = node
        self.write = write
        self.registry = StreamRegistry(cfg.stream_names)
        self.dedup = DeliveryDedup(cfg.name, delivered_through)
        self.takeovers = TakeoverLog(cfg.name)
        # The node that delivers in the current epoch: the one whose takeover made it, or (in the first
        # epoch, or after a restart) the first that delivered in it.
        self.primary_node = ""
        # A standby's word on its primary counts for at most the detector's timeout (core.recovery.PrimaryLease).
        self.lease = PrimaryLease(cfg.lease_s, unheard_max=cfg.heartbeat_timeout)
        self.first_delivery_after_takeover: float | None = None

    @property
    def delivered_through(self) -> int:
        return self.dedup.delivered_through

    def receive(self, msg: m.OutputFrame, arrived: float) -> m.Level0Ack:
        """A frame that came at `arrived`: checked, its new outputs written, and the Level-0 ack."""
        n, fence = self.n, self.n.state.fence
        fence.check(msg.epoch, sender=msg.sender, what="delivery")
        if fence.is_newer(msg.epoch):
            raise UnknownEpoch(f"{n.name}: delivery from {msg.sender} in epoch {msg.epoch}; Nd is in epoch "
                               f"{fence.epoch} and only a takeover moves it (the sender announces itself)")
        if not self.primary_node:
            self.primary_node = msg.sender
        elif msg.sender != self.primary_node:
            raise NotThePrimary(f"{n.name}: delivery from {msg.sender} refused; {self.primary_node} is the "
                                f"primary of epoch {fence.epoch}")
        self.lease.arrived(arrived)
        if msg.batch is not None:
            self._hold(msg.batch, fence.epoch)
        # Renewed again once the frame is handled: the primary waits for this reply before it sends its
        # next frame, so the time the sink took (a results topic's flush, a busy machine) is Nd's, not a
        # silence of the primary's. Renewed at arrival alone, a takeover queued behind a slow flush found
        # a lease that had lapsed while the primary was being served, and deposed it.
        self.lease.renew(n.clock())
        if msg.leaving and not self.lease.released:
            # Its last frame: the standby may take over at once, not only after the lease has run out.
            self.lease.release()
            n.counters["lease_released"] += 1
            n.log.info("%s: %s hands over (its last frame in epoch %d, through output %d); its lease ends",
                       n.name, msg.sender, msg.epoch, self.dedup.delivered_through)
        return m.Level0Ack(epoch=fence.epoch, received_through=self.dedup.delivered_through)

    def _hold(self, batch: TupleBatch, epoch: int) -> None:
        """The outputs of `batch` not held yet, written; a repeat dropped and counted."""
        n = self.n
        adm = self.dedup.admit(batch.first, len(batch))
        self.registry.check_ids(batch.streams, batch.seqs, node=n.name)
        if adm.skip:
            n.counters["duplicates_dropped"] += adm.skip
        if not adm.take:
            return
        self.write(batch.slice(batch.first + adm.skip, batch.end), epoch)
        self.dedup.delivered(batch.last)
        n.counters["delivered_tuples"] += adm.take
        last = self.takeovers.last
        if last is not None and self.first_delivery_after_takeover is None:
            self.first_delivery_after_takeover = n.clock()
            last.facts["first_delivery_ms"] = (self.first_delivery_after_takeover - last.at) * 1000

    def take_over(self, msg: m.TakeoverRequest) -> m.TakeoverReply:
        """Step 3 of recovery, Nd's side: from now on refuse the old epoch; say what is held. Declined
        (PrimaryAlive) while the primary in force holds its lease."""
        n, fence = self.n, self.n.state.fence
        retry = self.takeovers.check(fence, msg.epoch, msg.node)
        now = n.clock()
        if retry is None and self.primary_node:
            self.lease.check(now, node=msg.node, primary=self.primary_node, receiver=n.name,
                             unheard=msg.primary_unheard_ms / 1000)
        heard, handed_over = self.lease.renewed_at, self.lease.released
        fence.advance(msg.epoch)
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
            n.counters["takeovers"] += 1
        return m.TakeoverReply(epoch=fence.epoch, delivered_through=self.dedup.delivered_through)

    def status(self) -> dict:
        return {"delivered_through": self.dedup.delivered_through, "takeovers": self.takeovers.as_status(),
                "primary_node": self.primary_node,
                "primary_longest_silence_ms": round(self.lease.longest_gap * 1000, 1),
                "takeover_lease_ms": round(self.lease.duration * 1000, 1)}
