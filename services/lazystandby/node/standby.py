"""The standby's side of an operator node (N'): registration with Nu, the backup from Nu into IQ', held
sealed and decoded only when needed (Algorithm 2), covering by Nu's Level-1 point so that covered inputs
are skipped (the lazy standby), and the heartbeats that watch the primary and start a takeover.

A mixin over `operator_base.OperatorBase`, whose state it reads and changes under the node's lock.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections import deque

from ..core import messages as m
from ..core import tuples
from ..core.acks import Checkpoint
from ..core.admission import covered_head
from ..core.codec import BatchDecoder, DecoderPosition
from ..core.detector import FailureDetector
from ..core.errors import LazyStandbyError, PeerError, Status
from ..core.held import Sealed
from ..core.recovery_model import (
    DEFER_LADDER,
    INTERVAL_LADDER,
    TUNE_EVERY_S,
    RecoveryTerms,
    StandbyView,
    calls_seconds,
    choose_cheapest,
    crash_detection_s,
)
from ..core.reminder import Reminder
from ..core.roles import Role
from ..core.tuples import TupleBatch
from ..transport.peer import Peer
from .common import LINK_REMIND_S, Backoff


class StandbySide:
    """N' as the standby: the backup in, the primary watched."""

    def _init_standby(self) -> None:
        """The standby's own state (OperatorNode calls it once the shared state is set)."""
        self.decoder = BatchDecoder(self.cfg.name, max_batch_bytes=self.cfg.max_message_bytes)
        self._decoding = threading.Lock()
        # Covering checkpoints not applied yet, oldest first: one applies once this node holds what it covers
        # and a heartbeat has shown the primary got that far (a Level-1 point is never ahead of the primary),
        # whichever comes last (`_apply_covering`, at both events). The backup runs behind the primary (at
        # Bsize 1 by tens of thousands of inputs at full speed, each frame's checkpoint past its runs), and at
        # moderate rates most frames come just before the heartbeat that vouches for them: applied only when
        # both hold at once, covering would lag by up to a second, and N' would process what it could skip.
        self._covering: deque[tuple[Checkpoint, m.Params | None]] = deque()
        # A standby's view: the primary peer whose connection is watched, whether its transport tells of a
        # lost connection (Peer.watch), and when it last did (taken by the heartbeat loop).
        self._watched = None
        self._notices = False
        self._lost_at: float | None = None
        self._primary_stalled = Reminder(self.clock, LINK_REMIND_S)  # logs a primary that says it is stalled
        self.registered = threading.Event()
        self._watching = False  # the registration and heartbeat loop are started (`_watch_as_standby`)
        self.primary_operator_cost = (0.0, 0.0)
        self.recovery_hint: m.RecoveryHint | None = None
        self._rtts: deque[float] = deque(maxlen=32)
        self._beat_late: deque[float] = deque(maxlen=32)  # seconds each heartbeat started after it was due
        self._beat_due: float | None = None  # when the next heartbeat is due (None: none scheduled)
        self.view = None  # its part of Nu's predictions (StandbyView), made with it
        self.standby_defer = self.cfg.standby_defer  # or what `_tune_standby` chose for recovery_target_ms
        self._standby_tune_at = 0.0
        self._standby_rate_mark: tuple[float, int] | None = None


    def _watch_as_standby(self) -> None:
        """A standby's own work: register with Nu, watch the primary's heartbeats, keep the operator lazy.
        Once per life: a primary that rejoins while start() runs must not get a second heartbeat loop (two
        would both take over)."""
        with self.lock:
            if self._watching:
                return
            self._watching = True
        # In the background: Nu may start after us, and registration waits for it.
        t = threading.Thread(target=self._register_with_upstream, name=f"{self.name}:register", daemon=True)
        t.start()
        self._threads.append(t)
        self.detector = FailureDetector(self.cfg.heartbeat_interval, self.cfg.heartbeat_misses, self.clock(),
                                        self.cfg.heartbeat_grace, notice_hold=self._notice_hold())
        self.operator.lazy(True)  # only a takeover needs a standby's answers
        self.spawn("heartbeat", self._heartbeat_loop)

    def _notice_hold(self) -> float:
        """How long after the notice of a lost connection to the primary a refusal suspects it
        (core.detector): its lease at Nd, which runs at most that long after its last frame, and a tenth of
        an interval for that frame's arrival (Nd takes its time once its handler runs, later than the
        frame was sent on a busy node) against a takeover that would be declined and cost a whole round."""
        return min(self.cfg.lease_s + self.cfg.heartbeat_interval / 10, self.cfg.heartbeat_interval)

    def _watch_connection(self, peer) -> None:
        """The primary's connection watched (Peer.watch), once per peer: its loss wakes the heartbeat loop,
        which tells the detector (the notice's time taken here, on the transport's thread)."""
        if peer is None or peer is self._watched:
            return
        self._watched = peer

        def lost() -> None:
            if self._watched is peer:
                self._lost_at = self.clock()
                self._beat_now.set()

        self._notices = peer.watch(lost)

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
            if self.downstream is not None:
                self.downstream.warm()  # its first call to Nd is its takeover's: connected before it is needed
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
                if msg.hint is not None:
                    self.recovery_hint = msg.hint
                if decoded and self._plausible(msg.checkpoint):
                    decoded = self._drop_covered(decoded, msg.checkpoint)
                if decoded:
                    self._admit(decoded, msg.checkpoint, msg.params)
                    self.counters["backup_tuples"] += sum(map(len, decoded))
                    self.counters["backup_batches"] += len(msg.batches) + sum(len(r.counts) for r in msg.runs)
                elif msg.checkpoint.input_pos > self.received_through:
                    # Nu trimmed past what it batched for us: nothing before the checkpoint is needed any more
                    # (once the primary's heartbeat shows it got that far: a checkpoint is never ahead of it).
                    if self.stateful:
                        pass  # Nu may still hold inputs before it that the state needs: they come as runs
                    elif self._plausible(msg.checkpoint):
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
                return m.BackupAck(applied_through=self.received_through, view=self.view)

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
        if not n or self.stateful:
            return batches  # a stateful node rebuilds from the covered inputs instead (`_admit`)
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
        if self.passive and self.state.role is Role.STANDBY:
            return self._snapshot_through() or 0  # a Passive Standby takes only what a snapshot covers, to drop it
        head = self.iq.head()
        # A stateful standby whose operator paces itself (Operator.paces_standby: Spark's feed) takes every
        # input on arrival: it skips none, and what waited here would be decoded and handed over only at a
        # takeover (docs/faults.md, the Spark window kills).
        wait = 0.0 if self.stateful and self.operator.paces_standby else self.standby_defer
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
            self._beat_due = None
            return
        t0 = self.clock()
        lost_at, self._lost_at = self._lost_at, None
        if lost_at is not None:
            det.lost(lost_at)
            self.counters["primary_connection_lost"] += 1
        if self._beat_due is not None and t0 >= self._beat_due:
            # How late this heartbeat starts (the thread's wake-up on busy cores, the lock): a crash's
            # detection is made of such beats (core.recovery_model.crash_detection_s). One woken early (a
            # notice) is no sample.
            self._beat_late.append(t0 - self._beat_due)
        self._beat_due = None
        stalls = det.stalls
        det.beat(t0)
        self._beat_now.clear()  # a notice from now on is for the next beat
        peer = self.primary
        self._watch_connection(peer)
        try:
            if peer is None:
                raise PeerError(Status.UNAVAILABLE, "no primary known")
            with self.lock:
                predicted = self.predicted = self.predicted_recovery()
                self.view = self._standby_view()  # for Nu, with each backup answer until the next heartbeat
                self._tune_standby(t0)
                chosen = self.standby_choice
                interval = chosen.value if self.passive and chosen is not None else 0.0
            reply = peer.heartbeat(m.HeartbeatRequest(sender=self.name, epoch=self.state.epoch,
                                                      address=self.cfg.advertise,
                                                      predicted_recovery_s=predicted.seconds if predicted else 0.0,
                                                      snapshot_interval_s=interval),
                                   self.cfg.heartbeat_interval)
        except PeerError as e:
            self.links.note("primary", peer.address if peer is not None else "", e)
            det.missed(self.clock(), refused=e.refused, started=t0)
            self.counters["heartbeat_misses"] += 1
            if e.refused:
                self.counters["heartbeat_refused"] += 1
        else:
            self._heartbeat_answered(peer, reply, t0)
        suspected = self._handover or det.suspects_after_beat(self.clock())
        if det.stalls > stalls:
            self.log.warning("%s: this node stood still for more than %.1f s (paused, or starved of CPU); the "
                             "primary is watched again from now", self.name, det.stall_after)
        if suspected:
            self.take_over()
            return
        self._beat_due = t0 + det.next_beat_in(t0)
        self._beat_now.wait(max(0.0, self._beat_due - self.clock()))

    def _heartbeat_answered(self, peer: Peer, reply: m.HeartbeatReply, t0: float) -> None:
        """A heartbeat sent at `t0` was answered: by a primary (alive, leaving at its handover, or with its
        operator stalled, which counts as a miss) or by a node that is no primary (a miss)."""
        det = self.detector
        assert det is not None
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
                self._rtts.append(now - t0)
                self.primary_operator_cost = (reply.operator_call_s, reply.operator_tuple_s)
                self.state.fence.advance(reply.epoch)
                self._primary_reached(reply.received_through, now)
                self._on_level0(reply.level0)
        else:
            # A fenced (or demoted) node still answers, but it is no primary: count it as a failure.
            det.missed(now, started=t0)
            self.counters["heartbeat_not_primary"] += 1

    def predicted_recovery(self) -> RecoveryTerms | None:
        """Holding the lock: how long a takeover by this standby would take if its primary crashed now
        (core.recovery_model), or None when this node is no standby watching a primary.

        Nu resends from what this node lacks (from what it received, or from Nu's floor when that is later:
        then a stateful node rebuilds from there and drops what it held) through Nu's head (the newer of
        Nu's hint and the primary's heartbeat); the new primary processes that and its own backlog in
        calls of up to `_take` tuples, at the primary's measured cost per call and per tuple when the
        primary says it (a standby's calls wait by design, which its own timings would count), else its
        own."""
        if self.state.role is not Role.STANDBY or self.detector is None:
            return None
        held = self.received_through
        resend, resend_s, rebuild = self._resend_estimate()
        replay = resend + (0 if rebuild else max(0, held - self._done_through()))
        cost = self._replay_cost()
        replay_s = self._replay_s(replay, cost)
        rtt = statistics.median(self._rtts) if self._rtts else 0.0
        late = statistics.median(self._beat_late) if self._beat_late else 0.0
        # A Passive Standby loads its snapshot first: about what the primary took to encode it.
        restore_s = self.snapshot_encode_s if self.passive and self.snapshot_held is not None else 0.0
        # A refused heartbeat is taken to come back in about a round trip (a connection refused at once).
        detection_s = crash_detection_s(self.cfg.heartbeat_interval, self.cfg.heartbeat_misses, late, rtt,
                                        notice_hold_s=self.detector.notice_hold if self._notices else None)
        return RecoveryTerms(detection_s=detection_s, reconnection_s=2 * rtt, resend_s=resend_s,
                             replay_s=replay_s, replay_tuples=replay, restore_s=restore_s,
                             complete=(self.recovery_hint is not None or not resend)
                             and (cost is not None or not replay))

    def _resend_estimate(self) -> tuple[int, float, bool]:
        """Holding the lock: what Nu would resend at a takeover now, the seconds its link takes for it, and
        whether it starts past what this node holds (a rebuild from Nu)."""
        hint, held = self.recovery_hint, self.received_through
        head = max(self.primary_received, hint.head_pos if hint else 0)
        start = max(held + 1, hint.resend_floor if hint else 0)
        resend = max(0, head - start + 1)
        resend_s = 0.0
        if hint is not None and resend:
            resend_s = calls_seconds(resend, hint.frame_max, hint.per_call_s, hint.tuple_bytes * hint.per_byte_s)
        return resend, resend_s, start != held + 1

    def _replay_s(self, tuples: int, cost: tuple[float, float] | None) -> float:
        """Seconds the operator takes for `tuples` in calls of up to `_take` (0 without a cost)."""
        return 0.0 if cost is None else calls_seconds(tuples, self._take, *cost)

    def _tune_standby(self, now: float) -> None:
        """Holding the lock: with recovery_target_ms, every TUNE_EVERY_S, the cheapest standby_defer (a warm
        standby) or snapshot_interval (a Passive Standby: its primary takes it from the heartbeats) whose
        predicted recovery meets the target (core.recovery_model.choose_cheapest): what waits for the
        takeover grows with it, by the primary's input rate."""
        target = self.cfg.recovery_target_ms / 1000
        paced = not self.passive and self.stateful and self.operator.paces_standby  # no deferral to choose
        if not target or now < self._standby_tune_at or paced:
            return
        self._standby_tune_at = now + TUNE_EVERY_S
        mark, self._standby_rate_mark = self._standby_rate_mark, (now, self.primary_received)
        p, cost = self.predicted, self._replay_cost()
        if p is None or cost is None or mark is None or now <= mark[0]:
            return
        rate = max(0.0, (self.primary_received - mark[1]) / (now - mark[0]))
        resend, resend_s, _ = self._resend_estimate()
        fixed = p.detection_s + p.reconnection_s + p.restore_s + resend_s

        def predict(x: float) -> float:
            return fixed + self._replay_s(resend + math.ceil(rate * x), cost)

        ladder = INTERVAL_LADDER if self.passive else DEFER_LADDER
        self.standby_choice = choice = choose_cheapest(target, predict, ladder)
        if not self.passive:
            self.standby_defer = choice.value

    def _standby_view(self) -> StandbyView | None:
        """Holding the lock: this standby's part of a predicted recovery, for Nu to choose Bsize with
        (core.recovery_model.StandbyView); None before its first prediction or an operator call timed."""
        p = self.predicted
        cost = self._replay_cost()
        if p is None or cost is None:
            return None
        return StandbyView(fixed_s=p.detection_s + p.reconnection_s, call_s=cost[0], tuple_s=cost[1], take=self._take,
                           backlog=max(0, self.received_through - self._done_through()))

    def _replay_cost(self) -> tuple[float, float] | None:
        """The operator's cost per call and per tuple: the primary's when it says it (a standby's calls wait
        by design, which its own timings would count), else this node's own; None when neither is known."""
        return self.primary_operator_cost if any(self.primary_operator_cost) else self.operator_cost.fit()

    def _primary_reached(self, received: int, now: float) -> None:
        """Holding the lock: a heartbeat says the primary has received through `received`; a covering
        checkpoint that came before it and is now vouched for is applied (`_apply_covering`)."""
        if received > self.primary_received:
            self.primary_received = received
            self._primary_seen.append((now, received))
        if received > 0 and self.cpu_at_first_input is None:
            # A standby sent no backup (Bsize inf: a Passive Standby holding only snapshots) learns here that
            # inputs flow, within a heartbeat of the primary's first: what it spends from then is the
            # pipeline's, over the same time as the primary's.
            self.cpu_at_first_input = time.process_time()
        self._apply_covering()
