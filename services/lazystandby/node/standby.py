"""The standby's side of an operator node (N'): registration with Nu, the backup from Nu into IQ', held
sealed and decoded only when needed (Algorithm 2), covering by Nu's Level-1 point so that covered inputs
are skipped (the lazy standby), and the heartbeats that watch the primary and start a takeover.

A part of the operator node (`node.standby_side`), holding the standby's own state (the primary it
watches and its detector, the decoder, what the heartbeats said); it reads and changes the node's
(`self.n`: IQ', OQ', its role, its links) under the node's lock. Three of its own parts are objects too,
each holding its state: the covering checkpoints not applied yet (covering.PendingCovers), the primary's
connection watch (connection_watch.ConnectionWatch) and the forecast of its takeover
(forecast.RecoveryForecast), which reads the node only through a Backlog.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import TYPE_CHECKING

from ..core import messages as m
from ..core import tuples
from ..core.acks import Checkpoint
from ..core.admission import covered_head
from ..core.codec import BatchDecoder, DecoderPosition
from ..core.detector import FailureDetector
from ..core.errors import LazyStandbyError, PeerError, Status
from ..core.held import Sealed
from ..core.recovery_model import RecoveryTerms
from ..core.reminder import Reminder
from ..core.roles import Role
from ..core.tuples import TupleBatch
from ..transport.peer import Peer
from .common import LINK_REMIND_S, Backoff
from .connection_watch import ConnectionWatch, notice_hold_s
from .covering import PendingCovers
from .forecast import Backlog, RecoveryForecast

if TYPE_CHECKING:
    from .operator_base import OperatorBase


class StandbySide:
    """N' as the standby: the backup in, the primary watched."""

    def __init__(self, node: OperatorBase) -> None:
        """`node`: the operator node whose standby this side is, its shared state set."""
        self.n = node
        self.decoder = BatchDecoder(self.n.cfg.name, max_batch_bytes=self.n.cfg.max_message_bytes)
        self._decoding = threading.Lock()
        self.covering = PendingCovers()
        self.connection = ConnectionWatch(self.n.clock, lambda: self.beat_now.set())
        self._primary_stalled = Reminder(self.n.clock, LINK_REMIND_S)  # logs a primary that says it is stalled
        self.registered = threading.Event()
        # The primary watched (at first the configured one), and the detector once the watch starts.
        cfg = self.n.cfg
        self.primary: Peer | None = self.n.peers(cfg.primary) if cfg.primary and cfg.role != "primary" else None
        self.detector: FailureDetector | None = None
        self.primary_received = 0  # the primary's received_through, from its heartbeats
        self.primary_seen: deque[tuple[float, int]] = deque(maxlen=4096)  # (when, primary_received)
        self.handover = False  # the primary of this epoch said it is leaving
        self.beat_now = threading.Event()  # the primary's handover notice came (or a stop)
        self._watching = False  # the registration and heartbeat loop are started (`watch`)
        self._beat_due: float | None = None  # when the next heartbeat is due (None: none scheduled)
        self.forecast = RecoveryForecast(self.n.cfg, passive=self.n.passive)

    def watch(self) -> None:
        """A standby's own work: register with Nu, watch the primary's heartbeats, keep the operator lazy.
        Once per life: a primary that rejoins while start() runs must not get a second heartbeat loop (two
        would both take over)."""
        with self.n.lock:
            if self._watching:
                return
            self._watching = True
        # In the background: Nu may start after us, and registration waits for it.
        self.n.run_once("register", self.register_with_upstream)
        self.detector = FailureDetector(self.n.cfg.heartbeat_interval, self.n.cfg.heartbeat_misses, self.n.clock(),
                                        self.n.cfg.heartbeat_grace, notice_hold=notice_hold_s(self.n.cfg))
        self.n.operator.lazy(True)  # only a takeover needs a standby's answers
        self.n.spawn("heartbeat", self.heartbeat_loop)

    def register_with_upstream(self) -> None:
        """A standby starts empty: Nu re-cuts its backup from the trim point for it. Nu (started last) holds
        its source until this registration (standby_wait), so it should come as soon as Nu listens."""
        if self.n.upstream is None:
            return
        # Retried every 50 ms at most: until it registers, this standby watches no primary, and a fresh Nu
        # admits nothing (standby_wait). A refused call gets a new channel for the next try: on the old one,
        # gRPC's own reconnect backoff (up to 500 ms) would hold the registration after Nu listens. Nothing
        # else uses the upstream channel before the registration (the heartbeat loop waits for it).
        backoff = Backoff(0.01, 0.05)
        said = None  # the status last logged: a line per change, not per try (the link's log adds when it recovers)
        while not self.n.stopped:
            try:
                reply = self.n.upstream.register_standby(
                    m.RegisterStandby(node=self.n.name, address=self.n.cfg.advertise), self.n.cfg.rpc_timeout)
            except PeerError as e:
                self.n.links.note("upstream", self.n.upstream.address, e)
                if e.status != said:
                    said = e.status
                    self.n.log.info("%s: registering with Nu failed (%s); retrying", self.n.name, e)
                if e.refused:
                    stale, self.n.upstream = self.n.upstream, self.n.peers(self.n.upstream.address)
                    stale.close()
                self.n.sleep(backoff.next())
                continue
            self.n.links.note("upstream", self.n.upstream.address, None)
            if self.n.downstream is not None:
                self.n.downstream.warm()  # its first call to Nd is its takeover's: connected before it is needed
            with self.n.lock:
                self.n.state.fence.advance(reply.epoch)
                self._watch_primary_at(reply.primary_address, reply.epoch)
                self.registered.set()
                # The first heartbeat now: the primary learns where this standby hears of a handover
                # before Nu, re-seeding the backup, reports it in sync.
                self.beat_now.set()
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
            self.n.log.warning("%s: Nu names %s the primary of epoch %d; the configured primary %s (the first "
                               "primary's) is not watched", self.n.name, address, epoch, self.primary.address)
            self.primary.close()
        self.primary = self.n.peers(address)

    def handle_backup(self, msg: m.BackupFrame) -> m.BackupAck:
        """Algorithm 2: decompress each batch, then queue its tuples in IQ' in order.

        Decompression runs outside the node lock (heartbeats and the operator go on meanwhile), one backup
        call at a time, bounded by what each batch declares; the decoder moves on only when the batches
        are admitted."""
        with self.n.lock:
            if self.n.state.role is not Role.STANDBY:
                raise self.n.wrong_role("Backup")
            self.n.check_epoch(msg.epoch, msg.sender, "backup")
        with self._decoding:
            lazy = bool(msg.runs) and not msg.batches
            if lazy:  # Algorithm 2, decompressing later, if ever (core/held.py)
                held, ledger = self.n.held.accept(msg.runs)
                decoded: list = [Sealed(h, self.n.held, h.first, h.end) for h in held]
            else:
                raws, position = self.decoder.decode_many([bb.encoded for bb in msg.batches])
                what = f"{self.n.name}: backup batch"
                decoded = [self.n.inbound.check_tuples(tuples.decode_frame(raw, bb.first, bb.count,
                                                                           what=f"{what} {bb.first}"),
                                                       f"backup batch {bb.first}")
                           for bb, raw in zip(msg.batches, raws, strict=True)]
                for run in msg.runs:
                    batch, position = self._decode_run(run, position)
                    decoded.append(batch)
            with self.n.lock:
                if self.n.state.role is not Role.STANDBY:
                    raise self.n.wrong_role("Backup")  # promoted while this call decoded: what we hold is frozen
                if msg.hint is not None:
                    self.forecast.hint = msg.hint
                if decoded and self._plausible(msg.checkpoint):
                    decoded = self._drop_covered(decoded, msg.checkpoint)
                if decoded:
                    self.n.admit(decoded, msg.checkpoint, msg.params)
                    self.n.counters["backup_tuples"] += sum(map(len, decoded))
                    self.n.counters["backup_batches"] += len(msg.batches) + sum(len(r.counts) for r in msg.runs)
                elif msg.checkpoint.input_pos > self.n.inbound.received_through:
                    # Nu trimmed past what it batched for us: nothing before the checkpoint is needed any more
                    # (once the primary's heartbeat shows it got that far: a checkpoint is never ahead of it).
                    if self.n.stateful:
                        pass  # Nu may still hold inputs before it that the state needs: they come as runs
                    elif self._plausible(msg.checkpoint):
                        self.n.jump(msg.checkpoint, msg.params)
                    else:
                        self.n.counters["checkpoints_deferred"] += 1
                if decoded or msg.checkpoint.input_pos <= self.n.inbound.received_through:
                    self.covering.hold(msg.checkpoint, msg.params, self.n.covered[0].input_pos)
                self._apply_covering()
                if lazy:
                    self.n.held.commit(held, ledger)
                else:
                    self.decoder.commit(position)
                    if msg.runs or msg.batches:
                        self.n.held.restart_session()  # the link's session moved on in the eager decoder
                return m.BackupAck(applied_through=self.n.inbound.received_through, view=self.forecast.view)

    def _apply_covering(self) -> None:
        """Holding the lock: the newest kept checkpoint within both what this node holds and what the
        primary's heartbeats say it has received covers what it holds (older ones are covered by it)."""
        if self.n.state.role is not Role.STANDBY:
            return
        reached = self.covering.reached(min(self.n.inbound.received_through, self.primary_received))
        if reached is not None:
            self.n.note_covered(*reached)

    def _drop_covered(self, batches: list[TupleBatch], ckpt: Checkpoint) -> list[TupleBatch]:
        """Holding the lock: `batches` without the leading positions `ckpt` covers when they skip ahead of
        what this node holds (core.admission.covered_head); what is left starts just after the checkpoint,
        an ordinary jump. Nothing left: the frame is then one without batches, whose checkpoint jumps."""
        n = covered_head(self.n.inbound.received_through, batches[0].first, ckpt)
        if not n or self.n.stateful:
            return batches  # a stateful node rebuilds from the covered inputs instead (`admit`)
        self.n.counters["backup_covered_dropped"] += min(n, sum(map(len, batches)))
        cut = ckpt.input_pos + 1
        return [b.slice(cut, b.end) if b.first < cut else b for b in batches if b.end > cut]

    def _decode_run(self, run: m.BackupRun, position: DecoderPosition) -> tuple[TupleBatch, DecoderPosition]:
        """A run of backup batches decoded and checked as one batch (its batches are consecutive), and where
        the decoder will stand after it (nothing moves until the frame is admitted)."""
        what = f"{self.n.name}: backup run {run.first}"
        raw, position = self.decoder.decode_run(run.encoded, position)
        batch = tuples.decode_counted(raw, run.first, run.counts, run.encoded.raw_sizes, what=what)
        return self.n.inbound.check_tuples(batch, f"backup run {run.first}"), position

    def unreadable(self, err: LazyStandbyError, pos: int) -> None:
        """A sealed backup run at or after `pos` did not decode (or its tuples were refused): forget what
        this standby holds from `pos` on, as if it had never come. Nu holds every input past its Level-1
        ack and sends them again: the standby's next backup call is refused (the session restarts there),
        and the resync that follows finds the standby at `pos` - 1. A node past its takeover's plan cannot
        do that (Nu was asked to resend from after what it held): the error stops its operator loop."""
        with self.n.lock:
            if self.n.state.role not in (Role.STANDBY, Role.PROMOTING):
                raise err
            self.n.counters["backup_unreadable"] += 1
            if pos > self.n.inbound.received_through:
                return  # already forgotten (a takeover's unsealing got there first)
            self.n.log.error("%s: held backup from input %d does not decode (%s); forgetting inputs %d..%d, "
                             "Nu sends them again", self.n.name, pos, err, pos, self.n.inbound.received_through)
            self.n.held.truncate(pos)
            self.n.inbound.iq.drop_from(pos)
            while self.n.inbound.arrived and self.n.inbound.arrived[-1][0] >= pos:
                self.n.inbound.arrived.pop()
            self.n.inbound.received_through = pos - 1
            self.n.inbound.seqcheck.reset()
            self.n.lock.notify_all()

    def unseal(self) -> None:
        """Takeover, before its plan: decode every held input neither covered nor processed (in IQ', or
        taken by the operator loop), so that what this node tells Nu it holds is what it can process. A run
        that does not decode is forgotten with what follows it, and Nu resends from there."""
        with self.n.lock:
            done = self.n.done_through()
        bad = self.n.held.unseal(done)
        if bad is not None:
            self.unreadable(bad.error, bad.at)

    def deferred_through(self) -> int | None:
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
        if self.n.passive and self.n.state.role is Role.STANDBY:
            return self.n.snapshots.through() or 0  # a Passive Standby takes only what a snapshot covers, to drop it
        head = self.n.inbound.iq.head()
        # A stateful standby whose operator paces itself (Operator.paces_standby: Spark's feed) takes every
        # input on arrival: it skips none, and what waited here would be decoded and handed over only at a
        # takeover (docs/faults.md, the Spark window kills).
        wait = 0.0 if self.n.stateful and self.n.operator.paces_standby else self.forecast.defer
        slow = self.n.inbound.cover_latency is not None and self.n.inbound.cover_latency >= wait
        if (self.n.state.role is not Role.STANDBY or wait <= 0 or head is None or not len(head[0]) or slow
                or self.n.clock() - head[1] >= wait):
            return None
        covered = self.n.covered[0].input_pos
        excess = len(self.n.inbound.iq) + self._standby_room() - self.n.inbound.iq.capacity
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
        calls = 2 * self.n.cfg.max_batches_per_rpc * (self.n.cfg.bsize or 1)
        return min(calls, self.n.inbound.iq.capacity // 2)

    def _plausible(self, ckpt: Checkpoint) -> bool:
        """A standby skips to a trim point that comes without batches only as far as the primary has
        received (its heartbeats say): a Level-1 ack never covers a position the primary does not hold. One
        past that (forged, or newer than the last heartbeat) is not applied, and the standby answers what
        it holds; Nu sends its trim point again. (Batches that start just after their checkpoint are the
        ordinary jump and are admitted as they come.)"""
        return self.n.state.role is not Role.STANDBY or ckpt.input_pos <= self.primary_received

    def standby_lag(self) -> tuple[int, float]:
        """How far this standby is behind the primary: inputs the primary holds that this node has not
        processed yet and Nd's output does not cover (the work a takeover would start with), and for how
        long the oldest of them has been there (seconds since the primary's heartbeats first showed it).
        (0, 0.0) for a primary; a standby with about one operator call of work left takes over in about one
        call."""
        if self.n.state.role is not Role.STANDBY:
            return 0, 0.0
        done = self.n.done_through()
        seen = self.primary_seen
        while seen and seen[0][1] <= done:
            seen.popleft()
        behind = max(0, self.primary_received - done)
        return behind, (self.n.clock() - seen[0][0]) if (behind and seen) else 0.0

    def heartbeat_loop(self) -> None:
        det = self.detector
        assert det is not None
        if self.n.state.role is not Role.STANDBY or not self.registered.is_set():
            # Until Nu has answered, this standby knows neither the epoch nor that the system runs. A wake
            # (the registration) is taken here, and cleared: a node that is no standby must not spin on it.
            self.beat_now.wait(0.05)
            self.beat_now.clear()
            det.waiting(self.n.clock())
            self._beat_due = None
            return
        t0 = self.n.clock()
        lost_at = self.connection.take_lost()
        if lost_at is not None:
            det.lost(lost_at)
            self.n.counters["primary_connection_lost"] += 1
        if self._beat_due is not None and t0 >= self._beat_due:
            # How late this heartbeat starts (the thread's wake-up on busy cores, the lock): a crash's
            # detection is made of such beats (core.recovery_model.crash_detection_s). One woken early (a
            # notice) is no sample.
            self.forecast.beat_late.append(t0 - self._beat_due)
        self._beat_due = None
        stalls = det.stalls
        det.beat(t0)
        self.beat_now.clear()  # a notice from now on is for the next beat
        peer = self.primary
        self.connection.watch(peer)
        try:
            if peer is None:
                raise PeerError(Status.UNAVAILABLE, "no primary known")
            with self.n.lock:
                predicted = self.forecast.refresh(t0, self.backlog(), self._watching_primary())
                chosen = self.forecast.choice
                interval = chosen.value if self.n.passive and chosen is not None else 0.0
            reply = peer.heartbeat(m.HeartbeatRequest(sender=self.n.name, epoch=self.n.state.epoch,
                                                      address=self.n.cfg.advertise,
                                                      predicted_recovery_s=predicted.seconds if predicted else 0.0,
                                                      snapshot_interval_s=interval),
                                   self.n.cfg.heartbeat_interval)
        except PeerError as e:
            self.n.links.note("primary", peer.address if peer is not None else "", e)
            det.missed(self.n.clock(), refused=e.refused, started=t0)
            self.n.counters["heartbeat_misses"] += 1
            if e.refused:
                self.n.counters["heartbeat_refused"] += 1
        else:
            self._heartbeat_answered(peer, reply, t0)
        suspected = self.handover or det.suspects_after_beat(self.n.clock())
        if det.stalls > stalls:
            self.n.log.warning("%s: this node stood still for more than %.1f s (paused, or starved of CPU); the "
                               "primary is watched again from now", self.n.name, det.stall_after)
        if suspected:
            self.n.takeover.run()
            return
        self._beat_due = t0 + det.next_beat_in(t0)
        self.beat_now.wait(max(0.0, self._beat_due - self.n.clock()))

    def _heartbeat_answered(self, peer: Peer, reply: m.HeartbeatReply, t0: float) -> None:
        """A heartbeat sent at `t0` was answered: by a primary (alive, leaving at its handover, or with its
        operator stalled, which counts as a miss) or by a node that is no primary (a miss)."""
        det = self.detector
        assert det is not None
        self.n.links.note("primary", peer.address, None)
        now = self.n.clock()
        if reply.role in (Role.PRIMARY, Role.LEAVING):
            if reply.role is Role.LEAVING:
                # Its handover (hand_over): it has sent Nd its last frame and ended its lease there.
                det.ok(now, now - t0)
                self.handover = True
                self.n.counters["heartbeat_primary_leaving"] += 1
            elif reply.stalled_ms:
                # Alive, but its operator has stopped (OperatorWatch): a primary that works no more.
                det.missed(now, started=t0)
                self.n.counters["heartbeat_primary_stalled"] += 1
                if self._primary_stalled.due():
                    self.n.log.warning("%s: the primary says its operator stalled or failed (its oldest call "
                                       "%.1f s old): counted as a missed heartbeat", self.n.name,
                                       reply.stalled_ms / 1000)
            else:
                det.ok(now, now - t0)
            with self.n.lock:
                self.n.counters["heartbeats"] += 1
                self.forecast.heard(now - t0, reply.operator_call_s, reply.operator_tuple_s)
                self.n.state.fence.advance(reply.epoch)
                self.primary_reached(reply.received_through, now)
                self.n.on_level0(reply.level0)
        else:
            # A fenced (or demoted) node still answers, but it is no primary: count it as a failure.
            det.missed(now, started=t0)
            self.n.counters["heartbeat_not_primary"] += 1

    def predicted_recovery(self) -> RecoveryTerms | None:
        """Holding the lock: how long a takeover by this standby would take if its primary crashed now
        (RecoveryForecast.predict), or None when this node is no standby watching a primary."""
        return self.forecast.predict(self.backlog()) if self._watching_primary() else None

    def _watching_primary(self) -> bool:
        return self.n.state.role is Role.STANDBY and self.detector is not None

    def backlog(self) -> Backlog:
        """Holding the lock: where a takeover by this node would start now."""
        snaps = self.n.snapshots
        paced = self.n.stateful and self.n.operator.paces_standby
        return Backlog(held=self.n.inbound.received_through, done=self.n.done_through(),
                       primary_received=self.primary_received,
                       take=self.n.calls.take,
                       # Its own where the primary's is unknown, or where its calls do not wait by design
                       # (a paced standby: RecoveryForecast.cost).
                       own_cost=self.n.calls.cost.fit() if paced or not any(self.forecast.primary_cost) else None,
                       # A Passive Standby loads its snapshot first: about what the primary took to encode it.
                       restore_s=snaps.encode_s if self.n.passive and snaps.held is not None else 0.0,
                       notice_hold_s=self.detector.notice_hold if self.connection.notices and self.detector else None,
                       paced=paced)

    def primary_reached(self, received: int, now: float) -> None:
        """Holding the lock: a heartbeat says the primary has received through `received`; a covering
        checkpoint that came before it and is now vouched for is applied (`_apply_covering`)."""
        if received > self.primary_received:
            self.primary_received = received
            self.primary_seen.append((now, received))
        if received > 0 and self.n.cpu_at_first_input is None:
            # A standby sent no backup (Bsize inf: a Passive Standby holding only snapshots) learns here that
            # inputs flow, within a heartbeat of the primary's first: what it spends from then is the
            # pipeline's, over the same time as the primary's.
            self.n.cpu_at_first_input = time.process_time()
        self._apply_covering()
