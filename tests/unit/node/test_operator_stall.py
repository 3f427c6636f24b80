"""A primary whose operator stops answering (OperatorWatch): it says so, stops renewing its lease at Nd, and
its standby counts it as a missed heartbeat; and the hang-operator fault's process handling."""

import signal
from concurrent.futures import Future

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core import messages as m
from lazystandby.core.detector import FailureDetector
from lazystandby.core.errors import SettingError
from lazystandby.core.recovery import OperatorWatch, plan_takeover
from lazystandby.core.roles import Role
from lazystandby.core.tuples import TupleBatch
from lazystandby.harness.operator_procs import NothingToHang, descendants, hang, kill_all
from lazystandby.node.downstream import DownstreamNode
from lazystandby.node.operator_node import OperatorNode
from lazystandby.operators.selection import Selection
from lazystandby.sinks.base import MemorySink
from lazystandby.transport import wire
from lazystandby.transport.memory import MemoryNetwork
from lazystandby.transport.peer import PeerBase
from lazystandby.v1 import lazystandby_pb2 as pb


def test_the_watch_counts_a_stall_once_and_only_past_its_limit():
    w = OperatorWatch(2.0)
    assert w.stalled_for(None, 100.0) == 0.0  # no call in flight
    assert w.stalled_for(99.0, 100.0) == 0.0  # one second: within the limit
    assert w.stalled_for(97.5, 100.0) == 2.5
    assert not w.update(99.0, 100.0) and not w.stalled
    assert w.update(97.0, 100.0) and w.stalled  # began: said once (the node counts it)
    assert not w.update(97.0, 101.0) and w.stalled  # goes on: not said again
    assert not w.update(None, 102.0) and not w.stalled  # answered
    assert w.update(90.0, 103.0)  # a second stall is a new one
    off = OperatorWatch(0.0)
    assert off.stalled_for(0.0, 10**6) == 0.0 and not off.update(0.0, 10**6)
    # A failed operator answers nothing more: stalled at once, even with no call out and no time limit.
    off.fail("RuntimeError: Spark's JVM cannot be reached")
    off.fail("a second reason")  # the first is kept
    assert off.stalled_for(None, 5.0) == 0.001 and off.stalled_for(1.0, 5.0) == 4.0
    assert off.update(None, 5.0) and off.failed == "RuntimeError: Spark's JVM cannot be reached"
    with pytest.raises(ValueError):
        OperatorWatch(-1.0)


def test_operator_stall_max_is_a_setting_refused_below_zero():
    assert NodeConfig().operator_stall_max == 10.0
    with pytest.raises(SettingError, match="operator_stall_max"):
        NodeConfig(operator_stall_max=-1)


def test_the_heartbeat_reply_carries_the_stall_on_the_wire():
    r = m.HeartbeatReply(node="N", role=Role.PRIMARY, epoch=1, level0=3, received_through=9, stalled_ms=12_500)
    assert wire.heartbeat_reply_from_pb(pb.HeartbeatReply.FromString(
        wire.heartbeat_reply_to_pb(r).SerializeToString())) == r


class Hung(Selection):
    """An operator whose calls are never answered (a stopped JVM), until `answer()`."""

    def __init__(self) -> None:
        super().__init__("price > 100")
        self.futures: list[Future] = []

    def submit(self, batch: TupleBatch) -> Future:
        f: Future = Future()
        self.futures.append(f)
        return f

    def answer(self) -> None:
        for f in self.futures:
            if not f.done():
                f.set_result([])


def batch(first: int, n: int) -> TupleBatch:
    return TupleBatch(first=first, streams=[1] * n, seqs=list(range(first, first + n)), payloads=[b"x"] * n)


@pytest.fixture
def stalled_setup():
    net, now = MemoryNetwork(), [0.0]
    clock = lambda: now[0]  # noqa: E731
    nd = DownstreamNode(NodeConfig(role="downstream", listen="nd"), MemorySink(), clock=clock)
    net.register("nd", nd)
    op = Hung()
    n = OperatorNode(NodeConfig(role="primary", listen="n", downstream="nd", operator_stall_max=2.0), op, net.peer,
                     clock=clock)
    net.register("n", n)
    yield net, now, nd, n, op
    n.stop()


def test_a_primary_whose_operator_stopped_says_so_and_stops_renewing_its_lease(stalled_setup):
    net, now, nd, n, op = stalled_setup
    beat = lambda: net.call_pb("n", "Heartbeat", pb.HeartbeatRequest(sender="N'", epoch=1))  # noqa: E731
    n._submit(batch(1, 5))
    now[0] = 1.9
    assert beat().stalled_ms == 0 and not n.snapshot()["operator_stalled"]
    n.primary_side.deliver.loop()  # not stalled yet: the resync frame goes out and renews the lease
    assert nd.inbound.primary_node == "N" and nd.inbound.lease.renewed_at == 1.9
    now[0] = 2.5
    assert beat().stalled_ms == 2500
    assert n.counters["operator_stalls"] == 1
    s = n.snapshot()
    assert s["operator_stalled"] and s["operator_oldest_call_s"] == 2.5
    n.lock.wait = lambda timeout=None: now.__setitem__(0, now[0] + timeout)  # ack_poll_ms passes at once
    n.primary_side.deliver.loop()  # idle and stalled: no empty frame, so the lease runs out
    assert n.counters["idle_frames_withheld"] == 1 and nd.inbound.lease.renewed_at == 1.9
    now[0] = 2.5
    assert n.state.role is Role.PRIMARY  # it does not fence itself: with no standby, waiting is better
    now[0] = 3.0
    assert beat().stalled_ms == 3000 and n.counters["operator_stalls"] == 1  # said once
    op.answer()
    n.collect(block=False)
    assert beat().stalled_ms == 0 and not n.snapshot()["operator_stalled"]
    assert n.snapshot()["operator_slowest_call_s"] == 3.0


def test_a_primary_whose_operator_failed_says_so_at_once(stalled_setup):
    """A call answered with an error (Spark's JVM is gone) ends the operator loop: nothing will be processed
    again, so the primary does not wait out operator_stall_max."""
    net, now, nd, n, op = stalled_setup
    n._submit(batch(1, 5))
    op.futures[0].set_exception(RuntimeError("Spark's JVM cannot be reached"))
    with pytest.raises(RuntimeError):
        n.collect(block=False)  # in the node, this ends the operator loop: spawn hands it to _operator_failed
    n._operator_failed(RuntimeError("Spark's JVM cannot be reached"))
    now[0] = 0.2  # far below operator_stall_max (2 s)
    assert net.call_pb("n", "Heartbeat", pb.HeartbeatRequest(sender="N'", epoch=1)).stalled_ms == 200
    s = n.snapshot()
    assert s["operator_stalled"] and "JVM cannot be reached" in s["operator_failed"]
    assert n.counters["operator_failures"] == 1 and n.counters["operator_stalls"] == 1
    assert n.halt.is_set() and "JVM cannot be reached" in n.fatal  # its process exits (cli: EXIT_FAILED)


def test_a_standby_whose_operator_failed_asks_to_exit_rather_than_take_over_and_stall():
    s = OperatorNode(NodeConfig(role="standby", listen="s"), Selection("price > 1"), MemoryNetwork().peer)
    s._operator_failed(RuntimeError("Spark's JVM cannot be reached"))
    assert s.halt.is_set() and s.fatal.startswith("the operator failed")
    assert s.snapshot()["operator_failed"]
    s.stop()


def test_an_operator_that_says_it_failed_ends_the_loop_with_no_call_out():
    """A lazy standby may make no operator call for a long time: a dead engine is found between calls."""
    s = OperatorNode(NodeConfig(role="standby", listen="s"), Selection("price > 1"), MemoryNetwork().peer)
    s.operator.failure = RuntimeError("Spark's JVM cannot be reached")
    with pytest.raises(RuntimeError, match="JVM cannot be reached"):
        s._operator_loop()
    s.stop()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the loop re-raises, on purpose
def test_a_loop_that_dies_is_handed_to_its_crash_handler():
    import threading

    n = OperatorNode(NodeConfig(role="standby", listen="s"), Selection("price > 1"), MemoryNetwork().peer)
    seen, done = [], threading.Event()

    def loop():
        raise ValueError("boom")

    n.spawn("x", loop, on_crash=lambda e: (seen.append(str(e)), done.set()))
    assert done.wait(5) and seen == ["boom"]
    n._threads[-1].join(5)
    assert n.counters["loop_crashes"] == 1
    n.stop()


def test_a_promoted_standby_times_its_calls_from_its_promotion():
    """A lazy standby's calls wait by design (a Spark feed holds them): as a new primary it must not take
    a call made long before for a stalled one, nor say so to a spare standby."""
    now = [0.0]
    s = OperatorNode(NodeConfig(role="standby", listen="s", operator_stall_max=2.0), Hung(), MemoryNetwork().peer,
                     clock=lambda: now[0])
    s._submit(batch(1, 5))
    now[0] = 30.0
    assert s.handle_heartbeat(m.HeartbeatRequest(sender="x", epoch=0)).stalled_ms == 0  # a standby: never
    s.state.fence.advance(1)
    s.state.become(Role.PROMOTING, epoch=2)
    s.takeover._replay(plan_takeover(epoch=2, delivered_through=0, received_through=5, oq_first=1, oq_last=0),
              m.TakeoverReply(epoch=2))
    assert s.state.role is Role.PRIMARY
    now[0] = 31.0
    assert s.handle_heartbeat(m.HeartbeatRequest(sender="x", epoch=2)).stalled_ms == 0
    now[0] = 32.5
    assert s.handle_heartbeat(m.HeartbeatRequest(sender="x", epoch=2)).stalled_ms == 2500  # 2.5 s as a primary
    s.stop()


def test_a_call_that_hangs_inside_submit_is_timed_too(stalled_setup):
    """A synchronous operator computes inside `submit`: a hang there leaves no future to time."""
    net, now, nd, n, op = stalled_setup
    n.calls.calling_since = 0.0  # as `_submit` sets it before calling the operator
    now[0] = 2.1
    assert net.call_pb("n", "Heartbeat", pb.HeartbeatRequest(sender="N'", epoch=1)).stalled_ms == 2100


def test_a_standby_counts_its_primary_s_stall_as_a_missed_heartbeat():
    net = MemoryNetwork()
    replies = [m.HeartbeatReply(node="N", role=Role.PRIMARY, epoch=1, stalled_ms=2500),
               m.HeartbeatReply(node="N", role=Role.PRIMARY, epoch=1)]

    class Primary(PeerBase):
        address = "n"

        def heartbeat(self, msg, timeout):
            return replies.pop(0)

        def close(self):
            pass

    s = OperatorNode(NodeConfig(role="standby", listen="s", primary="n", heartbeat_misses=3), Selection("price > 1"),
                     lambda a: Primary() if a == "n" else net.peer(a))
    s.standby_side.registered.set()
    s.state.fence.advance(1)
    s.standby_side.detector = FailureDetector(0.1, 3, s.clock())
    s.sleep = lambda _: None
    s.standby_side.heartbeat_loop()
    assert s.standby_side.detector.misses == 1 and s.counters["heartbeat_primary_stalled"] == 1
    s.standby_side.heartbeat_loop()  # it answers again: the count starts over
    assert s.standby_side.detector.misses == 0 and s.state.role is Role.STANDBY
    s.stop()


def fake_proc(tmp_path, tree: dict[int, int]):
    """A /proc with processes pid -> ppid (names with spaces and parentheses, as a JVM's thread can have)."""
    for pid, ppid in tree.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(
            f"{pid} (a (b) c) S {ppid} {pid} {pid} 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0\n")
    (tmp_path / "self").mkdir()
    return tmp_path


def test_hang_stops_what_the_node_started_not_the_node_and_always_continues_it(tmp_path):
    proc = fake_proc(tmp_path, {10: 1, 11: 10, 12: 11, 13: 10, 20: 1, 21: 20})
    assert descendants(10, proc) == [11, 12, 13]
    sent = []
    assert hang(10, 3.0, proc=proc, kill=lambda p, s: sent.append((p, s)), sleep=lambda _: None) == 3
    assert sent == [(p, signal.SIGSTOP) for p in (11, 12, 13)] + [(p, signal.SIGCONT) for p in (11, 12, 13)]

    def gone(p, s):
        if p == 12:
            raise ProcessLookupError
        sent.append((p, s))

    def interrupted(_):
        raise KeyboardInterrupt

    sent.clear()
    with pytest.raises(KeyboardInterrupt):
        hang(10, 3.0, proc=proc, kill=gone, sleep=interrupted)
    assert sent == [(11, signal.SIGSTOP), (13, signal.SIGSTOP), (11, signal.SIGCONT), (13, signal.SIGCONT)]
    with pytest.raises(NothingToHang, match="Spark operator"):
        hang(21, 1.0, proc=proc, kill=lambda p, s: None, sleep=lambda _: None)
    sent.clear()
    assert kill_all(10, proc=proc, kill=gone) == 2  # 12 was gone already
    assert sent == [(11, signal.SIGKILL), (13, signal.SIGKILL)]
    with pytest.raises(NothingToHang):
        kill_all(21, proc=proc, kill=gone)


def test_hang_operator_is_refused_without_the_spark_operator_and_never_drawn_by_a_campaign(monkeypatch):
    import random

    from lazystandby.harness import campaign, launcher
    from lazystandby.harness.faults import CATALOG, Runner, for_runner

    monkeypatch.delenv("LS_OPERATOR", raising=False)
    with pytest.raises(SettingError, match="hang-operator .*needs the Spark operator"):
        launcher._args("launch", ["--fault", "hang-operator"])
    args, settings = launcher._args("launch", ["--fault", "hang-operator", "--operator", "spark",
                                               "--operator-stall-max", "2"])
    assert settings["operator"] == "spark" and launcher._trial_spec(settings).extra["operator_stall_max"] == 2.0
    with pytest.raises(ValueError, match="needs the Spark operator"):
        launcher.run_trial(fault="hang-operator")  # before anything starts
    assert CATALOG["hang-operator"].spark and "hang-operator" in for_runner(Runner.CONTAINERS)
    rng, catalog = random.Random(5), for_runner(Runner.PROCESSES)
    drawn = {campaign.draw(rng, i, catalog).name for i in range(600)}
    assert not drawn & {n for n, f in CATALOG.items() if f.spark} and "kill-primary" in drawn
    assert "kill-standby-then-primary" in drawn  # doubles are still drawn
