"""Nu: a source with an outbound link. It numbers the source tuples into one link order and hands them to
its outbound link (node/outbound.py), which sends every tuple to the primary at once, ships the backup to
the standby in Bsize batches (Algorithm 1), trims OQu by Level-1 acks (Algorithm 4) and answers takeovers
and registrations.

Composed of parts, each with its own state: the intake (node/intake.py: records into the link order) and
the outbound link (OQu, its push and backup links, the Bsize tuning). Nu itself keeps the source, its dead
letters, the wait for a fresh standby, and is the link's `Feed` (what the link reads of the source and the
intake). Four loops, one lock:
  source   source -> OQu; blocks when OQu is full (backpressure to the source, never an unbounded queue)
  primary  OQu[cursor..] -> primary in frames of up to frame_max tuples, flushed after linger_ms;
           each reply carries the primary's Level-1 ack
  backup   OQu[batched_through+1..] -> standby, Bsize tuples per batch, each compressed by the codec
  probe    the standby's link timed while the backup leaves it idle
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable

from ..config import NodeConfig
from ..core import messages as m
from ..core.acks import Checkpoint
from ..core.errors import SourceGap
from ..core.roles import Role
from ..sources.base import DeadLetters, Membership, Source
from ..transport.peer import Peer
from .common import NodeBase
from .intake import Intake
from .outbound import OutboundLink


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
        self.fence = self.state.fence
        self.state.become(Role.UPSTREAM, epoch=1)
        self.outbound = OutboundLink(cfg, self, self, peers)
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

    def _restore(self, r) -> None:
        """A restarted Nu: the same positions for the same tuples, the epoch and primary it had. OQu starts
        at the trim point the source recorded (`held.first - 1`), before the checkpoint for a window query."""
        self.outbound.restore(r.held, r.checkpoint, r.epoch, r.primary, r.standby)
        self.intake.restore(r.held, r.last_seqs, r.params)
        self.counters["restored_tuples"] = len(r.held)
        self.log.warning("%s: restored at checkpoint %s with %d tuples held, epoch %d, primary %s",
                         self.name, r.checkpoint, len(r.held), self.fence.epoch, self.outbound.push.address)

    def start(self) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self.usage_at_start = (usage.ru_utime + usage.ru_stime, usage.ru_minflt)
        self.started_at = time.time()
        self._hold_source_for_standby()
        self.dead_letters.open()  # the dead-letter topic's record limit, read now rather than at the first one
        if self.intake.placer is not None:
            self.late_data.open()
        self.spawn("source", self._source_loop)
        self.spawn("primary", self.outbound.push.loop)
        self.spawn("backup", self.outbound.backup.loop)
        self.spawn("probe", self.outbound.backup.probe_loop)

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
            room, why = self.outbound.room()
            if room == 0:
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
            batch = self.intake.admit(records, self.outbound.oqu.last + 1)
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
                self.outbound.append(batch)
                self.counters["source_tuples"] += len(batch)
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
            if (self.cfg.standby_wait and self.outbound.standby is not None and not self._restored
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
                         "waiting for it", self.name, self.outbound.membership().standby,
                         self.cfg.standby_wait)
        return False

    # --- what the outbound link reads of its feed (node/outbound.Feed) ----------------------------------
    @property
    def windowed(self) -> bool:
        return self.intake.placer is not None

    def needed_from(self, through: int) -> int | None:
        placer = self.intake.placer
        return None if placer is None else placer.needed_from(through)

    def params_at(self, pos: int) -> m.Params | None:
        return self.intake.params_at(pos)

    def forget_params(self, trimmed: int) -> None:
        self.intake.forget_params(trimmed)

    def covered(self, checkpoint: Checkpoint, members: Membership, trimmed_through: int) -> None:
        self.source.covered(checkpoint, members, trimmed_through)

    def record_membership(self, members: Membership) -> None:
        self.source.record_membership(members)

    def standby_registered(self) -> None:
        self._standby_wait_until = None  # the source starts now, with the backup's resync first

    # --- the wire ------------------------------------------------------------------------------------------
    def handle_takeover(self, msg: m.TakeoverRequest) -> m.TakeoverReply:
        return self.outbound.handle_takeover(msg)

    def handle_register_standby(self, msg: m.RegisterStandby) -> m.RegisterStandbyReply:
        return self.outbound.handle_register_standby(msg)

    def snapshot(self) -> dict:
        s = super().snapshot()
        s.update({
            **self.outbound.status(),
            "source_exhausted": self.source.exhausted,
            "source_lag": self.source.lag(),
            "source_gap": self.source_gap,
            "started_at": self.started_at,
            "first_admitted_at": self.first_admitted_at,
            "cpu_seconds_at_start": self.usage_at_start[0] if self.usage_at_start else None,
            "minor_faults_at_start": self.usage_at_start[1] if self.usage_at_start else None,
        })
        return s
