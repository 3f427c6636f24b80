"""N and N': one runtime, the role decides what it does.

  primary   Push frames from Nu -> IQ -> operator -> OQ -> Deliver to Nd; Nd's Level-0 ack trims OQ, and
            the Level-1 ack derived from it goes back to Nu in every Push reply (Algorithm 4).
  standby   Backup batches from Nu -> decompress -> IQ' -> operator -> OQ', kept, not sent (Algorithm 2);
            the Level-0 ack, forwarded by the primary in each heartbeat reply, trims OQ' (Algorithm 3).
            Missed heartbeats start the takeover (seed 000 section 3.6; steps in core/recovery.py).

Loops: `operator` drains IQ; `output` sends OQ to Nd (primary only); `heartbeat` watches the primary
(standby only). Handlers validate a whole frame before changing anything, so bad input leaves state as it was.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from ..config import NodeConfig
from ..core import messages as m
from ..core import tuples
from ..core.acks import Checkpoint, Level1Tracker, level1_from_level0
from ..core.admission import admit_runs, covered_head
from ..core.codec import BatchDecoder, DecoderPosition
from ..core.detector import FailureDetector
from ..core.held import HeldRuns, Sealed, Unreadable
from ..core.queues import InputQueue, KeyedQueue
from ..core.recovery import OperatorWatch, RecoveryTimes, TakeoverPlan, plan_takeover
from ..core.reminder import Reminder
from ..core.retry import declined_by, fenced_by
from ..core.roles import Role
from ..core.seq import (
    LazyStandbyError,
    OversizedMessage,
    PerStreamSequence,
    QueueFull,
    Status,
    StreamRegistry,
    UnknownEpoch,
    WrongRole,
)
from ..core.tuples import TupleBatch
from ..operators.base import Operator
from ..stats import BATCH_BOUNDS, RECOVERY_BOUNDS, Buckets
from ..transport.peer import Peer, PeerError
from .common import EXIT_FENCED, LINK_REMIND_S, Backoff, NodeBase

# Longest a gathering takeover (Operator.takeover_gather) waits, once PRIMARY, for Nu's resend before the
# operator starts anyway: a resend measured 10-60 ms after Nu's answer, and a lost one must not hold the
# operator for good.
GATHER_MAX_S = 0.25


@dataclass(frozen=True, slots=True)
class Jump:
    """An IQ marker: resume from a checkpoint (the positions before it are covered by Nd's output)."""

    checkpoint: Checkpoint
    params: m.Params | None = None  # the control record in force there (its position may be inside the skip)

    def __len__(self) -> int:
        return 0


class Run:
    """Consecutive batches read as one run of positions first .. end-1, joined only where sliced: the
    operator is called once per run, not once per frame (a Spark micro-batch costs the same for 4,096 tuples
    as for 32,768), and a standby that skips a covered stretch copies none of it (joining every run it
    took cost it more CPU than decoding the backup)."""

    __slots__ = ("parts", "first", "end")

    def __init__(self, parts: list) -> None:
        self.parts, self.first, self.end = parts, parts[0].first, parts[-1].end

    def __len__(self) -> int:
        return self.end - self.first

    def slice(self, start: int, stop: int) -> TupleBatch:
        """The tuples at positions [start, stop) of the run, as one batch (decoding sealed parts: raises
        Unreadable)."""
        pieces = [p.slice(start, stop) for p in self.parts if p.end > start and p.first < stop]
        if not pieces:
            return TupleBatch(max(start, self.first))
        return TupleBatch.concat([p.tuples() if isinstance(p, Sealed) else p for p in pieces])


def _join_runs(items: list) -> list:
    """Consecutive batches (decoded or sealed) as one Run each; Jumps stay where they are."""
    out: list = []
    run: list = []
    for it in items:
        if isinstance(it, TupleBatch | Sealed) and (not run or it.first == run[-1].end):
            run.append(it)
            continue
        if run:
            out.append(Run(run))
            run = []
        if isinstance(it, TupleBatch | Sealed):
            run.append(it)
        else:
            out.append(it)
    if run:
        out.append(Run(run))
    return out


class OperatorNode(NodeBase):
    """N (role primary) or N' (role standby)."""

    def __init__(self, cfg: NodeConfig, operator: Operator, peers: Callable[[str], Peer], **kw) -> None:
        super().__init__(cfg, **kw)
        self.operator = operator
        self.peers = peers
        self.registry = StreamRegistry(cfg.stream_names)
        self.seqcheck = PerStreamSequence(cfg.name)
        self.iq = InputQueue(f"{cfg.name} IQ", capacity=cfg.input_queue_capacity)
        self.oq = KeyedQueue(f"{cfg.name} OQ", capacity=cfg.oq_capacity)
        self.decoder = BatchDecoder(cfg.name, max_batch_bytes=cfg.max_message_bytes)
        self.held = HeldRuns(cfg.name, self._check_tuples, max_batch_bytes=cfg.max_message_bytes)
        self._decoding = threading.Lock()
        self.received_through = 0
        self.primary_received = 0  # standby: the primary's received_through, from its heartbeats
        self._primary_seen: deque[tuple[float, int]] = deque(maxlen=4096)  # (when, primary_received)
        self.processed = Checkpoint()
        # When `processed` last moved (wall clock; None before): a frame finished, or a skip past covered
        # inputs. A reader polling between frames cannot tell from the count alone when it held.
        self.processed_at: float | None = None
        self.first_processed_at: float | None = None  # when the operator finished its first frame
        # The newest checkpoint known to be covered by Nd's output (Nu's Level-1 point, sent with the backup
        # and with Nu's takeover answer), and the control record in force there.
        self._covered: tuple[Checkpoint, m.Params | None] = (Checkpoint(), None)
        # Covering checkpoints not applied yet, oldest first: one applies once this node holds what it covers
        # and a heartbeat has shown the primary got that far (a Level-1 point is never ahead of the primary),
        # whichever comes last (`_apply_covering`, at both events). The backup runs behind the primary (at
        # Bsize 1 by 60,000 inputs at full speed, and each frame's checkpoint was past its runs: before, N'
        # covered nothing then and processed every input); and at 10,000 tuples/s most frames came just
        # before the heartbeat that would vouch for them (covering had advanced only when a frame happened to
        # follow a heartbeat: up to 0.7 s behind).
        self._covering: deque[tuple[Checkpoint, m.Params | None]] = deque()
        # When inputs arrived here ((last position, when), oldest first) and how long the latest covered one
        # took to be covered after it arrived (None until one was): a standby defers only while that is
        # shorter than standby_defer.
        self._arrived: deque[tuple[int, float]] = deque(maxlen=4096)
        self.cover_latency: float | None = None
        self.level1 = Level1Tracker()
        self.level0 = 0
        self.sent_next = 1
        self.downstream: Peer | None = peers(cfg.downstream) if cfg.downstream else None
        self.upstream: Peer | None = peers(cfg.upstream) if cfg.upstream else None
        self.primary: Peer | None = None
        self.detector: FailureDetector | None = None
        self.recovery: dict = {}
        self._wall_detected = 0.0
        # A primary asks Nd where it stands before sending anything: a restarted one must not resend what
        # Nd holds (Precise), and Nd's answer trims OQ.
        self._resync_output = True
        # Delivered to Nd, taken from Nu or taken over in this life: a primary shown a newer epoch before any
        # of these was started again after a takeover, holds nothing, and rejoins as a standby (RoleState.rejoin).
        self._worked = False
        # A planned handover (hand_over): no input is taken, and the output loop sends its last frame.
        self._leaving = False
        self._told_leaving = False  # a heartbeat reply has said LEAVING to the standby
        self._heartbeat_at: float | None = None  # when the standby last asked (a primary's view)
        self._standby_at = ""  # where that standby hears of a handover (a primary's view; "": not said)
        self._handover = False  # a standby's view: the primary of this epoch said it is leaving
        self._beat_now = threading.Event()  # a standby's view: its primary's handover notice came (or a stop)
        self._output_backoff = Backoff()
        self._last_push = self.clock()
        self._announce_refused = Reminder(self.clock, LINK_REMIND_S)  # logs a refused announcement
        self._declined = Reminder(self.clock, LINK_REMIND_S)  # logs a declined takeover
        self._primary_stalled = Reminder(self.clock, LINK_REMIND_S)  # logs a primary that says it is stalled
        self.registered = threading.Event()
        self._take = cfg.operator_batch or (131_072 if cfg.operator == "spark" else 32_768)
        self.batch_seconds = Buckets(BATCH_BOUNDS)
        # Operator calls submitted and not yet answered, oldest first: (batch, future, submitted at).
        self._in_flight: deque[tuple[TupleBatch, Future, float]] = deque()
        self._calling_since: float | None = None  # a call inside `operator.submit` (a synchronous operator)
        self.watch = OperatorWatch(cfg.operator_stall_max)
        # A standby's calls wait by design (a lazy Spark feed holds them): a promoted one is timed from then.
        self._primary_since = self.clock()
        self.slowest_call_s = 0.0  # the longest an operator call took to be answered (for operator_stall_max)
        self._in_flight_tuples = 0
        self._backlog_at_takeover = (0, 0)
        # A takeover by a gathering operator (Operator.takeover_gather): nothing is taken while PROMOTING,
        # then nothing until the input through Nu's head at takeover is in or the deadline passes.
        self._gather: tuple[int, float] | None = None  # (Nu's head, deadline) once PRIMARY
        self._gathering = False
        self._working = False  # this takeover has started the operator on what it holds (_start_work)
        self.recovery_seconds = {p: Buckets(RECOVERY_BOUNDS) for p in ("detection", "reconnection", "data_recovery")}
        if cfg.role == "primary":
            self.state.become(Role.PRIMARY, epoch=1)
        else:
            self.state.become(Role.STANDBY, epoch=0)
            self.primary = peers(cfg.primary) if cfg.primary else None

    def stop(self) -> None:
        self._beat_now.set()  # the heartbeat loop sees the stop now, not at its next beat
        super().stop()

    def start(self) -> None:
        self.spawn("operator", self._operator_loop, on_crash=self._operator_failed)
        self.spawn("output", self._output_loop)
        self.spawn("announce", self._announce_loop)
        if self.state.role is Role.STANDBY:
            self._watch_as_standby()

    def _watch_as_standby(self) -> None:
        """A standby's own work: register with Nu, watch the primary's heartbeats, keep the operator lazy."""
        # In the background: Nu may start after us, and registration waits for it.
        t = threading.Thread(target=self._register_with_upstream, name=f"{self.name}:register", daemon=True)
        t.start()
        self._threads.append(t)
        self.detector = FailureDetector(self.cfg.heartbeat_interval, self.cfg.heartbeat_misses, self.clock(),
                                        self.cfg.heartbeat_grace)
        self.operator.lazy(True)  # only a takeover needs a standby's answers
        self.spawn("heartbeat", self._heartbeat_loop)

    def _register_with_upstream(self) -> None:
        """A standby starts empty: Nu re-cuts its backup from the trim point for it. Nu (started last) holds
        its source until this registration (standby_wait), so it should come as soon as Nu listens."""
        if self.upstream is None:
            return
        # Retried every 50 ms at most: until it registers, this standby watches no primary, and a fresh Nu
        # admits nothing (standby_wait). A refused call gets a new channel for the next try: gRPC's own
        # reconnect backoff (up to 500 ms) kept the first registration up to 0.3 s after Nu listened. Nothing
        # else uses the upstream channel before the registration (the heartbeat loop waits for it).
        backoff = Backoff(0.01, 0.05)
        said = None  # the status last logged: a line per change, not per try (the link's log adds when it recovers)
        while not self.stopped:
            try:
                reply = self.upstream.register_standby(
                    m.RegisterStandby(node=self.name, address=self.cfg.advertise), self.cfg.rpc_timeout)
            except PeerError as e:
                self.links.note("upstream", self.upstream.address, e)
                if e.status != said:
                    said = e.status
                    self.log.info("%s: registering with Nu failed (%s); retrying", self.name, e)
                if e.refused:
                    stale, self.upstream = self.upstream, self.peers(self.upstream.address)
                    stale.close()
                self.sleep(backoff.next())
                continue
            self.links.note("upstream", self.upstream.address, None)
            with self.lock:
                self.state.fence.advance(reply.epoch)
                self._watch_primary_at(reply.primary_address, reply.epoch)
                self.registered.set()
                # The first heartbeat now: the primary learns where this standby hears of a handover
                # before Nu, re-seeding the backup, reports it in sync.
                self._beat_now.set()
            return

    def _watch_primary_at(self, address: str, epoch: int) -> None:
        """Holding the lock: the primary Nu pushes to, as Nu's registration reply names it (`address`, in
        `epoch`). A configured `primary` is the route to the first primary: it is kept in epoch 1 (where it
        may be a route Nu does not use, a relay or another name for the same node), and left after a
        takeover, when it may name a node that is dead or the standby itself; watching it, this standby
        would suspect a primary that works and be declined at every timeout."""
        if not address or (self.primary is not None and (epoch <= 1 or self.primary.address == address)):
            return
        if self.primary is not None:
            self.log.warning("%s: Nu names %s the primary of epoch %d; the configured primary %s (the first "
                             "primary's) is not watched", self.name, address, epoch, self.primary.address)
            self.primary.close()
        self.primary = self.peers(address)

    # --- input: frames and batches -> IQ ---------------------------------------------------------------
    def _check_tuples(self, batch: TupleBatch, what: str) -> TupleBatch:
        """What this deployment allows in a run of tuples: known stream ids, tuples within the size limit."""
        self.registry.check_ids(batch.streams, batch.seqs, node=self.name)
        biggest = batch.max_payload_bytes()
        if biggest > self.cfg.max_tuple_bytes:
            raise OversizedMessage(f"{self.name}: {what} holds a {biggest}-byte tuple; "
                                   f"the limit is {self.cfg.max_tuple_bytes}")
        return batch

    def _admit(self, batches: list, ckpt: Checkpoint, params: m.Params | None = None) -> None:
        """Queue `batches` (TupleBatch, or Sealed runs of a lazy standby) in IQ if they follow on from what
        this node holds. Everything is checked before anything changes: a refused frame leaves the node as
        it was. Sealed runs are checked for their positions here and for their tuples when decoded (their
        per-stream seqs are those the primary checks as Nu pushes the same positions to it)."""
        jump = admit_runs(self.name, self.received_through, [(b.first, b.end) for b in batches], ckpt)
        sealed = isinstance(batches[0], Sealed)
        items = batches if sealed else [TupleBatch.concat(batches)]
        count = sum(map(len, items))
        pending = None if sealed else self.seqcheck.check(items[0].streams, items[0].seqs, fresh=jump,
                                                          skip=StreamRegistry.CONTROL)
        if len(self.iq) and len(self.iq) + count > self.iq.capacity:
            raise QueueFull(f"{self.name}: IQ full ({len(self.iq)} of {self.iq.capacity} tuples)")
        # Checked; now change state.
        if jump:
            self._jump(ckpt, params)
        if pending is None:
            self.seqcheck.reset()  # what follows an eager frame is checked from there
        else:
            self.seqcheck.commit(pending)
        now = self.clock()
        for it in items:
            self.iq.offer(it, now)  # type: ignore[arg-type]
        if self.state.role is Role.STANDBY:  # only a standby defers, and times covering for it
            self._arrived.append((items[-1].last, now))
        self.received_through = items[-1].last
        self.lock.notify_all()

    def _plausible(self, ckpt: Checkpoint) -> bool:
        """A standby skips to a trim point that comes without batches only as far as the primary has
        received (its heartbeats say): a Level-1 ack never covers a position the primary does not hold. One
        past that (forged, or newer than the last heartbeat) is not applied, and the standby answers what
        it holds; Nu sends its trim point again. (Batches that start just after their checkpoint are the
        ordinary jump and are admitted as they come.)"""
        return self.state.role is not Role.STANDBY or ckpt.input_pos <= self.primary_received

    def _jump(self, ckpt: Checkpoint, params: m.Params | None = None) -> None:
        """Skip to a checkpoint: every input through it produced only outputs Nd already holds. `params`,
        the control record in force at the checkpoint, switches the operator as if it had seen it."""
        self.iq.offer(Jump(ckpt, params), self.clock())  # type: ignore[arg-type]
        self.received_through = ckpt.input_pos
        self.seqcheck.reset()  # the per-stream history restarts after the skipped positions
        self.counters["jumps"] += 1
        self.lock.notify_all()

    def _note_covered(self, ckpt: Checkpoint, params: m.Params | None) -> None:
        """Holding the lock: every input through `ckpt` is covered by outputs Nd holds, so nobody will ever
        need this node to process it. The operator loop skips those it has not submitted yet: a standby
        whose operator fell behind (Spark on a busy machine) catches up to the Level-1 point instead of
        working through inputs that only matter until the primary's outputs for them reach Nd."""
        if ckpt.input_pos > self._covered[0].input_pos:
            self._covered = (ckpt, params)
            self.held.trim(ckpt.input_pos)
            arrived = self._arrived
            when = None
            while arrived and arrived[0][0] <= ckpt.input_pos:
                when = arrived.popleft()[1]
            if arrived and when is None:
                when = arrived[0][1]  # covered part of the oldest run still listed
            if when is not None:
                self.cover_latency = self.clock() - when
            self.lock.notify_all()  # a deferring operator loop may now skip

    def handle_push(self, msg: m.Frame) -> m.FrameAck:
        with self.lock:
            role = self.state.role
            if self._leaving:
                raise WrongRole(f"{self.name}: hands over to its standby and takes no more input")
            if role not in (Role.PRIMARY, Role.PROMOTING):
                raise self._wrong("Push")
            self._check_epoch(msg.epoch, msg.sender, "frame")
        self._last_push = self.clock()
        if msg.batch is not None:
            batch = self._check_tuples(msg.batch, f"frame {msg.batch.first}")
            with self.lock:
                self._admit([batch], msg.checkpoint, msg.params)
                self.counters["input_tuples"] += len(batch)
                self._worked = True
        with self.lock:
            return m.FrameAck(epoch=self.state.epoch, level1=self._level1(), received_through=self.received_through)

    def _check_epoch(self, epoch: int, sender: str, what: str) -> None:
        """Calls from Nu speak for Nu's epoch: an older one is refused (StaleEpoch); a newer one moves
        nothing here (only this node's own takeover, or what Nu and the primary tell it, moves its epoch)."""
        self.state.fence.check(epoch, sender=sender, what=what)
        if self.state.role is not Role.STANDBY and self.state.fence.is_newer(epoch):
            raise UnknownEpoch(f"{self.name}: {what} from {sender} in epoch {epoch}; this primary is in epoch "
                               f"{self.state.epoch} and no takeover it knows of made epoch {epoch}")

    def handle_backup(self, msg: m.BackupFrame) -> m.BackupAck:
        """Algorithm 2: decompress each batch, then queue its tuples in IQ' in order.

        Decompression runs outside the node lock (heartbeats and the operator go on meanwhile), one backup
        call at a time, bounded by what each batch declares; the decoder moves on only when the batches
        are admitted."""
        with self.lock:
            if self.state.role is not Role.STANDBY:
                raise self._wrong("Backup")
            self._check_epoch(msg.epoch, msg.sender, "backup")
        with self._decoding:
            lazy = bool(msg.runs) and not msg.batches
            if lazy:  # Algorithm 2, decompressing later, if ever (core/held.py)
                held, ledger = self.held.accept(msg.runs)
                decoded: list = [Sealed(h, self.held, h.first, h.end) for h in held]
            else:
                raws, position = self.decoder.decode_many([bb.encoded for bb in msg.batches])
                decoded = [self._check_tuples(tuples.decode_frame(raw, bb.first, bb.count,
                                                                  what=f"{self.name}: backup batch {bb.first}"),
                                              f"backup batch {bb.first}")
                           for bb, raw in zip(msg.batches, raws, strict=True)]
                for run in msg.runs:
                    batch, position = self._decode_run(run, position)
                    decoded.append(batch)
            with self.lock:
                if self.state.role is not Role.STANDBY:
                    raise self._wrong("Backup")  # promoted while this call decoded: what we hold is frozen
                if decoded and self._plausible(msg.checkpoint):
                    decoded = self._drop_covered(decoded, msg.checkpoint)
                if decoded:
                    self._admit(decoded, msg.checkpoint, msg.params)
                    self.counters["backup_tuples"] += sum(map(len, decoded))
                    self.counters["backup_batches"] += len(msg.batches) + sum(len(r.counts) for r in msg.runs)
                elif msg.checkpoint.input_pos > self.received_through:
                    # Nu trimmed past what it batched for us: nothing before the checkpoint is needed any more
                    # (once the primary's heartbeat shows it got that far: a checkpoint is never ahead of it).
                    if self._plausible(msg.checkpoint):
                        self._jump(msg.checkpoint, msg.params)
                    else:
                        self.counters["checkpoints_deferred"] += 1
                if decoded or msg.checkpoint.input_pos <= self.received_through:
                    self._hold_covering(msg.checkpoint, msg.params)
                self._apply_covering()
                if lazy:
                    self.held.commit(held, ledger)
                else:
                    self.decoder.commit(position)
                    if msg.runs or msg.batches:
                        self.held.restart_session()  # the link's session moved on in the eager decoder
                return m.BackupAck(applied_through=self.received_through)

    def _hold_covering(self, ckpt: Checkpoint, params: m.Params | None) -> None:
        """Holding the lock: keep a covering checkpoint until `_apply_covering` may apply it. At most 64 are
        kept: past that, the newest replaces the one before it (the older ones still apply in turn)."""
        held = self._covering
        if ckpt.input_pos <= max(self._covered[0].input_pos, held[-1][0].input_pos if held else 0):
            return
        if len(held) >= 64:
            held.pop()
        held.append((ckpt, params))

    def _apply_covering(self) -> None:
        """Holding the lock: the newest kept checkpoint within both what this node holds and what the
        primary's heartbeats say it has received covers what it holds (older ones are covered by it)."""
        if self.state.role is not Role.STANDBY:
            return
        limit = min(self.received_through, self.primary_received)
        reached = None
        while self._covering and self._covering[0][0].input_pos <= limit:
            reached = self._covering.popleft()
        if reached is not None:
            self._note_covered(*reached)

    def _drop_covered(self, batches: list[TupleBatch], ckpt: Checkpoint) -> list[TupleBatch]:
        """Holding the lock: `batches` without the leading positions `ckpt` covers when they skip ahead of
        what this node holds (core.admission.covered_head); what is left starts just after the checkpoint,
        an ordinary jump. Nothing left: the frame is then one without batches, whose checkpoint jumps."""
        n = covered_head(self.received_through, batches[0].first, ckpt)
        if not n:
            return batches
        self.counters["backup_covered_dropped"] += min(n, sum(map(len, batches)))
        cut = ckpt.input_pos + 1
        return [b.slice(cut, b.end) if b.first < cut else b for b in batches if b.end > cut]

    def _decode_run(self, run: m.BackupRun, position: DecoderPosition) -> tuple[TupleBatch, DecoderPosition]:
        """A run of backup batches decoded and checked as one batch (its batches are consecutive), and where
        the decoder will stand after it (nothing moves until the frame is admitted)."""
        what = f"{self.name}: backup run {run.first}"
        raw, position = self.decoder.decode_run(run.encoded, position)
        batch = tuples.decode_counted(raw, run.first, run.counts, run.encoded.raw_sizes, what=what)
        return self._check_tuples(batch, f"backup run {run.first}"), position

    # --- operator: IQ -> OQ ----------------------------------------------------------------------------
    def _operator_loop(self) -> None:
        with self.lock:
            through: int | None = None  # the last input this pass may take (None: all)
            take = True
            while not self.stopped:
                if self.operator.failure is not None:
                    raise self.operator.failure  # ends this loop, as a failed call does (_operator_failed)
                if self.iq.empty():
                    if self._head_done():
                        break
                    self.lock.wait(0.1)
                    continue
                if self._gathering and self._still_gathering():
                    take = False
                    if self._head_done():
                        break  # answers to collect; nothing taken yet
                    self.lock.wait(0.005)  # ends on an input's arrival or the deadline, not on a notify
                    continue
                take = True
                through = self._deferred_through()
                if through is None or self.iq.head()[0].first <= through or self._head_done():  # type: ignore[index]
                    break  # something to take, or answers to collect (taking what may be taken now)
                self.lock.wait(0.02)  # wakes when Nd's acks cover more (`_note_covered`) or a takeover starts
            items = _join_runs(self.iq.take_all(self._take, through)) if take else []
        self._collect(block=False)
        # Held runs this node has processed are needed no more than covered ones (their outputs are in OQ'),
        # except as the base later runs decode from; while Nd's acks lag, only this lets them go.
        self.held.trim(self._done_through())
        for it in items:
            if isinstance(it, Jump):
                if it.checkpoint.input_pos > self.processed.input_pos:  # else a skip already went past it
                    self._restore(it.checkpoint, it.params)
                continue
            start = it.first
            while start < it.end and not self.stopped:
                room = self._room_for(it.end - start)
                with self.lock:
                    covered, params = self._covered
                if covered.input_pos >= start:
                    start = self._skip(covered, params, start, it.end)
                    continue
                try:
                    piece = it.slice(start, start + room)
                except Unreadable as e:
                    if e.error is None:
                        # Let go since it was taken: covered meanwhile (a trim drops only covered or processed
                        # runs, and nothing from `start` on is processed), which the skip above now sees.
                        with self.lock:
                            if self._covered[0].input_pos >= start:
                                continue
                        raise
                    at = e.at
                    if at > start:  # what decoded before it is processed; the rest is forgotten
                        try:
                            self._submit(it.slice(start, at))
                        except Unreadable:
                            at = start  # that did not decode either: forgotten from `start`
                    self._unreadable(e.error, at)
                    return
                if len(piece):
                    self._submit(piece)
                start = piece.end

    def _unreadable(self, err: LazyStandbyError, pos: int) -> None:
        """A sealed backup run at or after `pos` did not decode (or its tuples were refused): forget what
        this standby holds from `pos` on, as if it had never come. Nu holds every input past its Level-1
        ack and sends them again: the standby's next backup call is refused (the session restarts there),
        and the resync that follows finds the standby at `pos` - 1. A node past its takeover's plan cannot
        do that (Nu was asked to resend from after what it held): the error stops its operator loop."""
        with self.lock:
            if self.state.role not in (Role.STANDBY, Role.PROMOTING):
                raise err
            self.counters["backup_unreadable"] += 1
            if pos > self.received_through:
                return  # already forgotten (a takeover's unsealing got there first)
            self.log.error("%s: held backup from input %d does not decode (%s); forgetting inputs %d..%d, "
                           "Nu sends them again", self.name, pos, err, pos, self.received_through)
            self.held.truncate(pos)
            self.iq.drop_from(pos)
            while self._arrived and self._arrived[-1][0] >= pos:
                self._arrived.pop()
            self.received_through = pos - 1
            self.seqcheck.reset()
            self.lock.notify_all()

    def _unseal(self) -> None:
        """Takeover, before its plan: decode every held input neither covered nor processed (in IQ', or
        taken by the operator loop), so that what this node tells Nu it holds is what it can process. A run
        that does not decode is forgotten with what follows it, and Nu resends from there."""
        with self.lock:
            done = self._done_through()
        bad = self.held.unseal(done)
        if bad is not None:
            self._unreadable(bad.error, bad.at)

    def _deferred_through(self) -> int | None:
        """Holding the lock, IQ not empty: the last position the operator may take now, None for all.

        Lazy: a standby lets each input wait up to `standby_defer` seconds in IQ' before it runs the
        operator on it. Meanwhile Nd's acks usually cover it (Nu's Level-1 point comes with the next backup
        frame), and a covered input is skipped, never processed: its outputs are in Nd and nobody will ask
        this node for them. So a standby that keeps up costs its decoding, not a second operator. An input
        is taken anyway once it has waited that long; when IQ' has less room left than `_standby_room` keeps
        free, the oldest inputs beyond that are taken, and only those; and every input once a takeover
        starts: what is left then is the primary's uncovered tail, which the skip could not save either.
        Nothing waits while inputs take longer than `standby_defer` to be covered (a primary slower than
        that at the moment): waiting would only leave the takeover more to do. Before the first cover,
        inputs wait as if covering kept up: at full speed a standby that took everything until then did
        the work of the run's first 200,000 inputs, all of them covered soon after."""
        head = self.iq.head()
        wait = self.cfg.standby_defer
        slow = self.cover_latency is not None and self.cover_latency >= wait
        if (self.state.role is not Role.STANDBY or wait <= 0 or head is None or not len(head[0]) or slow
                or self.clock() - head[1] >= wait):
            return None
        covered = self._covered[0].input_pos
        excess = len(self.iq) + self._standby_room() - self.iq.capacity
        if excess > 0:
            # Short of room: the oldest `excess` inputs (fewer past a skip marker; the next pass sees the rest).
            # Taking all of IQ' here made the standby process most of a run whenever covering slowed down:
            # its work slowed the primary, covering slowed further, and IQ' stayed full.
            return max(covered, head[0].first + excess - 1)
        return covered

    def _standby_room(self) -> int:
        """The room a deferring standby keeps free in IQ': two backup calls (one in flight while Nu cuts the
        next) of max_batches_per_rpc Bsize batches, but never more than half of IQ'. (Half of IQ' alone,
        100,000 tuples by default, is what about 0.25 s of covering holds at 400,000 tuples/s: a standby
        that worked at half full processed 29 % of the inputs of a run at full speed, on the CPU the
        pipeline needed.)"""
        calls = 2 * self.cfg.max_batches_per_rpc * (self.cfg.bsize or 1)
        return min(calls, self.iq.capacity // 2)

    def _still_gathering(self) -> bool:
        """Holding the lock: a gathering takeover still waits (PROMOTING, or PRIMARY with Nu's resend not
        all in and the deadline ahead). Ends the gathering otherwise."""
        if self.state.role is Role.PROMOTING:
            return True
        if self.state.role is Role.PRIMARY and self._gather is not None:
            head, deadline = self._gather
            if self.received_through < head and self.clock() < deadline:
                return True
        self._gathering, self._gather = False, None
        return False

    def _restore(self, ckpt: Checkpoint, params: m.Params | None) -> None:
        """Resume the operator at `ckpt` (a Jump, or a skip over covered inputs)."""
        self._collect(block=True)  # restore only with nothing in flight (the Operator contract)
        self.operator.restore(ckpt.input_pos, params)
        with self.lock:
            self._processed_to(ckpt)
            self.oq.trim(ckpt.output_count)
            self.lock.notify_all()

    def _skip(self, covered: Checkpoint, params: m.Params | None, start: int, end: int) -> int:
        """Inputs `start`..`covered` are not submitted (see `_note_covered`); returns the next position to
        submit. A checkpoint that counts fewer outputs than this node made before `start` cannot be true;
        it is dropped and nothing is skipped."""
        if covered.input_pos > self.processed.input_pos:
            self._collect(block=True)
            with self.lock:
                if covered.output_count < self.processed.output_count:
                    self.counters["skips_refused"] += 1
                    self._covered = (Checkpoint(), None)
                    self.log.warning("%s: checkpoint %s counts fewer outputs than the %d made before input %d; "
                                     "not skipping", self.name, covered, self.processed.output_count, start)
                    return start
            self._restore(covered, params)
        with self.lock:
            self.counters["skipped_tuples"] += min(covered.input_pos + 1, end) - start
        return covered.input_pos + 1

    def _room_for(self, wanted: int) -> int:
        """How many inputs the next operator call may take: at most one output per input, so never more
        than OQ has room for once what is in flight is answered, and never more in flight than the operator
        takes. A call sized to the room left cannot wait for room that will never come (an operator call's
        outputs larger than the whole OQ once spun for ever); with OQ full, this waits for Nd's acks
        (backpressure: IQ fills, then Nu is told RESOURCE_EXHAUSTED)."""
        while True:
            self._collect(block=False)
            with self.lock:
                room = self.oq.room() - self._in_flight_tuples
                cap = self.operator.in_flight_max
                if cap or self._in_flight:  # a pipelined operator's bound holds for its first call too
                    room = min(room, cap - self._in_flight_tuples)
                if room > 0 or self.stopped:
                    return max(0, min(wanted, room))
                self.counters["oq_full_waits" if self.oq.room() == 0 else "in_flight_waits"] += 1
                if not self._head_done():
                    self.lock.wait(0.05)

    def _head_done(self) -> bool:
        return bool(self._in_flight) and self._in_flight[0][1].done()

    def _submit(self, batch: TupleBatch) -> None:
        # Timed from before the call: an operator that computes inside `submit` (and may hang there) is
        # timed by OperatorWatch and by batch_seconds as one whose future answers later is.
        t0 = self._calling_since = self.clock()
        fut = self.operator.submit(batch)
        with self.lock:
            self._calling_since = None
            self._in_flight.append((batch, fut, t0))
            self._in_flight_tuples += len(batch)
        if fut.done():
            self._collect(block=False)
        else:
            fut.add_done_callback(self._wake)

    def _wake(self, _fut) -> None:
        with self.lock:
            self.lock.notify_all()

    def _collect(self, block: bool) -> None:
        """Takes the operator's answers in submission order: those ready, or (block) all in flight."""
        while self._in_flight and not self.stopped:
            batch, fut, t0 = self._in_flight[0]
            if not fut.done():
                if not block:
                    return
                with self.lock:
                    self.lock.wait_for(lambda f=fut: f.done() or self.stopped, 0.5)
                continue
            selected = fut.result()  # an operator failure ends this loop, as a failed call always did
            with self.lock:
                self._in_flight.popleft()
                self._in_flight_tuples -= len(batch)
                self._finish(batch, selected, self.clock() - t0)

    def _finish(self, batch: TupleBatch, selected, took: float) -> None:
        """Holding the lock: the outputs of `batch`, numbered on from the last ones, into OQ."""
        self.batch_seconds.observe(took)
        self.slowest_call_s = max(self.slowest_call_s, took)
        self.counters["operator_batches"] += 1
        base = self.processed.output_count
        out = batch.select(selected, first=base + 1)
        # Outputs Nd already holds (a promoted standby re-processing) are not kept: Precise.
        fresh = out.slice(self.oq.trimmed_through + 1, out.end)
        if len(fresh):
            self.oq.append(fresh)  # fits: calls take no more inputs than OQ has room for
        self.counters["processed_tuples"] += len(batch)
        self.counters["output_tuples"] += len(out)
        self._processed_to(Checkpoint(batch.last, base + len(out)))
        if self.first_processed_at is None:
            self.first_processed_at = self.processed_at
        self.lock.notify_all()

    def _oldest_call(self) -> float | None:
        """Holding the lock: when the oldest operator call not yet answered was made (None: there is none)."""
        made = [t for t in (self._calling_since, self._in_flight[0][2] if self._in_flight else None) if t is not None]
        return min(made, default=None)

    def _operator_failed(self, e: Exception) -> None:
        """The operator loop ended with an error (a failed call: a Spark JVM that is gone): nothing will be
        processed here again. A primary says so at once in its heartbeats (OperatorWatch.fail), and the node
        asks its process to exit (`fail`): its closed port is the surest sign of all."""
        why = f"{type(e).__name__}: {e}"[:300]
        with self.lock:
            self.watch.fail(why)
            self.counters["operator_failures"] += 1
            self._stalled_s()  # said now, not at the next heartbeat
        self.fail(f"the operator failed ({why})")

    def _stalled_s(self) -> float:
        """Holding the lock: for how long this primary's operator has left a call unanswered, once that is past
        operator_stall_max (OperatorWatch); 0 when it has not, or when this node is no primary. A stall is
        said once when it begins and once when it ends."""
        oldest, now = self._oldest_call(), self.clock()
        was = self.watch.stalled
        if self.state.role is not Role.PRIMARY:
            self.watch.update(None, now)  # a standby's calls wait by design; a fenced node's do not matter
            return 0.0
        if oldest is not None:
            oldest = max(oldest, self._primary_since)
        if self.watch.update(oldest, now):
            self.counters["operator_stalls"] += 1
            what = (f"failed ({self.watch.failed})" if self.watch.failed else
                    f"has left a call unanswered for {self.watch.stalled_for(oldest, now):.1f} s (operator_stall_max "
                    f"{self.watch.limit:.1f} s)")
            self.log.warning("%s: the operator %s: heartbeats say so from now, and Nd's lease is no longer renewed; a "
                             "standby will take over", self.name, what)
        elif was and not self.watch.stalled:
            self.log.warning("%s: the operator answers again", self.name)
        return self.watch.stalled_for(oldest, now)

    def _processed_to(self, ckpt: Checkpoint) -> None:
        """Holding the lock: `processed` moves here only, with the time it moved (`processed_at`)."""
        self.processed, self.processed_at = ckpt, time.time()

    def _level1(self) -> Checkpoint:
        return self.level1.update(level1_from_level0(self.level0, self.processed, self.oq))

    # --- output: OQ -> Nd (primary) --------------------------------------------------------------------
    def _output_loop(self) -> None:
        idle = self.cfg.idle_frame_s
        with self.lock:
            deadline = self.clock() + idle
            # An idle primary still sends an empty frame now and then: it renews its lease at Nd, a primary
            # that was paused and replaced learns at once that it is fenced, and a restarted Nd is found again.
            while not self.stopped and (self.state.role is not Role.PRIMARY or
                                        (not self._leaving and not self._resync_output
                                         and self.oq.last < self.sent_next and self.clock() < deadline)):
                # Up to the deadline, not a whole interval past a notify that came just before it: the
                # empty frame was up to twice ack_poll_ms apart (99 ms at 50 ms, measured).
                self.lock.wait(max(0.001, deadline - self.clock()))
                if self.state.role is not Role.PRIMARY:
                    deadline = self.clock() + idle
            if self.stopped or self.downstream is None:
                return
            leaving = self._leaving
            if not leaving and (self._resync_output or self.oq.last < self.sent_next) and self._stalled_s():
                # An empty frame would renew this primary's lease at Nd, and its operator has stalled: the
                # standby's takeover must not be declined.
                self.counters["idle_frames_withheld"] += 1
                return
            batch = None if self._resync_output else self.oq.read(self.sent_next, self.cfg.frame_max)
            epoch, peer = self.state.epoch, self.downstream
        frame = m.OutputFrame(epoch=epoch, sender=self.name, batch=batch, leaving=leaving)
        try:
            ack = peer.deliver(frame, self.cfg.rpc_timeout)
        except PeerError as e:
            self.links.note("downstream", peer.address, e)
            with self.lock:
                self.counters[f"deliver_error_{e.status.lower()}"] += 1
                if fenced_by(e.status):
                    self._fence(f"Nd refused epoch {epoch}: {e.message}")
                    return
                if leaving:
                    # Tried once: the lease then ends by itself within takeover_lease, before the standby's
                    # takeover is asked again (a declined one is, at its next heartbeat).
                    self._left(f"its last frame failed ({e.status})")
                    return
                self._resync_output = True
            if e.status is Status.FAILED_PRECONDITION:
                self._announce(peer, epoch)  # Nd does not know this epoch (it restarted): tell it
            self.sleep(self._output_backoff.next())
            return
        self.links.note("downstream", peer.address, None)
        with self.lock:
            self._output_backoff.reset()
            self._resync_output = False
            self._worked = True
            self.counters["output_bytes"] += ack.wire_bytes
            if batch is not None:
                self.counters["delivered_tuples"] += len(batch)
            self._on_level0(ack.received_through)
            self.sent_next = ack.received_through + 1
            if leaving:
                self._left(f"Nd holds its outputs through {ack.received_through}")

    def _announce_loop(self) -> None:
        """A live Nu pushes to its primary at least every ack_poll_ms. A primary that hears nothing for a
        while announces itself to Nu: a Nu restarted without knowing this primary learns it; a Nu that knows
        it answers and changes nothing; a Nu in a newer epoch refuses, and this node is fenced."""
        self.sleep(1.0)
        silent = max(1.0, 20 * self.cfg.ack_poll_ms / 1000)
        with self.lock:
            due = (self.state.role is Role.PRIMARY and self.upstream is not None
                   and self.clock() - self._last_push > silent)
            epoch = self.state.epoch
        if due:
            assert self.upstream is not None
            self._announce(self.upstream, epoch)

    def _announce(self, peer: Peer, epoch: int) -> None:
        """Tell a peer that restarted without knowing it which primary runs `epoch`: the same Takeover this
        node made (or, for the first primary, would have made), which the peer accepts once."""
        req = m.TakeoverRequest(node=self.name, epoch=epoch, address=self.cfg.advertise,
                                resend_from=self.received_through + 1)
        role = "upstream" if peer is self.upstream else "downstream"
        try:
            peer.takeover(req, self.cfg.rpc_timeout)
        except PeerError as e:
            self.links.note(role, peer.address, e)
            if fenced_by(e.status):
                self.log.warning("%s: %s refused the announcement of epoch %d: %s", self.name, peer.address, epoch, e)
                with self.lock:
                    self._fence(f"{peer.address} refused epoch {epoch}: {e.message}")
            elif not e.unreachable:
                # Refused without a newer epoch (Nu knows this epoch's primary at another address): not
                # fenced, but said, since the peer will not learn this node from it.
                # Announced every second while Nu stays silent: one line, then one every LINK_REMIND_S.
                self.counters["announce_refused"] += 1
                if self._announce_refused.due():
                    self.log.warning("%s: %s did not take the announcement of epoch %d: %s", self.name,
                                     peer.address, epoch, e)
            return
        self.links.note(role, peer.address, None)
        self.counters["announced"] += 1
        self.log.warning("%s: announced itself to %s as the primary of epoch %d", self.name, peer.address, epoch)

    def _on_level0(self, k: int) -> None:
        """Algorithm 3 (and the primary's own OQ): drop outputs Nd holds; refresh the Level-1 ack."""
        if k > self.level0:
            self.level0 = k
        self.oq.trim(self.level0)
        self._level1()
        self.lock.notify_all()

    def _fence(self, why: str) -> None:
        if self.state.role is Role.PRIMARY and not self._worked and self.upstream is not None:
            self._rejoin(why)
        elif self.state.role in (Role.PRIMARY, Role.PROMOTING):
            self.log.warning("%s: fenced (%s); stops sending", self.name, why)
            self.state.become(Role.FENCED)
            self.counters["fenced"] += 1
            if self.cfg.exit_when_fenced:  # to be started again, and rejoin as the standby
                self.fail(f"fenced ({why})", EXIT_FENCED)

    def _rejoin(self, why: str) -> None:
        """Started as the primary into a pipeline that failed over without this node (a restart with its old
        settings): it joins as a standby, learns the primary from Nu, and can take over at the next failure."""
        self.log.warning("%s: %s; it has delivered nothing in this life, so it joins as a standby", self.name, why)
        self.state.rejoin(worked=self._worked)
        self.counters["rejoined"] += 1
        self.primary = None  # Nu names the primary in force when it answers the registration
        self._watch_as_standby()

    # --- a planned handover (the primary asked to stop) ------------------------------------------------
    def hand_over(self, timeout: float | None = None) -> str:
        """A primary asked to stop (SIGTERM: `docker stop`, a rolling upgrade) hands its work to the standby
        instead of leaving it to find out: it takes no more input (Nu keeps what it sends in OQu and sends it
        to the next primary), sends Nd what OQ holds in a last frame that ends its lease there, and then says
        LEAVING in its heartbeat replies. It tells the standby to heartbeat now (`_tell_standby`), so the
        standby takes over about a round trip after the last frame, not at its next heartbeat, and not
        after the detector's timeout and the lease. The takeover is the usual one: Precise, it replays what
        Nd lacks. Waits at most `timeout` seconds (by default twice the detector's timeout, and a call's).

        Returns how it went: "told" (the standby has heard it), "no standby" (none has asked for a heartbeat
        for the detector's timeout, counted from the last that did, or from when this node became the
        primary: nobody to hand over to, and the lease has ended all the same),
        "timed out", or "not primary" (nothing done)."""
        cfg = self.cfg
        wait = 2 * cfg.heartbeat_timeout + cfg.rpc_timeout if timeout is None else timeout
        with self.lock:
            if self.state.role is not Role.PRIMARY or self._leaving or self.downstream is None:
                return "not primary"
            self._leaving = True
            self.counters["handovers"] += 1
            self.lock.notify_all()  # the output loop sends the last frame now
            deadline = self.clock() + wait
            while not self.stopped and self.state.role is Role.PRIMARY and self.clock() < deadline:
                self.lock.wait(0.01)
            if self.state.role is not Role.LEAVING:
                return "not primary" if self.state.role is not Role.PRIMARY else "timed out"
            standby = self._standby_at
        if standby and not self._told_leaving:
            self._tell_standby(standby)  # outside the lock: the standby's heartbeat comes in meanwhile
        with self.lock:
            # A standby asks every heartbeat_interval; one that has not asked for the detector's timeout is
            # gone, and a primary no standby has asked since it became one (a pipeline run without one) has
            # nobody to wait for: it stops at once, not a timeout later. A standby that registers meanwhile
            # asks as soon as Nu answers it; if this node is gone by then, it takes over on its detector.
            while not self.stopped and not self._told_leaving and self.clock() < deadline:
                if self.clock() - max(self._primary_since, self._heartbeat_at or 0.0) > cfg.heartbeat_timeout:
                    self.log.warning("%s: no standby has asked for a heartbeat; stops without a handover", self.name)
                    return "no standby"
                self.lock.wait(0.01)
            return "told" if self._told_leaving else "timed out"

    def _tell_standby(self, address: str) -> None:
        """Tells the standby that asked last to heartbeat now (HandoverNotice). Best effort: a standby
        that does not hear it (gone, or one that never said where) hears LEAVING at its next heartbeat, so
        the notice is given no longer than that takes."""
        peer = self.peers(address)
        wait = min(self.cfg.rpc_timeout, self.cfg.heartbeat_interval)
        t0 = self.clock()
        try:
            ack = peer.handover(m.HandoverNotice(sender=self.name, epoch=self.state.epoch), wait)
        except PeerError as e:
            self.links.note("standby", address, e)
            self.counters["handover_notices_failed"] += 1
            self.log.warning("%s: the handover notice to %s failed after %.0f ms: %s", self.name, address,
                             (self.clock() - t0) * 1000, e)
        else:
            self.links.note("standby", address, None)
            self.counters["handover_notices_heard" if ack.beats else "handover_notices_ignored_there"] += 1
            self.log.info("%s: the handover notice to %s %s in %.0f ms", self.name, address,
                          "was heard" if ack.beats else "came after its heartbeat", (self.clock() - t0) * 1000)
        finally:
            peer.close()

    def _left(self, why: str) -> None:
        """Holding the lock: the last frame went (or failed): LEAVING from now on, which heartbeats say."""
        self.state.become(Role.LEAVING)
        self.log.warning("%s: hands over in epoch %d (%s); its standby takes over", self.name, self.state.epoch, why)
        self.lock.notify_all()

    # --- heartbeats (standby) and failover -------------------------------------------------------------
    def handle_heartbeat(self, msg: m.HeartbeatRequest) -> m.HeartbeatReply:
        with self.lock:
            self.counters["heartbeats_answered"] += 1
            self._heartbeat_at = self.clock()
            if msg.address:
                self._standby_at = msg.address
            if self.state.role is Role.LEAVING and not self._told_leaving:
                self._told_leaving = True
                self.lock.notify_all()
            return m.HeartbeatReply(node=self.name, role=self.state.role, epoch=self.state.epoch, level0=self.level0,
                                    received_through=self.received_through,
                                    stalled_ms=round(self._stalled_s() * 1000))

    def handle_handover(self, msg: m.HandoverNotice) -> m.HandoverAck:
        """A primary handing over says it has sent Nd its last frame: this standby heartbeats now rather
        than at its next interval. The notice moves nothing by itself (a forged one costs one heartbeat):
        the takeover waits for this node's own heartbeat to hear LEAVING from the primary it watches.
        Ignored unless this node is a registered standby and the notice is of its epoch or a newer one."""
        with self.lock:
            beats = (self.state.role is Role.STANDBY and self.registered.is_set()
                     and msg.epoch >= self.state.epoch)
            self.counters["handover_notices" if beats else "handover_notices_ignored"] += 1
            if beats:
                self._beat_now.set()
            return m.HandoverAck(node=self.name, role=self.state.role, epoch=self.state.epoch, beats=beats)

    def _heartbeat_loop(self) -> None:
        det = self.detector
        assert det is not None
        if self.state.role is not Role.STANDBY or not self.registered.is_set():
            # Until Nu has answered, this standby knows neither the epoch nor that the system runs. A wake
            # (the registration) is taken here, and cleared: a node that is no standby must not spin on it.
            self._beat_now.wait(0.05)
            self._beat_now.clear()
            det.waiting(self.clock())
            return
        t0 = self.clock()
        stalls = det.stalls
        det.beat(t0)
        self._beat_now.clear()  # a notice from now on is for the next beat
        peer = self.primary
        try:
            if peer is None:
                raise PeerError(Status.UNAVAILABLE, "no primary known")
            reply = peer.heartbeat(m.HeartbeatRequest(sender=self.name, epoch=self.state.epoch,
                                                      address=self.cfg.advertise), self.cfg.heartbeat_interval)
        except PeerError as e:
            self.links.note("primary", peer.address if peer is not None else "", e)
            det.missed(self.clock(), refused=e.refused, started=t0)
            self.counters["heartbeat_misses"] += 1
            if e.refused:
                self.counters["heartbeat_refused"] += 1
        else:
            self.links.note("primary", peer.address, None)
            now = self.clock()
            if reply.role in (Role.PRIMARY, Role.LEAVING):
                if reply.role is Role.LEAVING:
                    # Its handover (hand_over): it has sent Nd its last frame and ended its lease there.
                    det.ok(now, now - t0)
                    self._handover = True
                    self.counters["heartbeat_primary_leaving"] += 1
                elif reply.stalled_ms:
                    # Alive, but its operator has stopped (OperatorWatch): a primary that works no more.
                    det.missed(now, started=t0)
                    self.counters["heartbeat_primary_stalled"] += 1
                    if self._primary_stalled.due():
                        self.log.warning("%s: the primary says its operator stalled or failed (its oldest call "
                                         "%.1f s old): counted as a missed heartbeat", self.name,
                                         reply.stalled_ms / 1000)
                else:
                    det.ok(now, now - t0)
                with self.lock:
                    self.counters["heartbeats"] += 1
                    self.state.fence.advance(reply.epoch)
                    self._primary_reached(reply.received_through, now)
                    self._on_level0(reply.level0)
            else:
                # A fenced (or demoted) node still answers, but it is no primary: count it as a failure.
                det.missed(now, started=t0)
                self.counters["heartbeat_not_primary"] += 1
        suspected = self._handover or det.suspects_after_beat(self.clock())
        if det.stalls > stalls:
            self.log.warning("%s: this node stood still for more than %.1f s (paused, or starved of CPU); the "
                             "primary is watched again from now", self.name, det.stall_after)
        if suspected:
            self.take_over()
            return
        self._beat_now.wait(max(0.0, det.next_beat_in() - (self.clock() - t0)))

    def _primary_reached(self, received: int, now: float) -> None:
        """Holding the lock: a heartbeat says the primary has received through `received`; a covering
        checkpoint that came before it and is now vouched for is applied (`_apply_covering`)."""
        if received > self.primary_received:
            self.primary_received = received
            self._primary_seen.append((now, received))
        self._apply_covering()

    def take_over(self) -> None:
        """Seed 000 section 3.6, made Precise: the steps of core/recovery.py, one method each."""
        times = self._detect()  # 1
        epoch = self._fence_self(times)  # 2
        req = m.TakeoverRequest(node=self.name, epoch=epoch, address=self.cfg.advertise,
                                primary_unheard_ms=self._unheard_ms(times))
        nd = self._connect_nd(req)  # 3
        if nd is None:
            return
        self._start_work()
        plan = self._plan(epoch, nd)  # 4
        nu = self._connect_nu(req, plan)  # 5
        if nu is None:
            return
        times.connected = self.clock()
        self._replay(plan, nu)  # 6
        self._resume(plan, nu, times)  # 7

    def _detect(self) -> RecoveryTimes:
        """1. detect: the detector suspects the primary; the recovery is timed from its last good heartbeat."""
        det = self.detector
        now = self.clock()
        self._wall_detected = time.time()
        return RecoveryTimes(last_ok=det.last_ok if det else now, detected=now)

    def _unheard_ms(self, times: RecoveryTimes) -> int:
        """How long this node has surely not heard its primary, in ms, for Nd to weigh against the primary's
        last frame (core.recovery.PrimaryLease): since the last good heartbeat (or since the detector
        watched again), less one interval, the most a live primary's answers are apart. 0 when no answer
        came since this node started watching."""
        det = self.detector
        if det is None or not det.heard:
            return 0
        unheard = times.detected - times.last_ok - self.cfg.heartbeat_interval
        return min(0xFFFFFFFF, max(0, int(unheard * 1000)))

    def _fence_self(self, times: RecoveryTimes) -> int:
        """2. fence: a new epoch; PROMOTING refuses further backup batches, so what we hold is frozen."""
        with self.lock:
            epoch = self.state.epoch + 1
            self.state.become(Role.PROMOTING, epoch=epoch)
            # What this standby still had to process when it took over.
            self._backlog_at_takeover = (max(0, self.received_through - self._done_through()),
                                         self._in_flight_tuples)
            self._gathering, self._gather = self.operator.takeover_gather, None
            self._working = False
        # A standby cut off from a live primary tries again after each timeout: said once, as declines are.
        quiet = self._declined.recently()
        if self._handover:
            self.log.warning("%s: the primary hands over; taking over in epoch %d", self.name, epoch)
        else:
            self.log.log(logging.INFO if quiet else logging.WARNING, "%s: primary suspected after %.0f ms; "
                         "taking over in epoch %d", self.name, times.detection * 1000, epoch)
        return epoch

    def _connect_nd(self, req: m.TakeoverRequest) -> m.TakeoverReply | None:
        """3. connect Nd: it refuses the old epoch from now on and tells what it holds. A refusal (someone
        newer won) sends this node back to standby; so does a decline (the primary still delivers to Nd),
        in the epoch before."""
        assert self.downstream is not None
        nd = self.downstream
        return self._retry(nd, "downstream", req, on_refusal=self._back_to_standby, on_decline=self._withdraw,
                           on_wait=self._start_work)

    def _start_work(self) -> None:
        """The operator starts on what this node holds while the links are rebuilt (unless it gathers: see
        Operator.takeover_gather): once Nd has taken the takeover, or as soon as Nd keeps it waiting
        (unreachable, stopped). Not before Nd's first answer: a takeover Nd declines (its primary still
        delivers) then costs no decoding, and a standby cut off from a live primary for long tries again
        after every detector timeout. Once per takeover, and before the plan (`_unseal`)."""
        if self._working:
            return
        self._working = True
        self._unseal()
        self.operator.lazy(False)

    def _plan(self, epoch: int, nd: m.TakeoverReply) -> TakeoverPlan:
        """4. plan: replay OQ' beyond Nd's last; ask Nu for everything after what we received."""
        with self.lock:
            self._on_level0(nd.delivered_through)
            return plan_takeover(epoch=epoch, delivered_through=nd.delivered_through,
                                 received_through=self.received_through, oq_first=self.oq.first, oq_last=self.oq.last)

    def _connect_nu(self, req: m.TakeoverRequest, plan: TakeoverPlan) -> m.TakeoverReply | None:
        """5. connect Nu: it fences the old primary, stops the backup and resends what we lack."""
        assert self.upstream is not None
        nu, req.resend_from = self.upstream, plan.resend_from
        reply = self._retry(nu, "upstream", req)
        if reply is not None:
            with self.lock:
                if reply.checkpoint.input_pos > self.received_through:
                    self._jump(reply.checkpoint, reply.params)  # Nu resends from after its trim point
                else:
                    self._note_covered(reply.checkpoint, reply.params)  # what we hold through it: skipped
        return reply

    def _replay(self, plan: TakeoverPlan, nu: m.TakeoverReply) -> None:
        """6. replay: the output loop sends OQ' from Nd's last + 1 (never anything Nd holds)."""
        with self.lock:
            self.sent_next = plan.delivered_through + 1
            self._resync_output = False  # Nd just said where it stands (step 3)
            self.state.become(Role.PRIMARY)
            self._primary_since = self.clock()
            self._worked = True  # a promoted standby holds IQ' and OQ': fenced, never rejoined
            if self._gathering:
                self._gather = (nu.head_pos, self.clock() + GATHER_MAX_S)
            self.counters["takeovers"] += 1
            self.counters["replayed_from_oq"] += plan.replay_count
            self.recovery = {
                "epoch": plan.epoch,
                "replayed_from_oq": plan.replay_count,
                "resend_from": nu.resend_from,
                "resent_by_nu": max(0, nu.head_pos - nu.resend_from + 1),
                "head_at_takeover": nu.head_pos,
                "delivered_at_takeover": plan.delivered_through,
                "received_at_takeover": plan.resend_from - 1,
                "backlog_at_takeover": self._backlog_at_takeover[0],
                "in_flight_at_takeover": self._backlog_at_takeover[1],
            }
            self.lock.notify_all()

    def _resume(self, plan: TakeoverPlan, nu: m.TakeoverReply, times: RecoveryTimes) -> None:
        """7. resume: live once every input Nu held at takeover is processed and its outputs are in Nd.
        (Not "IQ empty": under continuous load that target keeps moving and measures the load, not the
        recovery.)"""
        with self.lock:
            while not self.stopped and self.state.role is Role.PRIMARY and self.processed.input_pos < nu.head_pos:
                self.lock.wait(0.005)
            processed_at = self.clock()
            target = self.processed.output_count
            while not self.stopped and self.state.role is Role.PRIMARY and self.level0 < target:
                self.lock.wait(0.005)
            times.live = self.clock()
            phases = times.phases()
            for phase, buckets in self.recovery_seconds.items():
                buckets.observe(phases[phase])
            self.recovery.update({f"{p}_ms": v * 1000 for p, v in phases.items()})
            self.recovery["recovery_ms"] = (phases["reconnection"] + phases["data_recovery"]) * 1000
            # Where data recovery went: the operator catching up to Nu's head, then Nd acknowledging.
            self.recovery["catch_up_ms"] = (processed_at - times.connected) * 1000
            self.recovery["total_ms"] = sum(phases.values()) * 1000
            self.recovery["detected_at"] = self._wall_detected
            self.recovery["cause"] = "handover" if self._handover else "detector"
            self.recovery["live_at"] = self._wall_detected + (times.live - times.detected)
        self.log.warning("%s: live as primary in epoch %d: %s", self.name, plan.epoch, self.recovery)

    def _back_to_standby(self) -> None:
        """Nd refused our epoch: nothing changed anywhere. Learn the epoch in force and watch again."""
        assert self.downstream is not None
        try:
            epoch = self.downstream.status(self.cfg.rpc_timeout).epoch
        except PeerError:
            epoch = self.state.epoch + 1
        with self.lock:
            self.state.become(Role.STANDBY, epoch=max(self.state.epoch, epoch))
            self._handover = False
            self.operator.lazy(True)
            if self.detector:
                self.detector.restart(self.clock())
        self.counters["takeovers_refused"] += 1

    def _withdraw(self, why: str) -> None:
        """Nd declined the takeover: its primary delivered within the lease (core.recovery.PrimaryLease), so
        this node lost its primary, not the pipeline. Nothing changed anywhere: back to a lazy standby in the
        epoch in force, watching again. One line, then one every LINK_REMIND_S while it goes on (a standby
        cut off from a live primary tries again after each detector timeout)."""
        with self.lock:
            self.state.withdraw()
            # A primary that said it is leaving never works again: asked again at the next heartbeat (its lease
            # runs out within takeover_lease), answered or not, not after the detector's timeout.
            self.operator.lazy(True)
            if self.detector:
                self.detector.restart(self.clock())
            self.counters["takeovers_declined"] += 1
            if self._declined.due():
                self.log.warning("%s: takeover declined, %s; standby again in epoch %d (%d declined so far)",
                                 self.name, why, self.state.epoch, self.counters["takeovers_declined"])

    def _retry(self, peer: Peer, who: str, req: m.TakeoverRequest,
               on_refusal: Callable[[], None] | None = None,
               on_decline: Callable[[str], None] | None = None,
               on_wait: Callable[[], None] | None = None) -> m.TakeoverReply | None:
        """Takeover at `peer` until answered; a refusal (stale epoch) ends the takeover: back to standby,
        or fenced; so does a decline where `on_decline` is given (Nd: its primary still delivers).
        `on_wait` runs after each attempt that got no answer (it runs its work once)."""
        backoff = Backoff(0.02, 0.5)
        while not self.stopped:
            try:
                reply = peer.takeover(req, self.cfg.rpc_timeout)
                self.links.note(who, peer.address, None)
                return reply
            except PeerError as e:
                self.links.note(who, peer.address, e)
                if on_decline is not None and declined_by(e.status):
                    on_decline(e.message)
                    return None
                if fenced_by(e.status):
                    self.log.warning("%s: takeover refused by %s: %s", self.name, who, e)
                    if on_refusal is not None:
                        on_refusal()
                        return None
                    with self.lock:
                        self._fence(f"{who} refused the takeover")
                    return None
                self.counters[f"takeover_retry_{who}"] += 1
                if on_wait is not None:
                    on_wait()
                self.sleep(backoff.next())
        return None

    def _done_through(self) -> int:
        """The last input that needs no more work here: processed, or covered by Nd's output (skipped)."""
        return max(self.processed.input_pos, self._covered[0].input_pos)

    def standby_lag(self) -> tuple[int, float]:
        """How far this standby is behind the primary: inputs the primary holds that this node has not
        processed yet and Nd's output does not cover (the work a takeover would start with), and for how
        long the oldest of them has been there (seconds since the primary's heartbeats first showed it).
        (0, 0.0) for a primary; a standby with about one operator call of work left takes over in about one
        call."""
        if self.state.role is not Role.STANDBY:
            return 0, 0.0
        done = self._done_through()
        seen = self._primary_seen
        while seen and seen[0][1] <= done:
            seen.popleft()
        behind = max(0, self.primary_received - done)
        return behind, (self.clock() - seen[0][0]) if (behind and seen) else 0.0

    def snapshot(self) -> dict:
        lag_tuples, lag_seconds = self.standby_lag()
        oldest = self._oldest_call()
        s = super().snapshot()
        s["counters"]["backup_decoded_tuples"] = self.held.decoded_tuples
        s.update({
            "sealed_runs": len(self.held),
            "standby_lag_tuples": lag_tuples,
            "standby_lag_seconds": round(lag_seconds, 3),
            "cover_latency_s": round(self.cover_latency, 3) if self.cover_latency is not None else None,
            "received_through": self.received_through,
            "processed": [self.processed.input_pos, self.processed.output_count],
            "processed_at": self.processed_at,
            "first_processed_at": self.first_processed_at,
            "level0": self.level0,
            "level1": [self.level1.current.input_pos, self.level1.current.output_count],
            "iq_depth": len(self.iq),
            "oq_depth": len(self.oq),
            "oq_first": self.oq.first,
            "oq_last": self.oq.last,
            "operator": self.operator.name,
            "operator_switches": getattr(self.operator, "switches", []),
            "recovery": self.recovery,
            "heartbeat_rtt_ms": self.detector.last_rtt * 1000 if self.detector else 0.0,
            "heartbeat_misses_total": self.detector.total_misses if self.detector else 0,
            "heartbeat_stalls": self.detector.stalls if self.detector else 0,
            "primary_heard": self.detector.heard if self.detector else None,
            "operator_oldest_call_s": 0.0 if oldest is None else round(self.clock() - oldest, 3),
            "operator_stalled": self.watch.stalled,
            "operator_failed": self.watch.failed,
            "operator_slowest_call_s": round(self.slowest_call_s, 3),
        })
        return s
