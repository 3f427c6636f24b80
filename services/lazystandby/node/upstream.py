"""Nu: numbers the source tuples into one link order, sends every tuple to the primary at once, ships the
backup to the standby in Bsize batches (Algorithm 1), and trims OQu by Level-1 acks (Algorithm 4).

Three loops, one lock:
  source   source -> OQu; blocks when OQu is full (backpressure to the source, never an unbounded queue)
  primary  OQu[cursor..] -> primary in frames of up to frame_max tuples, flushed after linger_ms;
           each reply carries the primary's Level-1 ack
  backup   OQu[batched_through+1..] -> standby, Bsize tuples per batch, each compressed by the codec
"""

from __future__ import annotations

import resource
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import zstandard as zstd

from .. import native
from ..config import NodeConfig
from ..core import messages as m
from ..core.acks import Checkpoint
from ..core.batching import BackupBatcher, RunEncoder, format_bsize
from ..core.errors import (
    NotThePrimary,
    PeerError,
    PermissionDenied,
    SequenceGap,
    SourceGap,
    SourceUnavailable,
    StandbyInPlace,
    Status,
)
from ..core.queues import KeyedQueue
from ..core.recovery import TakeoverLog, TakeoverRecord, resend_start
from ..core.retry import after_backup_error, after_push_error
from ..core.roles import Role
from ..core.windows import trimmable_through
from ..sources.base import DeadLetters, Membership, Source
from ..stats import LATENCY_BOUNDS, Buckets, RecentWindow
from ..transport.peer import Peer, Pending
from .bsize_tuning import BsizeTuning
from .common import Backoff, NodeBase
from .intake import Intake


@dataclass(slots=True)
class _BackupCall:
    """A backup call prepared by the backup loop, then in flight."""

    peer: Peer
    gen: int  # the backup generation it was cut in (a failure or a new standby starts a new one)
    resync: bool
    last: int  # last position it carries (0: none)
    frame: m.BackupFrame
    encode_s: float = 0.0
    sent_at: float = 0.0
    pending: Pending | None = None


# Seconds between Nu's recovery hints to its standby, with a backup frame or alone: at Bsize inf (or with a
# checkpoint that does not move, as under long windows) no other frame may come for long.
HINT_EVERY_S = 0.5


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
        # The Bsize in force: cfg.bsize, or the one chosen for recovery_target_ms (`_tune`).
        self.bsize = cfg.bsize
        self.batcher = BackupBatcher(cfg.bsize)
        # Used by the backup thread only.
        self.run_encoder = self._encoder_for(cfg.bsize)
        self._encoder_reset = False
        self._backup_gen = 0
        self._inflight: _BackupCall | None = None
        self._awaiting_since: float | None = None  # when the backup call now in flight was sent
        self._out_of_sync_since: float | None = None  # since when the standby is out of sync (backup_stall_max)
        self._probe: tuple | None = None  # (standby, when, answered): the last Status probe of the one in place
        self.backup_encode_seconds = 0.0  # time spent cutting and compressing runs
        self.backup_call_seconds = 0.0  # time backup calls were in flight
        self.fence = self.state.fence
        self.state.become(Role.UPSTREAM, epoch=1)
        self.primary_addr = cfg.primary
        self.primary: Peer = peers(cfg.primary)
        self.standby: Peer | None = peers(cfg.standby) if cfg.standby else None
        self.standby_retry_at = 0.0
        self._standby_checkpoint = 0
        self._next_checkpoint_at = 0.0
        self._next_hint_at = 0.0
        self.tuning = BsizeTuning(cfg)  # the links' costs and the Bsize for recovery_target_ms
        self._backup_sent = (-1, 0.0)  # (backup generation, when) of the last backup call cut: backup_linger_s
        self.checkpoint = Checkpoint()
        self.cursor = 1
        self.generation = 0
        self.received_by_primary = 0
        self._resync_primary = False
        self._resync_backup = False
        # The checkpoint the standby's next run starts just after, when it must skip ahead (`_skip_trimmed`).
        self._backup_jump: Checkpoint | None = None
        self._last_send = self.clock()
        self._primary_backoff = Backoff()
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
        if r.primary and r.primary != self.primary_addr:
            self.primary = self.peers(r.primary)
            self.primary_addr = r.primary
        standby = r.standby if r.standby is not None else (self.cfg.standby if r.primary != self.cfg.standby else "")
        if (self.standby.address if self.standby else "") != standby:
            self.standby = self.peers(standby) if standby else None
        self.intake.restore(r.held, r.last_seqs, r.params)
        self.batcher.restart(trimmed)
        # Ask the receivers where they are before sending: they may hold more than the checkpoint.
        self._resync_primary = self._resync_backup = True
        self.counters["restored_tuples"] = len(r.held)
        self.log.warning("%s: restored at checkpoint %s with %d tuples held, epoch %d, primary %s",
                         self.name, r.checkpoint, len(r.held), self.fence.epoch, self.primary_addr)

    def start(self) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self.usage_at_start = (usage.ru_utime + usage.ru_stime, usage.ru_minflt)
        self.started_at = time.time()
        self._hold_source_for_standby()
        self.dead_letters.open()  # the dead-letter topic's record limit, read now rather than at the first one
        if self.intake.placer is not None:
            self.late_data.open()
        self.spawn("source", self._source_loop)
        self.spawn("primary", self._primary_loop)
        self.spawn("backup", self._backup_loop)
        self.spawn("probe", self._probe_loop)

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
            oqu_room, backup_room = self.oqu.room(), self._backup_room()
            room = min(oqu_room, backup_room, self._primary_room())
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

    def _backup_bounded(self) -> bool:
        """Whether the backup holds the pipeline back (backup_lag_max): only while a standby answers. One
        that fails is retried later and holds up nothing (its backlog is trimmed by Level-1 acks meanwhile)."""
        return bool(self.cfg.backup_lag_max and self.standby is not None and self.bsize is not None
                    and self.clock() >= self.standby_retry_at and self._standby_in_sync())

    def _standby_in_sync(self) -> bool:
        """Holding the lock: False from the moment a backup call has gone unanswered for backup_stall_max
        until a call succeeds (a failed one, a timeout after a pause, does not bring it back: the retry
        would hang as long). Nu then neither waits for the standby nor holds OQu's trim back for it; when it
        answers, it skips to the checkpoint (`_skip_trimmed`). The first look past the limit counts and
        logs the change."""
        if self._out_of_sync_since is not None:
            return False
        since, stall = self._awaiting_since, self.cfg.backup_stall_max
        if since is None or not stall or self.clock() - since < stall:
            return True
        self._out_of_sync_since = since
        self.counters["standby_out_of_sync"] += 1
        self.log.warning("%s: standby %s has not answered a backup call for %.1f s: out of sync, the source "
                         "and OQu's trim no longer wait for it (it catches up by a checkpoint when it answers)",
                         self.name, self.standby.address if self.standby else "", self.clock() - since)
        return False

    def _backup_room(self) -> int:
        """How many more tuples the source may admit before the standby falls more than backup_lag_max
        behind what it has acknowledged."""
        if not self._backup_bounded():
            return 1 << 62
        return max(0, self.cfg.backup_lag_max - (self.oqu.last - self.batcher.confirmed_through))

    def _primary_room(self) -> int:
        """How many more tuples the source may admit before Nu holds more than primary_lag_max that the
        primary has not taken. Beyond that they would only wait in OQu, while the backup ships them to the
        standby at once: the standby then holds inputs that Nd's acks cannot cover within standby_defer,
        and processes them all (the second operator a lazy standby exists to avoid)."""
        lag = self.cfg.primary_lag_max
        if not lag:
            return 1 << 62
        return max(0, lag - (self.oqu.last - (self.cursor - 1)))

    def _trim(self) -> None:
        """Algorithm 4's trim of OQu to the Level-1 ack, but, while the backup is bounded, never past what
        has been cut into batches: otherwise a fast primary path trims tuples before the backup thread cuts
        them, the standby never gets them, and a standby that cannot keep up passes for a cheap one."""
        through = self._covered_through()
        if self._backup_bounded():
            through = min(through, max(self.batcher.batched_through, self.oqu.trimmed_through))
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

    def _skip_point(self) -> int:
        """Holding the lock: the last position a standby or a new primary may be skipped past without being
        sent it. For a selection the checkpoint (Nd holds those inputs' outputs); for a window query the
        trim point, since a node rebuilds the windows open at the checkpoint from every input Nu holds."""
        return self.checkpoint.input_pos if self.intake.placer is None else self.oqu.trimmed_through

    def _primary_loop(self) -> None:
        cfg = self.cfg
        linger, poll = cfg.linger_ms / 1000, cfg.ack_poll_ms / 1000
        with self.lock:
            while not self.stopped:
                avail = self.oqu.last - max(self.cursor, self.oqu.first) + 1
                idle = self.clock() - self._last_send
                if self._resync_primary or avail >= cfg.frame_max or (avail > 0 and idle >= linger):
                    break
                if idle >= poll:
                    avail = 0
                    break
                self.lock.wait(linger if avail > 0 else poll - idle)
            if self.stopped:
                return
            batch = None if self._resync_primary else self.oqu.read(self.cursor, cfg.frame_max)
            gen, peer, epoch, ckpt = self.generation, self.primary, self.fence.epoch, self.checkpoint
            self._last_send = self.clock()
        frame = m.Frame(epoch=epoch, sender=self.name, checkpoint=ckpt, batch=batch,
                        params=self.intake.params_at(ckpt.input_pos))
        t0 = self.clock()
        try:
            ack = peer.push(frame, self.cfg.rpc_timeout)
        except PeerError as e:
            self.links.note("primary", peer.address, e)
            self._primary_failed(e, gen)
            return
        self.links.note("primary", peer.address, None)
        with self.lock:
            self.counters["primary_bytes"] += ack.wire_bytes
            if gen != self.generation:
                return  # a takeover happened meanwhile: this reply speaks for a fenced primary
            self._resync_primary = False
            self._primary_backoff.reset()
            if batch is not None:
                self.counters["primary_tuples"] += len(batch)
                self.counters["primary_frames"] += 1
                self.tuning.push_cost.add(ack.wire_bytes, self.clock() - t0)
            self.received_by_primary = ack.received_through
            self.cursor = ack.received_through + 1
            self._apply_level1(ack.epoch, ack.level1)
            self.lock.notify_all()

    def _primary_failed(self, e: PeerError, gen: int) -> None:
        with self.lock:
            if gen != self.generation:
                return
            self.counters[f"primary_error_{e.status.lower()}"] += 1
            # The receiver's received_through is the truth; an empty frame fetches it before resending.
            self._resync_primary = after_push_error(e.status).resync
        if e.status is not Status.RESOURCE_EXHAUSTED:
            self.log.debug("%s: push failed: %s", self.name, e)
        delay = self._primary_backoff.next()
        with self.lock:
            # A takeover (a new generation) ends the wait: while the standby detected the crash, the backoff
            # grew to tens of ms, and the new primary's resend waited it out (20-30 ms of data recovery).
            self.lock.wait_for(lambda: self.generation != gen or self.stopped, delay)

    def _apply_level1(self, epoch: int, ack: Checkpoint) -> None:
        """Algorithm 4: drop from OQu every tuple at or below the Level-1 ack."""
        if epoch != self.fence.epoch or ack.input_pos <= self.checkpoint.input_pos:
            return
        if ack.input_pos > self.oqu.last:
            self.counters["level1_beyond_head"] += 1
            return
        self.checkpoint = ack
        self._trim()
        # End-to-end commit latency: admitted into OQu -> covered by a Level-1 ack (its outputs are in Nd).
        now = self.clock()
        while self._admitted and self._admitted[0][0] <= ack.input_pos:
            last, at = self._admitted.popleft()
            self.e2e_seconds.observe(now - at)
            self.e2e_recent.observe(now - at, last - self._committed_through)
            self._committed_through = last
        self.source.covered(self.checkpoint, self._membership(), self._skip_point())

    # --- OQu -> standby (Algorithm 1) ------------------------------------------------------------------
    def _backup_loop(self) -> None:
        """One backup call in flight while the next run is cut and compressed (double buffering): the
        standby decodes one run while Nu encodes the next. Calls stay one at a time, so the standby gets
        the codec session's batches in order; a failed call discards what was prepared after it."""
        inflight = self._inflight
        prepared = None if (inflight is not None and inflight.resync) else self._prepare_backup(idle=inflight is None)
        if inflight is not None:
            self._inflight = None
            self._finish_backup(inflight)
        if prepared is None:
            return
        if prepared.peer is not self.standby or prepared.gen != self._backup_gen:
            return  # a failure or a new standby since it was cut: the batcher was rewound meanwhile
        prepared.sent_at = self.clock()
        with self.lock:
            self._awaiting_since = prepared.sent_at
        prepared.pending = prepared.peer.backup_async(prepared.frame, self.cfg.rpc_timeout)
        if prepared.pending.done():  # a transport that answers at once (in memory): nothing to overlap
            self._finish_backup(prepared)
        else:
            self._inflight = prepared

    def _probe_loop(self) -> None:
        if not self._probe_link():
            self._stop.wait(0.05)

    def _probe_link(self) -> bool:
        """A probe of the standby's link when one is due and the backup link is idle: no call in flight,
        none to resync, no run due. Its time, against its size, goes into the standby link's cost
        (node/bsize_tuning.py). Whether one was sent. A link kept busy by the backup holds little unsent,
        and a takeover's resend over it is short: the push cost stands in until a probe gets through."""
        with self.lock:
            now = self.clock()
            peer = self.standby
            busy = self._resync_backup or self._awaiting_since is not None or (
                self.bsize is not None and self.batcher.unbatched(self.oqu) >= self.bsize)
            if peer is None or now < self.standby_retry_at or busy:
                return False
            padding = self.tuning.next_probe(now, self.counters["probes"])
            if padding is None:
                return False
            size = len(padding)
        t0 = self.clock()
        try:
            peer.probe(m.Probe(padding=padding), self.cfg.rpc_timeout)
        except PeerError:
            with self.lock:
                self.counters["probe_errors"] += 1
            return True
        with self.lock:
            self.tuning.standby_cost.add(size, self.clock() - t0, keep=True)
            self.counters["probes"] += 1
            self.counters["probe_bytes"] += size
        return True

    def _prepare_backup(self, *, idle: bool) -> _BackupCall | None:
        """The next backup call, encoded (outside the lock), or None when there is nothing to send (after
        waiting a little when no call is in flight either)."""
        with self.lock:
            now = self.clock()
            if self.standby is None or now < self.standby_retry_at:
                if idle:
                    self.lock.wait(0.05)
                return None
            self._tune(now)
            peer, epoch, ckpt, gen = self.standby, self.fence.epoch, self.checkpoint, self._backup_gen
            resync = self._resync_backup
            gather = 0.0 if resync else self._backup_gathering(now)
            if gather > 0:
                if idle:
                    self.lock.wait(gather)
                return None
            if not resync:
                self._skip_trimmed()
            run = None if resync else self.batcher.due_run(self.oqu, self.cfg.max_batches_per_rpc)
            jump = self._backup_jump
            if run is not None:
                self._trim()  # what was held back for this run can go now (the run is a view of it)
                self._backup_jump = None
                if jump is not None and run.first == jump.input_pos + 1:
                    ckpt = jump  # the skip's own checkpoint (a later one may have come since the resync)
            elif jump is not None:
                ckpt = jump  # a frame without batches skips the standby to where the next run starts, no further
            # With nothing to batch, still tell the standby when the trim point passed what it holds:
            # it skips ahead and never needs those positions (this is all an Upstream Backup standby gets).
            advance = ckpt.input_pos > self._standby_checkpoint and now >= self._next_checkpoint_at
            # Nu's part of the standby's predicted recovery, every HINT_EVERY_S (a fit over the timed pushes
            # costs a little, and a backup call can be due every millisecond).
            hint = (self.tuning.hint(head=self.oqu.last, resend_floor=self._resend_start(0),
                                     tuple_bytes=self._tuple_bytes()) if now >= self._next_hint_at else None)
            if hint is not None:
                self._next_hint_at = now + HINT_EVERY_S
            if not resync and run is None and not advance and hint is None:
                if idle:
                    self.lock.wait(self.cfg.linger_ms / 1000)
                return None
            if resync:
                # Only a question: where does the standby stand? A checkpoint here would move it, and a
                # standby that holds what Nu can still send was skipped past it (at a start-up registration,
                # up to 50,000 tuples at full speed). One behind the trim point gets its jump with the next
                # run, as after any resync (`_skip_trimmed`).
                ckpt = Checkpoint()
            elif run is None:
                self._next_checkpoint_at = now + self.cfg.ack_poll_ms / 1000
                # The standby skips to this checkpoint; what it covers but was not cut into batches yet (less
                # than Bsize tuples) is never cut: the next run starts after it. (Cut later, that run repeated
                # what the standby had skipped, and was refused.)
                self.batcher.skip_covered(self._skip_point())
            self._backup_sent = (gen, now)
            reset, self._encoder_reset = self._encoder_reset, False
        # Outside the lock: compressing a run takes milliseconds, and the source and primary loops must not
        # wait for it. Only this thread uses the encoder (a registration asks for a reset through a flag).
        t0 = self.clock()
        if reset:
            self.run_encoder.reset()
        try:
            runs = [self.run_encoder.encode(run)] if run is not None else []
        except (zstd.ZstdError, MemoryError) as e:
            self._encode_failed(gen, e)
            return None
        frame = m.BackupFrame(epoch=epoch, sender=self.name, checkpoint=ckpt, runs=runs,
                              params=self.intake.params_at(ckpt.input_pos), hint=hint)
        return _BackupCall(peer, gen, resync, run.last if run is not None else 0, frame, encode_s=self.clock() - t0)

    def _encoder_for(self, bsize: int | None) -> RunEncoder:
        cfg = self.cfg
        return RunEncoder(cfg.codec, level=cfg.codec_level, bsize=bsize, dict_samples=cfg.dict_samples,
                          dict_size=cfg.dict_size, native=native.compressor())

    def _tune(self, now: float) -> None:
        """Holding the lock, in the backup thread: with recovery_target_ms set, the Bsize chosen for it
        (node/bsize_tuning.py) from now on."""
        choice = self.tuning.choose(now, head=self.oqu.last, resend_floor=self._resend_start(0),
                                    tuple_bytes=self._tuple_bytes(), bsize=self.bsize,
                                    changed_before=bool(self.counters["bsize_changes"]))
        if choice is None:
            return
        self.log.info("%s: Bsize %s -> %s for recovery_target_ms %g (predicted %.0f ms%s)", self.name,
                      format_bsize(self.bsize), format_bsize(choice.value), self.cfg.recovery_target_ms,
                      choice.predicted_s * 1000, "" if choice.met else "; no Bsize meets the target")
        self._set_bsize(choice.value)

    def _tuple_bytes(self) -> float:
        """The mean bytes of a tuple on the wire, from the pushes (0 before any)."""
        c = self.counters
        return c["primary_bytes"] / c["primary_tuples"] if c["primary_tuples"] else 0.0

    def _set_bsize(self, bsize: int | None) -> None:
        """Holding the lock, in the backup thread: Bsize from now on. A new backup generation: what was cut
        since the standby's last answer is cut again at the new size, in a new codec session (the standby
        reads each batch's count from the run, whatever Bsize cut it)."""
        self.bsize = bsize
        self.batcher.bsize = bsize
        self.run_encoder = self._encoder_for(bsize)
        self._void_backup(resync=False)
        self.counters["bsize_changes"] += 1

    def _encode_failed(self, gen: int, error: Exception) -> None:
        """A run could not be compressed (zstd or memory): like a failed call, the batches cut since the
        standby's last answer are cut again, in a new codec session after a resync, and the loop goes on
        (the pipeline never waits on a backup that stopped)."""
        self.log.error("%s: compressing a backup run failed (%s): a new codec session after a resync",
                       self.name, error)
        with self.lock:
            self.counters["backup_encode_errors"] += 1
            if gen != self._backup_gen:
                return  # already void: the generation that cut it was rewound
            self._void_backup(resync=True)

    def _void_backup(self, *, resync: bool) -> None:
        """Holding the lock: what was cut or prepared since the standby's last answer is void (a failed call,
        a run that did not compress): a new generation, the batches cut again from the last confirmed one,
        in a new codec session; `resync`: ask the standby where it stands first."""
        self._backup_gen += 1
        self.batcher.rewind()
        self._encoder_reset = True
        self._resync_backup = resync

    def _skip_trimmed(self) -> None:
        """Holding the lock: when Level-1 acks trimmed OQu past what was cut for the standby (it did not
        answer meanwhile, the backup is not bounded, or a resync found it behind the trim point), the next
        run starts after the checkpoint and carries it (an ordinary jump, `_backup_jump`). Cut from the
        trim point, which a bounded trim can leave behind the checkpoint, with the newest checkpoint, the
        run skipped into covered positions: refused as a gap whenever the standby's last heartbeat of the
        primary was older than that checkpoint, then a resync and a new codec session."""
        ckpt = self.checkpoint
        if self.batcher.batched_through < self.oqu.trimmed_through <= ckpt.input_pos:
            self.batcher.skip_covered(self._skip_point())
            self._backup_jump = ckpt

    def _backup_gathering(self, now: float) -> float:
        """Seconds the backup link still gathers before its next call (0: call now). A call goes once
        backup_linger_s has passed since the last one, or at once when a full run (max_batches_per_rpc) is
        due: at low rates fewer calls carry the same batches with less framing, at full speed nothing waits.
        A new backup generation (a standby that registered, a call that failed) does not wait for the last
        call of the one before: the newcomer gets its backlog, the retry its batches, at once."""
        cfg = self.cfg
        gen, sent_at = self._backup_sent
        if not cfg.backup_linger_s or self.bsize is None or gen != self._backup_gen:
            return 0.0
        if self.batcher.unbatched(self.oqu) >= cfg.max_batches_per_rpc * self.bsize:
            return 0.0
        return max(0.0, sent_at + cfg.backup_linger_s - now)

    def _finish_backup(self, call: _BackupCall) -> None:
        peer, ckpt, runs = call.peer, call.frame.checkpoint, call.frame.runs
        try:
            assert call.pending is not None
            ack = call.pending.result()
        except PeerError as e:
            self._answered(call, ok=False)
            if peer is self.standby:
                self.links.note("standby", peer.address, e)
            with self.lock:
                self.counters[f"backup_error_{e.status.lower()}"] += 1
                if peer is not self.standby or call.gen != self._backup_gen:
                    # A new standby registered while this call was in flight (closing the old channel cancels
                    # it); the registration already re-cut the batches, and the newcomer is not to wait.
                    return
                retry = after_backup_error(e.status)
                self._void_backup(resync=retry.resync)
                self.standby_retry_at = self.clock() + retry.delay
                self._trim()  # the backup holds nothing back while the standby is not answering
            return
        self._answered(call, ok=True)
        with self.lock:
            if peer is not self.standby or call.gen != self._backup_gen:
                return
            self.links.note("standby", peer.address, None)
            self.counters["backup_bytes"] += ack.wire_bytes
            if ack.view is not None:
                self.tuning.standby_view = ack.view
            self._standby_checkpoint = max(self._standby_checkpoint, min(ckpt.input_pos, ack.applied_through))
            if call.resync:
                # The standby's applied position is the truth after an error or a registration; re-cut from
                # there, as a new generation: its first batches go at once, without gathering. One that holds
                # less than the trim point skips to the checkpoint with its next run (`_skip_trimmed`).
                self.batcher.restart(ack.applied_through)
                self._skip_trimmed()
                self._resync_backup = False
                self._backup_gen += 1
                return
            self.batcher.confirm(min(ack.applied_through, call.last))
            self.lock.notify_all()  # the source may be waiting for the standby to catch up
            self.counters["backup_batches"] += sum(len(r.counts) for r in runs)
            self.counters["backup_tuples"] += sum(sum(r.counts) for r in runs)
            self.counters["backup_raw_bytes"] += sum(sum(r.encoded.raw_sizes) for r in runs)
            self.counters["backup_payload_bytes"] += sum(len(r.encoded.payload) for r in runs)
            self.counters["backup_rpcs"] += 1
            self.backup_encode_seconds += call.encode_s
            self.backup_call_seconds += self.clock() - call.sent_at

    def _answered(self, call: _BackupCall, *, ok: bool) -> None:
        """A backup call came back; one that succeeded brings an out-of-sync standby back in sync."""
        with self.lock:
            if self._awaiting_since == call.sent_at:
                self._awaiting_since = None
            if ok and self._out_of_sync_since is not None:
                self.log.info("%s: standby %s answered again after %.1f s out of sync", self.name,
                              call.peer.address, self.clock() - self._out_of_sync_since)
                self._out_of_sync_since = None

    # --- failover and membership -----------------------------------------------------------------------
    def handle_takeover(self, msg: m.TakeoverRequest) -> m.TakeoverReply:
        """Step 5 of recovery, Nu's side: fence the old primary, stop the backup, rewind the cursor. The
        takeover is made durable where Nu's restart state lives before Nu answers, so a Nu restarted right
        after it still knows the new primary and epoch."""
        old = None
        with self.lock:
            record = self.takeovers.retry_of(msg.epoch, msg.node)
            if record is None and self._announcement(msg):
                if msg.address != self.primary_addr:
                    # Not stale (that would fence the sender): the primary of this epoch may well be the sender,
                    # known here by another address (a name against an IP, NAT, a relay). Nothing changes.
                    raise NotThePrimary(f"{self.name}: {msg.node} announced itself as the primary of epoch "
                                        f"{msg.epoch} at {msg.address}, but this Nu pushes that epoch to "
                                        f"{self.primary_addr}; if they are one node, set its advertise to "
                                        f"{self.primary_addr}")
                # The primary of this epoch announcing itself: this Nu restarted and already knows it, from
                # the takeover it recorded (a standby retrying a takeover whose answer died with the last Nu
                # comes here too). Resent as a takeover would be: a stateful node takes a resend_from past what
                # it holds for a rebuild, and would drop its state.
                start = self._resend_start(msg.resend_from)
                self.cursor = start
                return m.TakeoverReply(epoch=msg.epoch, checkpoint=self.checkpoint, head_pos=self.oqu.last,
                                       resend_from=start, params=self.intake.params_at(self.checkpoint.input_pos))
            if record is None:
                self._check_takeover(msg)
                old = self.primary
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
                            rebuild_from=None if self.intake.placer is None else self._skip_point() + 1)

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
        self.primary = self.peers(msg.address)
        self.primary_addr = msg.address
        self.standby = None
        self._backup_gen += 1
        self._trim()
        self.links.forget("standby")
        self.links.forget("primary")
        self.generation += 1
        start = self._resend_start(msg.resend_from)
        self.cursor = start
        self._resync_primary = False
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
        return Membership(self.fence.epoch, self.primary_addr, self.standby.address if self.standby else "")

    def handle_register_standby(self, msg: m.RegisterStandby) -> m.RegisterStandbyReply:
        """A standby (re)joins: the first call asks where it stands (a resync), and batching goes on from
        there, or from the trim point for an empty one. A standby is not always empty when it registers:
        Nu feeds the standby its configuration names from the start, and one that started first (its
        registration refused until Nu listened) already held 160,000 positions when it got through; taken
        as empty, it was sent 65,000 of them again, decoded them, and refused them as repeats.

        A standby at another address than the one in place is refused (StandbyInPlace) while that one is
        in sync and answers a Status call (`_standby_answers`, made without the lock)."""
        with self.lock:
            current = self.standby
        if current is not None and current.address != msg.address and self._standby_answers(current):
            with self.lock:
                if self.standby is current and self._standby_in_sync() and self.links.alive("standby"):
                    self.counters["standby_registrations_refused"] += 1
                    raise StandbyInPlace(f"{self.name}: standby {current.address} is registered, in sync and "
                                         f"answering; {msg.node} at {msg.address} is not taken in its place")
        with self.lock:
            if self.standby is None or self.standby.address != msg.address:
                if self.standby is not None:
                    self.standby.close()
                self.standby = self.peers(msg.address)
                self.batcher.restart(self.oqu.trimmed_through)
                self._backup_gen += 1
                # Another standby, another link: timed afresh, and its view comes with its first answer.
                self.tuning.new_standby()
            # The same address keeps its channel and its call in flight, whose answer stands: the standby
            # judges each call itself, and one restarted empty refuses it (an error, then a resync). Voided
            # at the registration of a standby that had been fed since Nu started, the call's batches were
            # already trimmed from OQu, and the resync then skipped it to a checkpoint: 50,000-110,000 of
            # the first tuples of a run at full speed never reached it.
            self.links.ok("standby", msg.address)
            self.standby_retry_at = 0.0
            self._standby_checkpoint = 0
            self._encoder_reset = True
            self._resync_backup = True
            self.counters["standby_registrations"] += 1
            self._standby_wait_until = None  # the source starts now, with the backup's resync first
            self.source.covered(self.checkpoint, self._membership(), self._skip_point())
            self.lock.notify_all()
            return m.RegisterStandbyReply(epoch=self.fence.epoch, primary_address=self.primary_addr)

    STANDBY_PROBE_S = 0.5  # how long Nu waits for the standby in place to answer, at another's registration

    def _standby_answers(self, standby) -> bool:
        """Whether the standby in place answers a Status call within STANDBY_PROBE_S (the last answer is
        kept for a second: a refused standby retries every 50 ms)."""
        now = self.clock()
        seen = self._probe
        if seen is not None and seen[0] is standby and now - seen[1] < 1.0:
            return seen[2]
        try:
            standby.status(self.STANDBY_PROBE_S)
            answers = True
        except PeerError:
            answers = False
        self._probe = (standby, now, answers)
        return answers

    def snapshot(self) -> dict:
        s = super().snapshot()
        c = self.counters
        s.update({
            "head": self.oqu.last,
            "trimmed_through": self.oqu.trimmed_through,
            "oqu_depth": len(self.oqu),
            "oqu_unbatched": self.batcher.unbatched(self.oqu),
            "oqu_batched": len(self.oqu) - self.batcher.unbatched(self.oqu),
            "batched_through": self.batcher.batched_through,
            "backup_skipped": self.batcher.skipped,
            "backup_confirmed_through": self.batcher.confirmed_through,
            "backup_encode_seconds": round(self.backup_encode_seconds, 3),
            "backup_call_seconds": round(self.backup_call_seconds, 3),
            # In sync: registered, no backup call unanswered past backup_stall_max, and its link up (a killed
            # standby's calls fail at once, with no call left waiting to count it out of sync).
            "standby_in_sync": (self.standby is not None and self._out_of_sync_since is None
                                and self.links.alive("standby")),
            "cursor": self.cursor,
            "checkpoint": [self.checkpoint.input_pos, self.checkpoint.output_count],
            "primary": self.primary_addr,
            "standby": self.standby.address if self.standby else "",
            "bsize": format_bsize(self.bsize),
            **self.tuning.status(self.bsize),
            "codec": self.cfg.codec,
            "codec_backend": self.run_encoder.encoder.backend,
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
