"""Nu: numbers the source tuples into one link order, sends every tuple to the primary at once, ships the
backup to the standby in Bsize batches (Algorithm 1), and trims OQu by Level-1 acks (Algorithm 4).

Composed of parts, each with its own state: the intake (node/intake.py: records into the link order), the
push link (node/push_link.py: OQu -> primary), the backup link (node/backup_link.py: OQu -> standby) and
the Bsize tuning (node/bsize_tuning.py). Nu itself keeps OQu, the Level-1 checkpoint and the trim, and
answers takeovers and registrations. Four loops, one lock:
  source   source -> OQu; blocks when OQu is full (backpressure to the source, never an unbounded queue)
  primary  OQu[cursor..] -> primary in frames of up to frame_max tuples, flushed after linger_ms;
           each reply carries the primary's Level-1 ack
  backup   OQu[batched_through+1..] -> standby, Bsize tuples per batch, each compressed by the codec
  probe    the standby's link timed while the backup leaves it idle
"""

from __future__ import annotations

import resource
import time
from collections import deque
from collections.abc import Callable

from ..config import NodeConfig
from ..core import messages as m
from ..core.acks import Checkpoint
from ..core.errors import (
    NotThePrimary,
    PeerError,
    PermissionDenied,
    SequenceGap,
    SourceGap,
    SourceUnavailable,
    StandbyInPlace,
)
from ..core.queues import KeyedQueue
from ..core.recovery import TakeoverLog, TakeoverRecord, resend_start
from ..core.roles import Role
from ..core.windows import trimmable_through
from ..sources.base import DeadLetters, Membership, Source
from ..stats import LATENCY_BOUNDS, Buckets, RecentWindow
from ..transport.peer import Peer
from .backup_link import BackupLink
from .bsize_tuning import BsizeTuning
from .common import NodeBase
from .intake import Intake
from .push_link import PushLink


class UpstreamNode(NodeBase):
    """Nu. The first primary runs in epoch 1; each takeover raises it."""

    MAIN_LOOP = "source"

    def __init__(self, cfg: NodeConfig, source: Source, peers: Callable[[str], Peer],
                 dead_letters: DeadLetters | None = None, late_data: DeadLetters | None = None, **kw) -> None:
        super().__init__(cfg, **kw)
        self.source = source
        self.peers = peers
        self.dead_letters = dead_letters or DeadLetters()
        self.late_data = late_data or DeadLetters()
        self.intake = Intake(cfg, self.counters, well_formed=source.well_formed, dead_letters=self.dead_letters,
                             late_data=self.late_data)
        self.oqu = KeyedQueue(f"{cfg.name} OQu", capacity=cfg.oq_capacity)
        self.fence = self.state.fence
        self.state.become(Role.UPSTREAM, epoch=1)
        self.standby: Peer | None = peers(cfg.standby) if cfg.standby else None
        self.tuning = BsizeTuning(cfg)  # the links' costs and the Bsize for recovery_target_ms
        self.checkpoint = Checkpoint()
        self.backup = BackupLink(cfg, self, self.log)
        self.push = PushLink(cfg, self, peers, self.log)
        self.takeovers = TakeoverLog(cfg.name)
        self._admitted: deque[tuple[int, float]] = deque()
        self.e2e_seconds = Buckets(LATENCY_BOUNDS)
        self.e2e_recent = RecentWindow()
        self._committed_through = 0  # the last position whose commit latency was observed
        self.source_gap = ""
        # Until when the source waits for the standby's registration (`standby_wait`); None: it does not.
        self._standby_wait_until: float | None = None
        # Wall-clock time of start(): where a run's clock starts (the bench's per-second rates). The server
        # answers status before start(), and a harness polls it, so the first answer it gets is no start:
        # it may come before start() or after the first admission, tens of milliseconds either way.
        self.started_at: float | None = None
        # Wall-clock time of the first admission: where a run over records already in Kafka starts, as a
        # peer's run starts at its first record (bench.harness.kafka_throughput).
        self.first_admitted_at: float | None = None
        # This process's CPU seconds and minor page faults at start(): a run's CPU counted from the same
        # instant as its clock. Read from outside, they would start where the harness first looked.
        self.usage_at_start: tuple[float, int] | None = None
        restored = source.restore()
        self._restored = restored is not None
        if restored is not None:
            self._restore(restored)
        if self.standby is not None:
            self.links.ok("standby", self.standby.address)  # alive until a call says otherwise

    def _restore(self, r) -> None:
        """A restarted Nu: the same positions for the same tuples, the epoch and primary it had. OQu starts
        at the trim point the source recorded (`held.first - 1`), before the checkpoint for a window query."""
        trimmed = r.held.first - 1
        self.oqu = KeyedQueue(f"{self.cfg.name} OQu", capacity=self.cfg.oq_capacity, start=trimmed)
        self.oqu.append(r.held)
        self._committed_through = self.oqu.last  # restored tuples have no admission time to measure from
        self.checkpoint = r.checkpoint
        self.fence.advance(r.epoch)
        self.push.restored(r.primary)
        standby = r.standby if r.standby is not None else (self.cfg.standby if r.primary != self.cfg.standby else "")
        if (self.standby.address if self.standby else "") != standby:
            self.standby = self.peers(standby) if standby else None
        self.intake.restore(r.held, r.last_seqs, r.params)
        self.backup.restored(trimmed)
        # Ask the receivers where they are before sending: they may hold more than the checkpoint.
        self.counters["restored_tuples"] = len(r.held)
        self.log.warning("%s: restored at checkpoint %s with %d tuples held, epoch %d, primary %s",
                         self.name, r.checkpoint, len(r.held), self.fence.epoch, self.push.address)

    def start(self) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self.usage_at_start = (usage.ru_utime + usage.ru_stime, usage.ru_minflt)
        self.started_at = time.time()
        self._hold_source_for_standby()
        self.dead_letters.open()  # the dead-letter topic's record limit, read now rather than at the first one
        if self.intake.placer is not None:
            self.late_data.open()
        self.spawn("source", self._source_loop)
        self.spawn("primary", self.push.loop)
        self.spawn("backup", self.backup.loop)
        self.spawn("probe", self.backup.probe_loop)

    # --- source -> OQu ---------------------------------------------------------------------------------
    def inject_control(self, payload: bytes) -> None:
        """Queue an in-band control tuple (operator parameter change) to enter at the next position."""
        with self.lock:
            self.intake.inject_control(payload)

    def _source_loop(self) -> None:
        if self.source_gap:
            self.sleep(0.5)  # everything before the gap still flows, is backed up and acknowledged
            return
        with self.lock:
            if self._waiting_for_standby():
                self.lock.wait(0.01)
                return
            oqu_room, backup_room = self.oqu.room(), self.backup.room()
            room = min(oqu_room, backup_room, self.push.room())
            if room == 0:
                why = ("source_blocked" if oqu_room == 0 else
                       "source_waited_for_backup" if backup_room == 0 else "source_waited_for_primary")
                self.counters[why] += 1
                self.lock.wait(0.05)
                return
        want = min(room, self.cfg.frame_max)
        polled_at = time.monotonic()
        try:
            records = self.source.poll(want)
        except SourceGap as e:
            self.source_gap = str(e)
            self.counters["source_gaps"] += 1
            self.log.error("%s: source gap, admission stopped: %s", self.name, e)
            return
        with self.lock:
            batch = self.intake.admit(records, self.oqu.last + 1)
        # The poll's dead letters and late ticks are written before its link order: a restarted Nu reads on
        # after the last poll logged, so what a poll left out of the link order must be in Kafka by then (a
        # Nu killed in between writes them again: they are at least once, by key).
        self.dead_letters.flush()  # never raises: what cannot be written is counted
        self.late_data.flush()
        if len(batch):
            # Durable link order before the tuples exist anywhere else (a restarted Nu replays it).
            self.source.record_order(batch, self.intake.registry.names_by_id)
        self.counters["dead_letters_unwritten"] = self.dead_letters.unwritten
        self.counters["dead_letters_truncated"] = self.dead_letters.truncated
        with self.lock:
            if len(batch):
                if self.first_admitted_at is None:
                    self.first_admitted_at = time.time()
                self.oqu.append(batch)
                self._admitted.append((batch.last, self.clock()))
                self.counters["source_tuples"] += len(batch)
                self.lock.notify_all()
        if not records:
            self.sleep(0.0005 if not self.source.exhausted else 0.01)
        elif len(records) < want and not self.source.exhausted:
            # The source had no more: polled again at once, it would hand over the few tuples made since,
            # and each poll and admission costs the same for 50 tuples as for 5,000 (paced at 500,000 a
            # second, Nu spent half its time there). Like a link's frame, the next poll waits linger_ms.
            rest = self.cfg.linger_ms / 1000 - (time.monotonic() - polled_at)
            if rest > 0:
                self.sleep(rest)

    def _hold_source_for_standby(self) -> None:
        """At a fresh start with a standby configured, the source admits nothing until the standby registers
        or standby_wait passes. A restarted Nu does not wait: its standby registered with the Nu before it,
        and will not again."""
        with self.lock:
            if (self.cfg.standby_wait and self.standby is not None and not self._restored
                    and not self.counters["standby_registrations"]):
                self._standby_wait_until = self.clock() + self.cfg.standby_wait

    def _waiting_for_standby(self) -> bool:
        """Holding the lock: whether a fresh Nu still holds its source for the standby's registration
        (`standby_wait`). Past the deadline it admits without it, and says so once: the standby gets the
        backlog, as any late one does, when it registers."""
        until = self._standby_wait_until
        if until is None:
            return False
        if self.clock() < until:
            self.counters["source_waited_for_standby"] += 1
            return True
        self._standby_wait_until = None
        self.log.warning("%s: standby %s did not register within standby_wait (%.1f s): admitting without "
                         "waiting for it", self.name, self.standby.address if self.standby else "",
                         self.cfg.standby_wait)
        return False

    def trim(self) -> None:
        """Algorithm 4's trim of OQu to the Level-1 ack, but, while the backup is bounded, never past what
        has been cut into batches: otherwise a fast primary path trims tuples before the backup thread cuts
        them, the standby never gets them, and a standby that cannot keep up passes for a cheap one."""
        through = self._covered_through()
        if self.backup.bounded():
            through = min(through, max(self.backup.batcher.batched_through, self.oqu.trimmed_through))
        self.counters["trimmed_tuples"] += self.oqu.trim(through)
        self.intake.forget_params(self.oqu.trimmed_through)

    def _covered_through(self) -> int:
        """Holding the lock: the last position nobody needs again: the Level-1 point, and for a window query
        no further than before the first input a result not yet delivered depends on (a node that resumes at
        the checkpoint rebuilds those windows from OQu; core/windows.trimmable_through)."""
        through = self.checkpoint.input_pos
        placer = self.intake.placer
        if placer is not None:
            through = trimmable_through(through, placer.needed_from(through), None)
        return through

    def skip_point(self) -> int:
        """Holding the lock: the last position a standby or a new primary may be skipped past without being
        sent it. For a selection the checkpoint (Nd holds those inputs' outputs); for a window query the
        trim point, since a node rebuilds the windows open at the checkpoint from every input Nu holds."""
        return self.checkpoint.input_pos if self.intake.placer is None else self.oqu.trimmed_through

    def level1(self, epoch: int, ack: Checkpoint) -> None:
        """Algorithm 4: drop from OQu every tuple at or below the Level-1 ack."""
        if epoch != self.fence.epoch or ack.input_pos <= self.checkpoint.input_pos:
            return
        if ack.input_pos > self.oqu.last:
            self.counters["level1_beyond_head"] += 1
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
        self.source.covered(self.checkpoint, self._membership(), self.skip_point())

    # --- what the backup link reads (node/backup_link.Sender) --------------------------------------------
    @property
    def epoch(self) -> int:
        return self.fence.epoch

    def tuple_bytes(self) -> float:
        """The mean bytes of a tuple on the wire, from the pushes (0 before any)."""
        c = self.counters
        return c["primary_bytes"] / c["primary_tuples"] if c["primary_tuples"] else 0.0

    def resend_floor(self) -> int:
        """Holding the lock: the first position a takeover would be resent, whatever it asks."""
        return self._resend_start(0)

    def params_at(self, pos: int) -> m.Params | None:
        return self.intake.params_at(pos)

    def primary_link(self, address: str, error: PeerError | None) -> None:
        """A push to the primary at `address` came back (`error` None) or failed."""
        self.links.note("primary", address, error)

    def standby_link(self, address: str, error: PeerError | None) -> None:
        """A call to the standby at `address` came back (`error` None) or failed."""
        self.links.note("standby", address, error)

    # --- failover and membership -----------------------------------------------------------------------
    def handle_takeover(self, msg: m.TakeoverRequest) -> m.TakeoverReply:
        """Step 5 of recovery, Nu's side: fence the old primary, stop the backup, rewind the cursor. The
        takeover is made durable where Nu's restart state lives before Nu answers, so a Nu restarted right
        after it still knows the new primary and epoch."""
        old = None
        with self.lock:
            record = self.takeovers.retry_of(msg.epoch, msg.node)
            if record is None and self._announcement(msg):
                if msg.address != self.push.address:
                    # Not stale (that would fence the sender): the primary of this epoch may well be the sender,
                    # known here by another address (a name against an IP, NAT, a relay). Nothing changes.
                    raise NotThePrimary(f"{self.name}: {msg.node} announced itself as the primary of epoch "
                                        f"{msg.epoch} at {msg.address}, but this Nu pushes that epoch to "
                                        f"{self.push.address}; if they are one node, set its advertise to "
                                        f"{self.push.address}")
                # The primary of this epoch announcing itself: this Nu restarted and already knows it, from
                # the takeover it recorded (a standby retrying a takeover whose answer died with the last Nu
                # comes here too). Resent as a takeover would be: a stateful node takes a resend_from past what
                # it holds for a rebuild, and would drop its state.
                start = self._resend_start(msg.resend_from)
                self.push.cursor = start
                return m.TakeoverReply(epoch=msg.epoch, checkpoint=self.checkpoint, head_pos=self.oqu.last,
                                       resend_from=start, params=self.intake.params_at(self.checkpoint.input_pos))
            if record is None:
                self._check_takeover(msg)
                old = self.push.peer
                record = self._take_over(msg)
            members = self._membership()
        if old is not None:
            old.close()
        if not record.facts.get("durable"):
            try:
                self.source.record_membership(members)
            except Exception as e:  # the standby retries; the retry finds this record and tries again
                raise SourceUnavailable(f"{self.name}: takeover by {msg.node} in epoch {msg.epoch} accepted but "
                                        f"not yet durable: {e}") from None
            record.facts["durable"] = True
        return record.reply  # type: ignore[return-value]

    def _announcement(self, msg: m.TakeoverRequest) -> bool:
        """A Takeover into the current epoch that no other node won here, not from this Nu's standby (a
        standby must bring a newer epoch): the primary of that epoch announcing itself."""
        standby = self.standby.address if self.standby is not None else None
        return (msg.epoch == self.fence.epoch and msg.address != standby
                and not self.takeovers.won_by_other(msg.epoch, msg.node))

    def _resend_start(self, requested: int) -> int:
        """Holding the lock: the first position a node that asks from `requested` is resent (step 5)."""
        return resend_start(requested, self.checkpoint,
                            rebuild_from=None if self.intake.placer is None else self.skip_point() + 1)

    def _check_takeover(self, msg: m.TakeoverRequest) -> None:
        """A new takeover: a newer epoch (else StaleEpoch), from the standby this Nu knows, asking for
        positions this Nu can have (a standby claiming more than Nu ever held was fed a forged checkpoint)."""
        self.takeovers.check(self.fence, msg.epoch, msg.node)
        if self.standby is not None and msg.address != self.standby.address:
            raise PermissionDenied(f"{self.name}: takeover by {msg.node} at {msg.address} refused; this Nu's "
                                   f"standby is {self.standby.address}")
        if msg.resend_from > self.oqu.last + 1:
            raise SequenceGap(f"{self.name}: takeover by {msg.node} asks to resend from position {msg.resend_from}; "
                              f"this Nu holds positions up to {self.oqu.last}")

    def _take_over(self, msg: m.TakeoverRequest) -> TakeoverRecord:
        self.fence.advance(msg.epoch)
        self.standby = None
        self.backup.standby_gone()
        self.trim()
        self.links.forget("standby")
        self.links.forget("primary")
        start = self._resend_start(msg.resend_from)
        self.push.moved_to(msg.address, start)
        resent = max(0, self.oqu.last - start + 1)
        self.counters["resent_tuples"] += resent
        self.counters["takeovers"] += 1
        reply = m.TakeoverReply(epoch=msg.epoch, checkpoint=self.checkpoint, head_pos=self.oqu.last,
                                resend_from=start, params=self.intake.params_at(self.checkpoint.input_pos))
        self.log.warning("%s: %s took over as primary in epoch %d; resending %d tuples from %d",
                         self.name, msg.node, msg.epoch, resent, start)
        self.lock.notify_all()
        return self.takeovers.add(TakeoverRecord(msg.epoch, msg.node, self.clock(), reply, {"resent": resent}))

    def _membership(self) -> Membership:
        return Membership(self.fence.epoch, self.push.address, self.standby.address if self.standby else "")

    def handle_register_standby(self, msg: m.RegisterStandby) -> m.RegisterStandbyReply:
        """A standby (re)joins: the first call asks where it stands (a resync), and batching goes on from
        there, or from the trim point for an empty one. A standby is not always empty when it registers:
        Nu feeds the standby its configuration names from the start, and one that started first (its
        registration refused until Nu listened) already held 160,000 positions when it got through; taken
        as empty, it was sent 65,000 of them again, decoded them, and refused them as repeats.

        A standby at another address than the one in place is refused (StandbyInPlace) while that one is
        in sync and answers a Status call (`BackupLink.standby_answers`, made without the lock)."""
        with self.lock:
            current = self.standby
        if current is not None and current.address != msg.address and self.backup.standby_answers(current):
            with self.lock:
                if self.standby is current and self.backup.in_sync() and self.links.alive("standby"):
                    self.counters["standby_registrations_refused"] += 1
                    raise StandbyInPlace(f"{self.name}: standby {current.address} is registered, in sync and "
                                         f"answering; {msg.node} at {msg.address} is not taken in its place")
        with self.lock:
            new = self.standby is None or self.standby.address != msg.address
            if new:
                if self.standby is not None:
                    self.standby.close()
                self.standby = self.peers(msg.address)
            # The same address keeps its channel and its call in flight, whose answer stands: the standby
            # judges each call itself, and one restarted empty refuses it (an error, then a resync). Voided
            # at the registration of a standby that had been fed since Nu started, the call's batches were
            # already trimmed from OQu, and the resync then skipped it to a checkpoint: 50,000-110,000 of
            # the first tuples of a run at full speed never reached it.
            self.links.ok("standby", msg.address)
            self.backup.registered(new=new)
            self.counters["standby_registrations"] += 1
            self._standby_wait_until = None  # the source starts now, with the backup's resync first
            self.source.covered(self.checkpoint, self._membership(), self.skip_point())
            self.lock.notify_all()
            return m.RegisterStandbyReply(epoch=self.fence.epoch, primary_address=self.push.address)

    def snapshot(self) -> dict:
        s = super().snapshot()
        c = self.counters
        s.update({
            "head": self.oqu.last,
            "trimmed_through": self.oqu.trimmed_through,
            "oqu_depth": len(self.oqu),
            **self.backup.status(),
            # In sync: registered, no backup call unanswered past backup_stall_max, and its link up (a killed
            # standby's calls fail at once, with no call left waiting to count it out of sync).
            "standby_in_sync": (self.standby is not None and self.backup.out_of_sync_since is None
                                and self.links.alive("standby")),
            "cursor": self.push.cursor,
            "checkpoint": [self.checkpoint.input_pos, self.checkpoint.output_count],
            "primary": self.push.address,
            "standby": self.standby.address if self.standby else "",
            **self.tuning.status(self.backup.bsize),
            "codec": self.cfg.codec,
            "source_exhausted": self.source.exhausted,
            "source_lag": self.source.lag(),
            "source_gap": self.source_gap,
            "e2e_commit_p50_ms": round(self.e2e_recent.quantile(0.5) * 1000, 2),
            "e2e_commit_p99_ms": round(self.e2e_recent.quantile(0.99) * 1000, 2),
            "overhead": c["backup_bytes"] / c["primary_bytes"] if c["primary_bytes"] else 0.0,
            "compression_ratio": (c["backup_payload_bytes"] / c["backup_raw_bytes"]
                                  if c["backup_raw_bytes"] else 1.0),
            "takeovers": self.takeovers.as_status(),
            "started_at": self.started_at,
            "first_admitted_at": self.first_admitted_at,
            "cpu_seconds_at_start": self.usage_at_start[0] if self.usage_at_start else None,
            "minor_faults_at_start": self.usage_at_start[1] if self.usage_at_start else None,
        })
        return s
