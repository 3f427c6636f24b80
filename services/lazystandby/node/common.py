"""What every node runtime shares: role state, counters, status, background loops, wrong-role refusals."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

from ..config import NodeConfig
from ..core import messages as m
from ..core.errors import LoopTold, PeerError, WrongRole
from ..core.reminder import Reminder
from ..core.roles import Role, RoleState

# The node's process exit codes (cli.run_node) when it ends on its own, from sysexits.h.
EXIT_FAILED = 70  # EX_SOFTWARE: it failed in a way it cannot recover from (its operator's JVM is gone)
EXIT_FENCED = 75  # EX_TEMPFAIL: fenced (exit_when_fenced); started again, it rejoins as a standby
# Seconds a loop waiting on standby_wake sleeps between looks: a bound on what a missed wake would cost a
# takeover, not the way it learns of one.
IDLE_STANDBY_WAIT_S = 0.25


class NodeBase:
    """Base of the three runtimes. Handlers for RPCs a role does not serve refuse with WrongRole."""

    # The loop that `die_in_loop` makes raise: the one whose death a chaos test shows (SIGUSR1, cli).
    MAIN_LOOP = ""

    def __init__(self, cfg: NodeConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.clock = clock
        self.log = logging.getLogger(f"lazystandby.{cfg.name}")
        self.state = RoleState(cfg.name)
        self.lock = threading.Condition()
        # Notified, besides the lock, at each change of role (`become`), each snapshot a standby takes in,
        # and at stop.
        # The loops with nothing to do in a standby's steady state (its output loop; a Passive Standby's
        # operator loop) wait on it, not on the lock, which every backup call notifies: woken by every call,
        # they would cost a Passive Standby a context switch per backup call for nothing.
        self.standby_wake = threading.Condition(self.lock)
        self.counters: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        # Set when this node's process should end: a signal (cli.run_node), or a failure the node cannot
        # recover from (`fail`), whose reason is then in `fatal`.
        self.halt = threading.Event()
        self.fatal = ""
        self.exit_code = 0  # the process's, once halted: EXIT_FAILED or EXIT_FENCED with `fatal`
        self.links = Links(cfg.name, self.log, clock)

    # --- lifecycle -------------------------------------------------------------------------------------
    def spawn(self, name: str, loop: Callable[[], None],
              on_crash: Callable[[Exception], None] | None = None) -> None:
        """Run `loop` over and over in a thread of its own until the node stops. An exception ends it, said
        and counted, and handed to `on_crash` first; then the node fails (`fail`): its health check answers
        NOT_SERVING and its process exits EXIT_FAILED, so that a supervisor replaces it (and, for a primary,
        the standby takes over) instead of a node that answers calls while part of it is dead."""
        def run() -> None:
            try:
                while not self._stop.is_set():
                    self.dying_point(name)
                    loop()
            except Exception as e:
                if self._stop.is_set():
                    return  # stopping: a loop that meets a closed peer or resource then is no failure
                self.log.exception("%s: loop %s died", self.name, name)
                self.counters["loop_crashes"] += 1
                if on_crash is not None:
                    on_crash(e)
                self.fail(f"loop {name} died ({type(e).__name__}: {e})"[:400])

        self.run_once(name, run)

    def run_once(self, name: str, work: Callable[[], None]) -> None:
        """Run `work` once in a thread of its own, joined at stop like the loops (a registration that waits
        for its peer must not hold up the caller)."""
        t = threading.Thread(target=work, name=f"{self.name}:{name}", daemon=True)
        t.start()
        self._threads.append(t)

    def die_in_loop(self, name: str = "") -> None:
        """Make loop `name` (MAIN_LOOP when empty) raise LoopTold at its next turn: the chaos test of a loop
        that ends by an exception (SIGUSR1 to the process, cli.run_node). Safe from a signal handler."""
        self._told_to_die = name or self.MAIN_LOOP

    def dying_point(self, name: str) -> None:
        """Where loop `name` checks whether it was told to die (each turn; long inner waits check too)."""
        if getattr(self, "_told_to_die", "") == name:
            self._told_to_die = ""
            raise LoopTold(f"{self.name}: loop {name} was told to die (SIGUSR1)")

    def fail(self, why: str, code: int = EXIT_FAILED) -> None:
        """This node can do its work no more (its operator's JVM is gone: EXIT_FAILED; or it was fenced and
        exit_when_fenced is on: EXIT_FENCED): its process is asked to exit with `code`, so that peers see it
        dead and it is replaced or started again, rather than answer them while it does nothing (a standby
        that would take over and then stall, a primary deposed only by its standby's reading of its
        heartbeats, a fenced primary that holds a place). The first reason stands."""
        if not self.fatal:
            self.fatal, self.exit_code = why, code
        self.halt.set()

    def stop(self, join_timeout: float = 5.0) -> None:
        """Ends every loop; waits up to `join_timeout` in all for their threads (daemons: a process that
        exits after a failure does not wait for a loop stuck in a call)."""
        self._stop.set()
        with self.lock:
            self.lock.notify_all()
            self.standby_wake.notify_all()
        deadline = time.monotonic() + join_timeout
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))

    def become(self, role: Role, epoch: int | None = None) -> None:
        """Holding the lock: this node's role changes (RoleState.become), and the loops waiting on
        standby_wake look again."""
        self.state.become(role, epoch=epoch)
        self.standby_wake.notify_all()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def serving(self) -> bool:
        """What the health check answers: a fenced, leaving, stopped or failed node serves nothing."""
        return not self.fatal and self.state.role not in (Role.FENCED, Role.LEAVING, Role.STOPPED)

    # --- status ----------------------------------------------------------------------------------------
    def count_error(self, counter: str) -> None:
        self.errors[counter] += 1

    def snapshot(self) -> dict:
        """Counters and gauges of this node (subclasses add theirs)."""
        return {
            "node": self.name,
            # The stage of a pipeline of several this node runs (setting `stage`; 0: the only one), as its
            # metrics' `pipeline_stage` label says it.
            "pipeline_stage": self.cfg.stage,
            "role": str(self.state.role),
            "epoch": self.state.epoch,
            "counters": dict(self.counters),
            "errors": dict(self.errors),
            "peers": self.links.snapshot(),
        }

    # How long Status and the metrics wait for the node's lock before they read without it: a call may hold
    # it for seconds (Nd's Deliver while the results topic's flush waits for a broker that is down).
    STATUS_LOCK_WAIT_S = 0.25

    def status_snapshot(self) -> dict:
        """The snapshot for Status and the metrics, within STATUS_LOCK_WAIT_S plus the read itself whatever
        holds the lock: taken under it when it comes in time, else without it (`consistent` False: each
        field is one the node held, but they may be moments apart)."""
        got = self.lock.acquire(timeout=self.STATUS_LOCK_WAIT_S)
        try:
            for attempt in range(5):
                try:
                    snap = self.snapshot()
                    break
                except RuntimeError:  # a dict changed while it was copied (only without the lock)
                    if got or attempt == 4:
                        raise
            snap["consistent"] = got
            return snap
        finally:
            if got:
                self.lock.release()

    def handle_status(self, msg: None) -> m.StatusReply:
        snap = self.status_snapshot()
        return m.StatusReply(node=self.name, role=self.state.role, epoch=self.state.epoch, snapshot=snap)

    def handle_probe(self, msg: m.Probe) -> m.ProbeAck:
        """A link probe (Nu timing the link a resend would cross): answered at once, whatever the role."""
        self.counters["probes_answered"] += 1
        return m.ProbeAck(received=len(msg.padding))

    # --- refusals --------------------------------------------------------------------------------------
    def wrong_role(self, rpc: str) -> WrongRole:
        return WrongRole(f"{self.name}: {rpc} is not served by a node in role {self.state.role}")

    def handle_push(self, msg: m.Frame) -> m.FrameAck:
        raise self.wrong_role("Push")

    def handle_snapshot(self, msg: m.SnapshotFrame) -> m.SnapshotAck:
        raise self.wrong_role("Snapshot")

    def handle_backup(self, msg: m.BackupFrame) -> m.BackupAck:
        raise self.wrong_role("Backup")

    def handle_deliver(self, msg: m.OutputFrame) -> m.Level0Ack:
        raise self.wrong_role("Deliver")

    def handle_heartbeat(self, msg: m.HeartbeatRequest) -> m.HeartbeatReply:
        return m.HeartbeatReply(node=self.name, role=self.state.role, epoch=self.state.epoch)

    def handle_takeover(self, msg: m.TakeoverRequest) -> m.TakeoverReply:
        raise self.wrong_role("Takeover")

    def handle_register_standby(self, msg: m.RegisterStandby) -> m.RegisterStandbyReply:
        raise self.wrong_role("RegisterStandby")

    def handle_handover(self, msg: m.HandoverNotice) -> m.HandoverAck:
        raise self.wrong_role("Handover")


LINK_REMIND_S = 30.0  # seconds between reminders of a condition that goes on (a link down, a refusal)


class Links:
    """The peers a node calls, and whether it believes each alive: a link is down from the first call
    that got no answer (unreachable: UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, UNKNOWN) until one is
    answered, whatever the answer. Each change is one WARN line; while a link stays down, one reminder
    every `remind` seconds. Failures are counted by peer and status for the metrics."""

    def __init__(self, node: str, log: logging.Logger, clock: Callable[[], float],
                 remind: float = LINK_REMIND_S) -> None:
        self.node, self.log, self.clock, self.remind = node, log, clock, remind
        self._state: dict[str, dict] = {}
        self._lock = threading.Lock()

    def _link(self, peer: str, address: str) -> dict:
        link = self._state.get(peer)
        if link is None or link["address"] != address:  # a new peer in this place starts unknown-but-up
            link = self._state[peer] = {"address": address, "alive": True, "since": self.clock(), "failures": {},
                                        "down_calls": 0, "reminder": Reminder(self.clock, self.remind)}
        return link

    def ok(self, peer: str, address: str) -> None:
        with self._lock:
            link = self._link(peer, address)
            if link["alive"]:
                return
            now = self.clock()
            down_for, calls = now - link["since"], link["down_calls"]
            link.update(alive=True, since=now, down_calls=0)
        self.log.warning("%s: link to %s %s recovered after %.1f s (%d calls failed meanwhile)", self.node, peer,
                         address, down_for, calls)

    def failed(self, peer: str, address: str, status: str, message: str) -> None:
        with self._lock:
            link = self._link(peer, address)
            link["failures"][status] = link["failures"].get(status, 0) + 1
            now = self.clock()
            if link["alive"]:
                link.update(alive=False, since=now, down_calls=1)
                link["reminder"].say_now()
                line = "failed"
            else:
                link["down_calls"] += 1
                if not link["reminder"].due():
                    return
                line = f"still down after {now - link['since']:.0f} s"
        self.log.warning("%s: link to %s %s %s (%s: %s)", self.node, peer, address, line, status, message)

    def alive(self, peer: str) -> bool:
        """Whether the link to `peer` is believed up (True for a peer never called yet)."""
        with self._lock:
            link = self._state.get(peer)
            return link is None or link["alive"]

    def forget(self, peer: str) -> None:
        """The node no longer has this peer (Nu's standby after a takeover)."""
        with self._lock:
            self._state.pop(peer, None)

    def snapshot(self) -> dict[str, dict]:
        with self._lock:
            return {p: {"address": s["address"], "alive": s["alive"], "since": s["since"],
                        "failures": dict(s["failures"])} for p, s in self._state.items()}

    def note(self, peer: str, address: str, error: Exception | None) -> None:
        """Record one call's outcome: answered (error None, or a refusal) or unreachable."""
        if isinstance(error, PeerError) and error.unreachable:
            self.failed(peer, address, str(error.status), error.message)
        else:
            self.ok(peer, address)


class Backoff:
    """Exponential retry delay, reset on success."""

    def __init__(self, first: float = 0.01, most: float = 0.5) -> None:
        self.first, self.most, self.delay = first, most, first

    def next(self) -> float:
        d = self.delay
        self.delay = min(self.most, self.delay * 2)
        return d

    def reset(self) -> None:
        self.delay = self.first
