"""The takeover of an operator node, seed 000 section 3.6 made Precise: detect, fence, connect Nd, plan,
connect Nu, replay, resume. Each step is a method named for it, numbered as in `take_over`; the rules
they apply are core/recovery.py's. A planned handover's notice (`handle_handover`) starts one at once.

A part of the operator node (`node.takeover`), holding the takeover's own state (its phases, the gathering,
the declines said); it reads and changes the node's (`self.n`: its role, IQ', OQ', links) under the node's
lock, through what the node declares.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..core import messages as m
from ..core.errors import PeerError
from ..core.recovery import RecoveryTimes, TakeoverPlan, plan_takeover
from ..core.reminder import Reminder
from ..core.retry import declined_by, fenced_by
from ..core.roles import Role
from ..stats import RECOVERY_BOUNDS, Buckets
from ..transport.peer import Peer
from .common import LINK_REMIND_S, Backoff

if TYPE_CHECKING:
    from .operator_base import OperatorBase

# Longest a gathering takeover (Operator.takeover_gather) waits, once PRIMARY, for Nu's resend before the
# operator starts anyway: a resend comes tens of milliseconds after Nu's answer, and a lost one must not
# hold the operator for good.
GATHER_MAX_S = 0.25


class Takeover:
    """A standby becoming the primary, step by step; a refused or declined takeover back to standby."""

    def __init__(self, node: OperatorBase) -> None:
        """`node`: the operator node it promotes (an OperatorNode: its standby's and primary's sides too), its
        shared state set."""
        self.n = node
        self._declined = Reminder(self.n.clock, LINK_REMIND_S)  # logs a declined takeover
        self.recovery: dict = {}  # the last takeover's phases, for status
        # A takeover by a gathering operator (Operator.takeover_gather): nothing is taken while PROMOTING,
        # then nothing until the input through Nu's head at takeover is in or the deadline passes.
        self.gather: tuple[int, float] | None = None  # (Nu's head, deadline) once PRIMARY
        self.gathering = False
        self._backlog_at_takeover = (0, 0)
        self._wall_detected = 0.0
        self._working = False  # this takeover has started the operator on what it holds (_start_work)
        self.recovery_seconds = {p: Buckets(RECOVERY_BOUNDS) for p in ("detection", "reconnection", "data_recovery")}

    def handle_handover(self, msg: m.HandoverNotice) -> m.HandoverAck:
        """A primary handing over says it has sent Nd its last frame: this standby heartbeats now rather
        than at its next interval. The notice moves nothing by itself (a forged one costs one heartbeat):
        the takeover waits for this node's own heartbeat to hear LEAVING from the primary it watches.
        Ignored unless this node is a registered standby and the notice is of its epoch or a newer one."""
        with self.n.lock:
            beats = (self.n.state.role is Role.STANDBY and self.n.standby_side.registered.is_set()
                     and msg.epoch >= self.n.state.epoch)
            self.n.counters["handover_notices" if beats else "handover_notices_ignored"] += 1
            if beats:
                self.n.standby_side.beat_now.set()
            return m.HandoverAck(node=self.n.name, role=self.n.state.role, epoch=self.n.state.epoch, beats=beats)

    def run(self) -> None:
        """Seed 000 section 3.6, made Precise: the steps of core/recovery.py, one method each."""
        times = self._detect()  # 1
        epoch = self._fence_self(times)  # 2
        req = m.TakeoverRequest(node=self.n.name, epoch=epoch, address=self.n.cfg.advertise,
                                primary_unheard_ms=self._unheard_ms(times))
        nd = self._connect_nd(req)  # 3
        if nd is None:
            return
        self._start_work()
        plan = self._plan(epoch, nd)  # 4
        nu = self._connect_nu(req, plan)  # 5
        if nu is None:
            return
        times.connected = self.n.clock()
        self._replay(plan, nu)  # 6
        self._resume(plan, nu, times)  # 7

    def _detect(self) -> RecoveryTimes:
        """1. detect: the detector suspects the primary; the recovery is timed from its last good heartbeat."""
        det = self.n.standby_side.detector
        now = self.n.clock()
        self._wall_detected = time.time()
        return RecoveryTimes(last_ok=det.last_ok if det else now, detected=now, noticed=det.lost_at if det else None)

    def _unheard_ms(self, times: RecoveryTimes) -> int:
        """How long this node has surely not heard its primary, in ms, for Nd to weigh against the primary's
        last frame (core.recovery.PrimaryLease): since the last good heartbeat (or since the detector
        watched again), less one interval, the most a live primary's answers are apart. 0 when no answer
        came since this node started watching."""
        det = self.n.standby_side.detector
        if det is None or not det.heard:
            return 0
        unheard = times.detected - times.last_ok - self.n.cfg.heartbeat_interval
        return min(0xFFFFFFFF, max(0, int(unheard * 1000)))

    def _fence_self(self, times: RecoveryTimes) -> int:
        """2. fence: a new epoch; PROMOTING refuses further backup batches, so what we hold is frozen."""
        with self.n.lock:
            epoch = self.n.state.epoch + 1
            self.n.become(Role.PROMOTING, epoch=epoch)
            # What this standby still had to process when it took over.
            self._backlog_at_takeover = (max(0, self.n.inbound.received_through - self.n.done_through()),
                                         self.n.calls.in_flight_tuples)
            self.gathering, self.gather = self.n.operator.takeover_gather, None
            self._working = False
        # A standby cut off from a live primary tries again after each timeout: said once, as declines are.
        quiet = self._declined.recently()
        if self.n.standby_side.handover:
            self.n.log.warning("%s: the primary hands over; taking over in epoch %d", self.n.name, epoch)
        else:
            self.n.log.log(logging.INFO if quiet else logging.WARNING, "%s: primary suspected after %.0f ms; "
                         "taking over in epoch %d", self.n.name, times.detection * 1000, epoch)
        return epoch

    def _connect_nd(self, req: m.TakeoverRequest) -> m.TakeoverReply | None:
        """3. connect Nd: it refuses the old epoch from now on and tells what it holds. A refusal (someone
        newer won) sends this node back to standby; so does a decline (the primary still delivers to Nd),
        in the epoch before."""
        assert self.n.downstream is not None
        nd = self.n.downstream
        return self._retry(nd, "downstream", req, on_refusal=self._back_to_standby, on_decline=self._withdraw,
                           on_wait=self._start_work)

    def _start_work(self) -> None:
        """The operator starts on what this node holds while the links are rebuilt (unless it gathers: see
        Operator.takeover_gather): once Nd has taken the takeover, or as soon as Nd keeps it waiting
        (unreachable, stopped). Not before Nd's first answer: a takeover Nd declines (its primary still
        delivers) then costs no decoding, and a standby cut off from a live primary for long tries again
        after every detector timeout. Once per takeover, and before the plan (StandbySide.unseal)."""
        if self._working:
            return
        self._working = True
        self.n.standby_side.unseal()
        self.n.operator.lazy(False)

    def _plan(self, epoch: int, nd: m.TakeoverReply) -> TakeoverPlan:
        """4. plan: replay OQ' beyond Nd's last; ask Nu for everything after what we received."""
        with self.n.lock:
            self.n.on_level0(nd.delivered_through)
            return plan_takeover(epoch=epoch, delivered_through=nd.delivered_through,
                                 received_through=self.n.inbound.received_through, oq_first=self.n.oq.first,
                                 oq_last=self.n.oq.last)

    def _connect_nu(self, req: m.TakeoverRequest, plan: TakeoverPlan) -> m.TakeoverReply | None:
        """5. connect Nu: it fences the old primary, stops the backup and resends what we lack."""
        assert self.n.upstream is not None
        nu, req.resend_from = self.n.upstream, plan.resend_from
        reply = self._retry(nu, "upstream", req)
        if reply is not None:
            with self.n.lock:
                if self.n.stateful and reply.resend_from > self.n.inbound.received_through + 1:
                    # Nu resends from after its trim point, which may lie before its checkpoint: the state is
                    # rebuilt from there.
                    self.n.jump(reply.checkpoint, reply.params, rebuild_from=reply.resend_from)
                elif self.n.stateful:
                    self.n.note_covered(reply.checkpoint, reply.params)
                elif reply.checkpoint.input_pos > self.n.inbound.received_through:
                    self.n.jump(reply.checkpoint, reply.params)  # Nu resends from after its trim point
                else:
                    self.n.note_covered(reply.checkpoint, reply.params)  # what we hold through it: skipped
        return reply

    def _replay(self, plan: TakeoverPlan, nu: m.TakeoverReply) -> None:
        """6. replay: the output loop sends OQ' from Nd's last + 1 (never anything Nd holds), once the
        inputs this node quarantined as a standby are dead letters (OperatorBase.write_quarantined)."""
        self.n.write_quarantined()
        with self.n.lock:
            self.n.primary_side.deliver.resynced(plan.delivered_through)  # Nd just said where it stands (step 3)
            self.n.become(Role.PRIMARY)
            self.n.calls.primary_since = self.n.clock()
            self.n.primary_side.worked = True  # a promoted standby holds IQ' and OQ': fenced, never rejoined
            if self.gathering:
                self.gather = (nu.head_pos, self.n.clock() + GATHER_MAX_S)
            self.n.counters["takeovers"] += 1
            self.n.counters["replayed_from_oq"] += plan.replay_count
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
            self.n.lock.notify_all()

    def _resume(self, plan: TakeoverPlan, nu: m.TakeoverReply, times: RecoveryTimes) -> None:
        """7. resume: live once every input Nu held at takeover is processed and its outputs are in Nd.
        (Not "IQ empty": under continuous load that target keeps moving and measures the load, not the
        recovery.)"""
        with self.n.lock:
            while not self.n.stopped and self.n.state.role is Role.PRIMARY and self.n.processed.input_pos < nu.head_pos:
                self.n.lock.wait(0.005)
            processed_at = self.n.clock()
            target = self.n.processed.output_count
            while not self.n.stopped and self.n.state.role is Role.PRIMARY and self.n.level0 < target:
                self.n.lock.wait(0.005)
            times.live = self.n.clock()
            phases = times.phases()
            for phase, buckets in self.recovery_seconds.items():
                buckets.observe(phases[phase])
            self.recovery.update({f"{p}_ms": v * 1000 for p, v in phases.items()})
            self.recovery["recovery_ms"] = (phases["reconnection"] + phases["data_recovery"]) * 1000
            # Where data recovery went: the operator catching up to Nu's head, then Nd acknowledging.
            self.recovery["catch_up_ms"] = (processed_at - times.connected) * 1000
            self.recovery["total_ms"] = sum(phases.values()) * 1000
            self.recovery["detected_at"] = self._wall_detected
            if times.noticed is not None:
                # Detection's part after the transport's notice (the hold and the refused beat); the rest, from
                # the crash to the notice, is the primary's end and the notice's way here.
                self.recovery["notice_to_suspicion_ms"] = (times.detected - times.noticed) * 1000
            self.recovery["cause"] = "handover" if self.n.standby_side.handover else "detector"
            self.recovery["live_at"] = self._wall_detected + (times.live - times.detected)
        self.n.log.warning("%s: live as primary in epoch %d: %s", self.n.name, plan.epoch, self.recovery)

    def _back_to_standby(self) -> None:
        """Nd refused our epoch: nothing changed anywhere. Learn the epoch in force and watch again."""
        assert self.n.downstream is not None
        try:
            epoch = self.n.downstream.status(self.n.cfg.rpc_timeout).epoch
        except PeerError:
            epoch = self.n.state.epoch + 1
        with self.n.lock:
            self.n.become(Role.STANDBY, epoch=max(self.n.state.epoch, epoch))
            self.n.standby_side.handover = False
            self.n.operator.lazy(True)
            if self.n.standby_side.detector:
                self.n.standby_side.detector.restart(self.n.clock())
        self.n.counters["takeovers_refused"] += 1

    def _withdraw(self, why: str) -> None:
        """Nd declined the takeover: its primary delivered within the lease (core.recovery.PrimaryLease), so
        this node lost its primary, not the pipeline. Nothing changed anywhere: back to a lazy standby in the
        epoch in force, watching again. One line, then one every LINK_REMIND_S while it goes on (a standby
        cut off from a live primary tries again after each detector timeout)."""
        with self.n.lock:
            self.n.state.withdraw()
            # A primary that said it is leaving never works again: asked again at the next heartbeat (its lease
            # runs out within takeover_lease), answered or not, not after the detector's timeout.
            self.n.operator.lazy(True)
            if self.n.standby_side.detector:
                self.n.standby_side.detector.restart(self.n.clock())
            self.n.counters["takeovers_declined"] += 1
            if self._declined.due():
                self.n.log.warning("%s: takeover declined, %s; standby again in epoch %d (%d declined so far)",
                                 self.n.name, why, self.n.state.epoch, self.n.counters["takeovers_declined"])

    def _retry(self, peer: Peer, who: str, req: m.TakeoverRequest,
               on_refusal: Callable[[], None] | None = None,
               on_decline: Callable[[str], None] | None = None,
               on_wait: Callable[[], None] | None = None) -> m.TakeoverReply | None:
        """Takeover at `peer` until answered; a refusal (stale epoch) ends the takeover: back to standby,
        or fenced; so does a decline where `on_decline` is given (Nd: its primary still delivers).
        `on_wait` runs after each attempt that got no answer (it runs its work once)."""
        backoff = Backoff(0.02, 0.5)
        while not self.n.stopped:
            try:
                reply = peer.takeover(req, self.n.cfg.rpc_timeout)
                self.n.links.note(who, peer.address, None)
                return reply
            except PeerError as e:
                self.n.links.note(who, peer.address, e)
                if on_decline is not None and declined_by(e.status):
                    on_decline(e.message)
                    return None
                if fenced_by(e.status):
                    self.n.log.warning("%s: takeover refused by %s: %s", self.n.name, who, e)
                    if on_refusal is not None:
                        on_refusal()
                        return None
                    with self.n.lock:
                        self.n.primary_side.fence(f"{who} refused the takeover")
                    return None
                self.n.counters[f"takeover_retry_{who}"] += 1
                if on_wait is not None:
                    on_wait()
                self.n.sleep(backoff.next())
        return None

    def still_gathering(self) -> bool:
        """Holding the lock: a gathering takeover still waits (PROMOTING, or PRIMARY with Nu's resend not
        all in and the deadline ahead). Ends the gathering otherwise."""
        if self.n.state.role is Role.PROMOTING:
            return True
        if self.n.state.role is Role.PRIMARY and self.gather is not None:
            head, deadline = self.gather
            if self.n.inbound.received_through < head and self.n.clock() < deadline:
                return True
        self.gathering, self.gather = False, None
        return False
