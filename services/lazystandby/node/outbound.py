"""The outbound link: a queue of tuples in one link order (OQu), every tuple pushed at once to the receiving
primary, the backup shipped to its standby in Bsize batches (Algorithm 1), OQu trimmed by the primary's
Level-1 acks (Algorithm 4), and the resend from a position when the standby takes over (step 5).

A part a node composes (`node.outbound`), holding the sender's state: OQu, the Level-1 checkpoint, the
standby in place, the Bsize tuning, the takeovers it answered, the commit latency. Its own parts are the push
link (node/push_link.py: OQu -> primary) and the backup link (node/backup_link.py: OQu -> standby), which
read it as their `Pusher` and `Sender`. What fills OQu is the node's (`Feed`): Nu's source and intake.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..config import NodeConfig
from ..core import messages as m
from ..core.acks import Checkpoint
from ..core.errors import NotThePrimary, PeerError, PermissionDenied, SequenceGap, SourceUnavailable, StandbyInPlace
from ..core.queues import KeyedQueue
from ..core.recovery import TakeoverLog, TakeoverRecord, resend_start
from ..core.tuples import TupleBatch
from ..core.windows import trimmable_through
from ..sources.base import Membership
from ..stats import LATENCY_BOUNDS, Buckets, RecentWindow
from ..transport.peer import Peer
from .backup_link import BackupLink
from .bsize_tuning import BsizeTuning
from .push_link import PushLink

if TYPE_CHECKING:
    from .common import NodeBase


class Feed(Protocol):
    """What the outbound link reads and calls of what fills its queue; all of it holding the node's lock
    but `record_membership`, which may block on a durable write."""

    @property
    def windowed(self) -> bool:
        """Whether a node rebuilds windows from the inputs before its checkpoint (a window query)."""
    def needed_from(self, through: int) -> int | None:
        """The first input a result not yet delivered at `through` depends on (None: none)."""
    def params_at(self, pos: int) -> m.Params | None: ...
    def forget_params(self, trimmed: int) -> None: ...
    def covered(self, checkpoint: Checkpoint, members: Membership, trimmed_through: int) -> None: ...
    def record_membership(self, members: Membership) -> None: ...
    def standby_registered(self) -> None: ...


class OutboundLink:
    """OQu to the primary in force and its standby. Three of the node's loops are its links': `primary`
    (PushLink.loop), `backup` (BackupLink.loop) and `probe` (BackupLink.probe_loop)."""

    def __init__(self, cfg: NodeConfig, node: NodeBase, feed: Feed, peers: Callable[[str], Peer]) -> None:
        self.cfg = cfg
        self.n = node
        self.feed = feed
        self.peers = peers
        self.oqu = KeyedQueue(f"{cfg.name} OQu", capacity=cfg.oq_capacity)
        self.standby: Peer | None = peers(cfg.standby) if cfg.standby else None
        self.tuning = BsizeTuning(cfg)  # the links' costs and the Bsize for recovery_target_ms
        self.checkpoint = Checkpoint()
        self.backup = BackupLink(cfg, self, node.log)
        self.push = PushLink(cfg, self, peers, node.log)
        self.takeovers = TakeoverLog(cfg.name)
        self._admitted: deque[tuple[int, float]] = deque()
        self.e2e_seconds = Buckets(LATENCY_BOUNDS)
        self.e2e_recent = RecentWindow()
        self._committed_through = 0  # the last position whose commit latency was observed
        if self.standby is not None:
            node.links.ok("standby", self.standby.address)  # alive until a call says otherwise

    # --- the node's, as the links read it (Pusher, Sender) ----------------------------------------------
    @property
    def name(self) -> str:
        return self.n.name

    @property
    def lock(self) -> threading.Condition:
        return self.n.lock

    @property
    def counters(self):
        return self.n.counters

    @property
    def stopped(self) -> bool:
        return self.n.stopped

    @property
    def epoch(self) -> int:
        return self.n.state.fence.epoch

    def clock(self) -> float:
        return self.n.clock()

    def sleep(self, seconds: float) -> None:
        self.n.sleep(seconds)

    def params_at(self, pos: int) -> m.Params | None:
        return self.feed.params_at(pos)

    def primary_link(self, address: str, error: PeerError | None) -> None:
        """A push to the primary at `address` came back (`error` None) or failed."""
        self.n.links.note("primary", address, error)

    def standby_link(self, address: str, error: PeerError | None) -> None:
        """A call to the standby at `address` came back (`error` None) or failed."""
        self.n.links.note("standby", address, error)

    def tuple_bytes(self) -> float:
        """The mean bytes of a tuple on the wire, from the pushes (0 before any)."""
        c = self.n.counters
        return c["primary_bytes"] / c["primary_tuples"] if c["primary_tuples"] else 0.0

    def resend_floor(self) -> int:
        """Holding the lock: the first position a takeover would be resent, whatever it asks."""
        return self._resend_start(0)

    # --- the queue ----------------------------------------------------------------------------------------
    def restore(self, held: TupleBatch, checkpoint: Checkpoint, epoch: int, primary: str,
                standby: str | None) -> None:
        """A restarted node: OQu starts at the trim point its feed recorded (`held.first - 1`), with the
        checkpoint, epoch, primary and standby it had; the receivers are asked where they are before
        anything is sent (they may hold more than the checkpoint)."""
        trimmed = held.first - 1
        self.oqu = KeyedQueue(f"{self.cfg.name} OQu", capacity=self.cfg.oq_capacity, start=trimmed)
        self.oqu.append(held)
        self._committed_through = self.oqu.last  # restored tuples have no admission time to measure from
        self.checkpoint = checkpoint
        self.n.state.fence.advance(epoch)
        self.push.restored(primary)
        if standby is None:
            standby = self.cfg.standby if primary != self.cfg.standby else ""
        if (self.standby.address if self.standby else "") != standby:
            self.standby = self.peers(standby) if standby else None
        self.backup.restored(trimmed)

    def room(self) -> tuple[int, str]:
        """Holding the lock: how many more tuples may enter OQu now, and when none, the counter that says
        which of OQu, the backup, the standby's backlog or the primary holds them back."""
        oqu_room, backup_room, replay_room = self.oqu.room(), self.backup.room(), self.backup.replay_room()
        room = min(oqu_room, backup_room, replay_room, self.push.room())
        why = ("" if room else "source_blocked" if oqu_room == 0 else
               "source_waited_for_backup" if backup_room == 0 else
               "source_waited_for_replay" if replay_room == 0 else "source_waited_for_primary")
        return room, why

    def append(self, batch: TupleBatch) -> None:
        """Holding the lock: `batch` enters OQu at its head; its commit latency is timed from now."""
        self.oqu.append(batch)
        self._admitted.append((batch.last, self.clock()))
        self.n.lock.notify_all()

    def trim(self) -> None:
        """Algorithm 4's trim of OQu to the Level-1 ack, but, while the backup is bounded, never past what
        has been cut into batches: otherwise a fast primary path trims tuples before the backup thread cuts
        them, the standby never gets them, and a standby that cannot keep up passes for a cheap one."""
        through = self._covered_through()
        if self.backup.bounded():
            through = min(through, max(self.backup.batcher.batched_through, self.oqu.trimmed_through))
        self.n.counters["trimmed_tuples"] += self.oqu.trim(through)
        self.feed.forget_params(self.oqu.trimmed_through)

    def _covered_through(self) -> int:
        """Holding the lock: the last position nobody needs again: the Level-1 point, and for a window query
        no further than before the first input a result not yet delivered depends on (a node that resumes at
        the checkpoint rebuilds those windows from OQu; core/windows.trimmable_through)."""
        through = self.checkpoint.input_pos
        if self.feed.windowed:
            through = trimmable_through(through, self.feed.needed_from(through), None)
        return through

    def skip_point(self) -> int:
        """Holding the lock: the last position a standby or a new primary may be skipped past without being
        sent it. For a selection the checkpoint (Nd holds those inputs' outputs); for a window query the
        trim point, since a node rebuilds the windows open at the checkpoint from every input Nu holds."""
        return self.oqu.trimmed_through if self.feed.windowed else self.checkpoint.input_pos

    def level1(self, epoch: int, ack: Checkpoint) -> None:
        """Algorithm 4: drop from OQu every tuple at or below the Level-1 ack."""
        if epoch != self.epoch or ack.input_pos <= self.checkpoint.input_pos:
            return
        if ack.input_pos > self.oqu.last:
            self.n.counters["level1_beyond_head"] += 1
            return
        self.checkpoint = ack
        self.trim()
        # End-to-end commit latency: admitted into OQu -> covered by a Level-1 ack (its outputs are in Nd).
        now = self.clock()
        while self._admitted and self._admitted[0][0] <= ack.input_pos:
            last, at = self._admitted.popleft()
            self.e2e_seconds.observe(now - at)
            self.e2e_recent.observe(now - at, last - self._committed_through)
            self._committed_through = last
        self.feed.covered(self.checkpoint, self.membership(), self.skip_point())

    def membership(self) -> Membership:
        return Membership(self.epoch, self.push.address, self.standby.address if self.standby else "")

    # --- failover and membership -----------------------------------------------------------------------
    def handle_takeover(self, msg: m.TakeoverRequest) -> m.TakeoverReply:
        """Step 5 of recovery, the sender's side: fence the old primary, stop the backup, rewind the cursor.
        The takeover is made durable where the feed's restart state lives before the link answers, so a
        node restarted right after it still knows the new primary and epoch."""
        old = None
        with self.n.lock:
            record = self.takeovers.retry_of(msg.epoch, msg.node)
            if record is None and self._announcement(msg):
                return self._announced(msg)
            if record is None:
                self._check_takeover(msg)
                old = self.push.peer
                record = self._take_over(msg)
            members = self.membership()
        if old is not None:
            old.close()
        if not record.facts.get("durable"):
            try:
                self.feed.record_membership(members)
            except Exception as e:  # the standby retries; the retry finds this record and tries again
                raise SourceUnavailable(f"{self.name}: takeover by {msg.node} in epoch {msg.epoch} accepted but "
                                        f"not yet durable: {e}") from None
            record.facts["durable"] = True
        return record.reply  # type: ignore[return-value]

    def _announcement(self, msg: m.TakeoverRequest) -> bool:
        """A Takeover into the current epoch that no other node won here, not from this link's standby (a
        standby must bring a newer epoch): the primary of that epoch announcing itself."""
        standby = self.standby.address if self.standby is not None else None
        return (msg.epoch == self.epoch and msg.address != standby
                and not self.takeovers.won_by_other(msg.epoch, msg.node))

    def _announced(self, msg: m.TakeoverRequest) -> m.TakeoverReply:
        """Holding the lock: the primary of this epoch announces itself: this node restarted and already
        knows it, from the takeover it recorded (a standby retrying a takeover whose answer died with the
        last node comes here too). Resent as a takeover would be: a stateful node takes a resend_from past
        what it holds for a rebuild, and would drop its state."""
        if msg.address != self.push.address:
            # Not stale (that would fence the sender): the primary of this epoch may well be the sender, known
            # here by another address (a name against an IP, NAT, a relay). Nothing changes.
            raise NotThePrimary(f"{self.name}: {msg.node} announced itself as the primary of epoch {msg.epoch} "
                                f"at {msg.address}, but this Nu pushes that epoch to {self.push.address}; if they "
                                f"are one node, set its advertise to {self.push.address}")
        start = self._resend_start(msg.resend_from)
        self.push.cursor = start
        return m.TakeoverReply(epoch=msg.epoch, checkpoint=self.checkpoint, head_pos=self.oqu.last,
                               resend_from=start, params=self.feed.params_at(self.checkpoint.input_pos))

    def _resend_start(self, requested: int) -> int:
        """Holding the lock: the first position a node that asks from `requested` is resent (step 5)."""
        return resend_start(requested, self.checkpoint,
                            rebuild_from=self.skip_point() + 1 if self.feed.windowed else None)

    def _check_takeover(self, msg: m.TakeoverRequest) -> None:
        """A new takeover: a newer epoch (else StaleEpoch), from the standby this link knows, asking for
        positions it can have (a standby claiming more than was ever held was fed a forged checkpoint)."""
        self.takeovers.check(self.n.state.fence, msg.epoch, msg.node)
        if self.standby is not None and msg.address != self.standby.address:
            raise PermissionDenied(f"{self.name}: takeover by {msg.node} at {msg.address} refused; this Nu's "
                                   f"standby is {self.standby.address}")
        if msg.resend_from > self.oqu.last + 1:
            raise SequenceGap(f"{self.name}: takeover by {msg.node} asks to resend from position {msg.resend_from}; "
                              f"this Nu holds positions up to {self.oqu.last}")

    def _take_over(self, msg: m.TakeoverRequest) -> TakeoverRecord:
        self.n.state.fence.advance(msg.epoch)
        self.standby = None
        self.backup.standby_gone()
        self.trim()
        self.n.links.forget("standby")
        self.n.links.forget("primary")
        start = self._resend_start(msg.resend_from)
        self.push.moved_to(msg.address, start)
        resent = max(0, self.oqu.last - start + 1)
        self.n.counters["resent_tuples"] += resent
        self.n.counters["takeovers"] += 1
        reply = m.TakeoverReply(epoch=msg.epoch, checkpoint=self.checkpoint, head_pos=self.oqu.last,
                                resend_from=start, params=self.feed.params_at(self.checkpoint.input_pos))
        self.n.log.warning("%s: %s took over as primary in epoch %d; resending %d tuples from %d",
                           self.name, msg.node, msg.epoch, resent, start)
        self.n.lock.notify_all()
        return self.takeovers.add(TakeoverRecord(msg.epoch, msg.node, self.clock(), reply, {"resent": resent}))

    def handle_register_standby(self, msg: m.RegisterStandby) -> m.RegisterStandbyReply:
        """A standby (re)joins: the first call asks where it stands (a resync), and batching goes on from
        there, or from the trim point for an empty one. A standby is not always empty when it registers:
        the sender feeds the standby its configuration names from the start, and one that started first
        (its registration refused until the sender listened) may hold many positions when it gets through;
        taken as empty, it would be sent them again, decode them, and refuse them as repeats.

        A standby at another address than the one in place is refused (StandbyInPlace) while that one is
        in sync and answers a Status call (`BackupLink.standby_answers`, made without the lock)."""
        with self.n.lock:
            current = self.standby
        if current is not None and current.address != msg.address and self.backup.standby_answers(current):
            with self.n.lock:
                if self.standby is current and self.backup.in_sync() and self.n.links.alive("standby"):
                    self.n.counters["standby_registrations_refused"] += 1
                    raise StandbyInPlace(f"{self.name}: standby {current.address} is registered, in sync and "
                                         f"answering; {msg.node} at {msg.address} is not taken in its place")
        with self.n.lock:
            new = self.standby is None or self.standby.address != msg.address
            if new:
                if self.standby is not None:
                    self.standby.close()
                self.standby = self.peers(msg.address)
            # The same address keeps its channel and its call in flight, whose answer stands: the standby
            # judges each call itself, and one restarted empty refuses it (an error, then a resync). Voided
            # at the registration of a standby fed since the sender started, the call's batches would
            # already be trimmed from OQu, and the resync would skip it to a checkpoint past tuples it never got.
            self.n.links.ok("standby", msg.address)
            self.backup.registered(new=new)
            self.n.counters["standby_registrations"] += 1
            self.feed.standby_registered()
            self.feed.covered(self.checkpoint, self.membership(), self.skip_point())
            self.n.lock.notify_all()
            return m.RegisterStandbyReply(epoch=self.epoch, primary_address=self.push.address)

    def status(self) -> dict:
        """Holding the lock: the link's part of the node's status."""
        c = self.n.counters
        return {
            "head": self.oqu.last,
            "trimmed_through": self.oqu.trimmed_through,
            "oqu_depth": len(self.oqu),
            **self.backup.status(),
            # In sync: registered, no backup call unanswered past backup_stall_max, and its link up (a killed
            # standby's calls fail at once, with no call left waiting to count it out of sync).
            "standby_in_sync": (self.standby is not None and self.backup.out_of_sync_since is None
                                and self.n.links.alive("standby")),
            "cursor": self.push.cursor,
            "checkpoint": [self.checkpoint.input_pos, self.checkpoint.output_count],
            "primary": self.push.address,
            "standby": self.standby.address if self.standby else "",
            **self.tuning.status(self.backup.bsize),
            "codec": self.cfg.codec,
            "e2e_commit_p50_ms": round(self.e2e_recent.quantile(0.5) * 1000, 2),
            "e2e_commit_p99_ms": round(self.e2e_recent.quantile(0.99) * 1000, 2),
            "overhead": c["backup_bytes"] / c["primary_bytes"] if c["primary_bytes"] else 0.0,
            "compression_ratio": (c["backup_payload_bytes"] / c["backup_raw_bytes"]
                                  if c["backup_raw_bytes"] else 1.0),
            "takeovers": self.takeovers.as_status(),
        }
