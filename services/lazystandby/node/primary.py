"""The primary's side of an operator node (N): Push frames from Nu into IQ, OQ delivered to Nd by its part
the deliver link (node/deliver_link.py), whose Level-0 acks the node turns into the Level-1 acks that go
back to Nu (Algorithm 4), heartbeats answered, fencing, the planned handover when the primary is asked to
stop, the probe that times a copy of its operator, and the stall watch its heartbeats report.

A part of the operator node (`node.primary_side`), holding the primary's own state (the handover under
way, whether it has worked in this life, the standby last heard); it reads and changes the node's
(`self.n`: IQ, OQ, its role, its links) under the node's lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import messages as m
from ..core.errors import PeerError, ProbeFailed, WrongRole
from ..core.reminder import Reminder
from ..core.retry import fenced_by
from ..core.roles import Role
from ..transport.peer import Peer
from .common import EXIT_FENCED, LINK_REMIND_S
from .deliver_link import DeliverLink
from .operator_probe import PROBE_EVERY_S, PROBE_POLL_S, PROBES_AT_ONCE

if TYPE_CHECKING:
    from .operator_base import OperatorBase


class PrimarySide:
    """N as the primary: input from Nu, output to Nd, fencing, the handover to the standby."""

    def __init__(self, node: OperatorBase) -> None:
        """`node`: the operator node whose primary this side is, its shared state set."""
        self.n = node
        # A planned handover (hand_over): no input is taken, and the deliver link sends its last frame.
        self._leaving = False
        self._told_leaving = False  # a heartbeat reply has said LEAVING to the standby
        self._last_push = self.n.clock()
        self._announce_refused = Reminder(self.n.clock, LINK_REMIND_S)  # logs a refused announcement
        # Delivered to Nd, taken from Nu or taken over in this life: a primary shown a newer epoch before any
        # of these was started again after a takeover, holds nothing, and rejoins as a standby (RoleState.rejoin).
        self.worked = False
        self.heartbeat_at: float | None = None  # when the standby last asked
        self.standby_at = ""  # where that standby hears of a handover ("": not said)
        self.standby_predicted_s = 0.0  # the standby's predicted recovery, from its heartbeats
        self.deliver = DeliverLink(node, self)  # OQ -> Nd


    def handle_push(self, msg: m.Frame) -> m.FrameAck:
        with self.n.lock:
            role = self.n.state.role
            if self._leaving:
                raise WrongRole(f"{self.n.name}: hands over to its standby and takes no more input")
            if role not in (Role.PRIMARY, Role.PROMOTING):
                raise self.n.wrong_role("Push")
            self.n.check_epoch(msg.epoch, msg.sender, "frame")
        self._last_push = self.n.clock()
        if msg.batch is not None:
            batch = self.n.inbound.check_tuples(msg.batch, f"frame {msg.batch.first}")
            with self.n.lock:
                self.n.admit([batch], msg.checkpoint, msg.params)
                self.n.counters["input_tuples"] += len(batch)
                self.worked = True
        with self.n.lock:
            return m.FrameAck(epoch=self.n.state.epoch, level1=self.n.level1_now(),
                              received_through=self.n.inbound.received_through)

    # --- what the deliver link reads (node/deliver_link.Deliverer) ----------------------------------------
    @property
    def leaving(self) -> bool:
        return self._leaving

    def delivered(self) -> None:
        """Holding the lock: Nd took a frame of this primary's."""
        self.worked = True

    def announce_loop(self) -> None:
        """A live Nu pushes to its primary at least every ack_poll_ms. A primary that hears nothing for a
        while announces itself to Nu: a Nu restarted without knowing this primary learns it; a Nu that knows
        it answers and changes nothing; a Nu in a newer epoch refuses, and this node is fenced."""
        self.n.sleep(1.0)
        silent = max(1.0, 20 * self.n.cfg.ack_poll_ms / 1000)
        with self.n.lock:
            due = (self.n.state.role is Role.PRIMARY and self.n.upstream is not None
                   and self.n.clock() - self._last_push > silent)
            epoch = self.n.state.epoch
        if due:
            assert self.n.upstream is not None
            self.announce(self.n.upstream, epoch)

    def announce(self, peer: Peer, epoch: int) -> None:
        """Tell a peer that restarted without knowing it which primary runs `epoch`: the same Takeover this
        node made (or, for the first primary, would have made), which the peer accepts once."""
        req = m.TakeoverRequest(node=self.n.name, epoch=epoch, address=self.n.cfg.advertise,
                                resend_from=self.n.inbound.received_through + 1)
        role = "upstream" if peer is self.n.upstream else "downstream"
        try:
            peer.takeover(req, self.n.cfg.rpc_timeout)
        except PeerError as e:
            self.n.links.note(role, peer.address, e)
            if fenced_by(e.status):
                self.n.log.warning("%s: %s refused the announcement of epoch %d: %s", self.n.name, peer.address,
                                   epoch, e)
                with self.n.lock:
                    self.fence(f"{peer.address} refused epoch {epoch}: {e.message}")
            elif not e.unreachable:
                # Refused without a newer epoch (Nu knows this epoch's primary at another address): not
                # fenced, but said, since the peer will not learn this node from it.
                # Announced every second while Nu stays silent: one line, then one every LINK_REMIND_S.
                self.n.counters["announce_refused"] += 1
                if self._announce_refused.due():
                    self.n.log.warning("%s: %s did not take the announcement of epoch %d: %s", self.n.name,
                                       peer.address, epoch, e)
            return
        self.n.links.note(role, peer.address, None)
        self.n.counters["announced"] += 1
        self.n.log.warning("%s: announced itself to %s as the primary of epoch %d", self.n.name, peer.address, epoch)

    def fence(self, why: str) -> None:
        if self.n.state.role is Role.PRIMARY and not self.worked and self.n.upstream is not None:
            self._rejoin(why)
        elif self.n.state.role in (Role.PRIMARY, Role.PROMOTING):
            self.n.log.warning("%s: fenced (%s); stops sending", self.n.name, why)
            self.n.become(Role.FENCED)
            self.n.counters["fenced"] += 1
            if self.n.cfg.exit_when_fenced:  # to be started again, and rejoin as the standby
                self.n.fail(f"fenced ({why})", EXIT_FENCED)

    def _rejoin(self, why: str) -> None:
        """Started as the primary into a pipeline that failed over without this node (a restart with its old
        settings): it joins as a standby, learns the primary from Nu, and can take over at the next failure."""
        self.n.log.warning("%s: %s; it has delivered nothing in this life, so it joins as a standby", self.n.name, why)
        self.n.state.rejoin(worked=self.worked)
        self.n.counters["rejoined"] += 1
        self.n.standby_side.primary = None  # Nu names the primary in force when it answers the registration
        self.n.standby_side.watch()

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
        cfg = self.n.cfg
        wait = 2 * cfg.heartbeat_timeout + cfg.rpc_timeout if timeout is None else timeout
        with self.n.lock:
            if self.n.state.role is not Role.PRIMARY or self._leaving or self.n.downstream is None:
                return "not primary"
            self._leaving = True
            self.n.counters["handovers"] += 1
            self.n.lock.notify_all()  # the deliver link sends the last frame now
            deadline = self.n.clock() + wait
            while not self.n.stopped and self.n.state.role is Role.PRIMARY and self.n.clock() < deadline:
                self.n.lock.wait(0.01)
            if self.n.state.role is not Role.LEAVING:
                return "not primary" if self.n.state.role is not Role.PRIMARY else "timed out"
            standby = self.standby_at
        if standby and not self._told_leaving:
            self._tell_standby(standby)  # outside the lock: the standby's heartbeat comes in meanwhile
        with self.n.lock:
            # A standby asks every heartbeat_interval; one that has not asked for the detector's timeout is
            # gone, and a primary no standby has asked since it became one (a pipeline run without one) has
            # nobody to wait for: it stops at once, not a timeout later. A standby that registers meanwhile
            # asks as soon as Nu answers it; if this node is gone by then, it takes over on its detector.
            while not self.n.stopped and not self._told_leaving and self.n.clock() < deadline:
                if self.n.clock() - max(self.n.calls.primary_since, self.heartbeat_at or 0.0) > cfg.heartbeat_timeout:
                    self.n.log.warning("%s: no standby has asked for a heartbeat; stops without a handover",
                                       self.n.name)
                    return "no standby"
                self.n.lock.wait(0.01)
            return "told" if self._told_leaving else "timed out"

    def _tell_standby(self, address: str) -> None:
        """Tells the standby that asked last to heartbeat now (HandoverNotice). Best effort: a standby
        that does not hear it (gone, or one that never said where) hears LEAVING at its next heartbeat, so
        the notice is given no longer than that takes."""
        peer = self.n.peers(address)
        wait = min(self.n.cfg.rpc_timeout, self.n.cfg.heartbeat_interval)
        t0 = self.n.clock()
        try:
            ack = peer.handover(m.HandoverNotice(sender=self.n.name, epoch=self.n.state.epoch), wait)
        except PeerError as e:
            self.n.links.note("standby", address, e)
            self.n.counters["handover_notices_failed"] += 1
            self.n.log.warning("%s: the handover notice to %s failed after %.0f ms: %s", self.n.name, address,
                               (self.n.clock() - t0) * 1000, e)
        else:
            self.n.links.note("standby", address, None)
            self.n.counters["handover_notices_heard" if ack.beats else "handover_notices_ignored_there"] += 1
            self.n.log.info("%s: the handover notice to %s %s in %.0f ms", self.n.name, address,
                            "was heard" if ack.beats else "came after its heartbeat", (self.n.clock() - t0) * 1000)
        finally:
            peer.close()

    def left(self, why: str) -> None:
        """Holding the lock: the last frame went (or failed): LEAVING from now on, which heartbeats say."""
        self.n.become(Role.LEAVING)
        self.n.log.warning("%s: hands over in epoch %d (%s); its standby takes over", self.n.name,
                           self.n.state.epoch, why)
        self.n.lock.notify_all()

    # --- heartbeats (standby) and failover -------------------------------------------------------------
    def standbys_prediction(self) -> dict | None:
        """Holding the lock: the standby's predicted recovery, as its heartbeats tell it, while they come
        (None once none came for heartbeat_timeout, or before any said one)."""
        if self.standby_predicted_s and self.heartbeat_at is not None \
                and self.n.clock() - self.heartbeat_at < self.n.cfg.heartbeat_timeout:
            return {"seconds": round(self.standby_predicted_s, 6), "of": "standby"}
        return None

    def handle_heartbeat(self, msg: m.HeartbeatRequest) -> m.HeartbeatReply:
        with self.n.lock:
            self.n.counters["heartbeats_answered"] += 1
            self.heartbeat_at = self.n.clock()
            self.standby_predicted_s = msg.predicted_recovery_s
            if self.n.passive and msg.snapshot_interval_s > 0:
                self.n.snapshots.interval = msg.snapshot_interval_s  # chosen by the standby for its target
            cost = self.n.calls.cost.fit() or (0.0, 0.0)
            if msg.address:
                self.standby_at = msg.address
            if self.n.state.role is Role.LEAVING and not self._told_leaving:
                self._told_leaving = True
                self.n.lock.notify_all()
            return m.HeartbeatReply(node=self.n.name, role=self.n.state.role, epoch=self.n.state.epoch,
                                    level0=self.n.level0,
                                    received_through=self.n.inbound.received_through,
                                    stalled_ms=round(self.stalled_s() * 1000),
                                    operator_call_s=cost[0], operator_tuple_s=cost[1])

    def probe_operator(self) -> None:
        """A primary's operator probe: the first PROBES_AT_ONCE as soon as each has PROBE_MIN new inputs (a
        crash may come early, and one probe held up by a busy core would set the slope alone), then one
        every PROBE_EVERY_S; a copy of its operator times a call on its latest inputs
        (node/operator_probe.py), added to the operator's cost as a kept probe."""
        self.n.sleep(PROBE_POLL_S)
        probe = self.n.calls.probe
        with self.n.lock:
            if probe is None or self.n.state.role is not Role.PRIMARY or self.n.clock() < self.n.calls.probe_due:
                return
        try:
            timed = probe.run()
        except ProbeFailed as e:
            with self.n.lock:
                self.n.counters["operator_probe_errors"] += 1
                if self.n.counters["operator_probe_errors"] == 1:
                    self.n.log.warning("%s: a copy of the operator failed on its latest inputs (%s); the "
                                       "predicted replay stays on the live calls' cost", self.n.name, e)
            return
        with self.n.lock:
            if timed is not None:
                self.n.counters["operator_probes"] += 1
                early = self.n.counters["operator_probes"] < PROBES_AT_ONCE
                self.n.calls.probe_due = self.n.clock() + (0.0 if early else PROBE_EVERY_S)
                self.n.calls.cost.add(*timed, keep=True)

    def stalled_s(self) -> float:
        """Holding the lock: for how long this primary's operator has left a call unanswered, once that is past
        operator_stall_max (OperatorCalls.stalled); 0 when it has not, or when this node is no primary. A
        stall is said once when it begins and once when it ends."""
        seconds, changed = self.n.calls.stalled(self.n.state.role is Role.PRIMARY)
        watch = self.n.calls.watch
        if changed == "began":
            self.n.counters["operator_stalls"] += 1
            what = (f"failed ({watch.failed})" if watch.failed else
                    f"has left a call unanswered for {seconds:.1f} s (operator_stall_max {watch.limit:.1f} s)")
            self.n.log.warning("%s: the operator %s: heartbeats say so from now, and Nd's lease is no longer "
                               "renewed; a standby will take over", self.n.name, what)
        elif changed == "ended":
            self.n.log.warning("%s: the operator answers again", self.n.name)
        return seconds
