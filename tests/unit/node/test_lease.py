"""The primary's lease at Nd: a takeover declined while the primary in force delivers, or past the lease
while Nd heard it after the standby lost it; a declined standby withdraws and keeps its backup."""

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core import messages as m
from lazystandby.core.detector import FailureDetector
from lazystandby.core.errors import PeerError
from lazystandby.node.downstream import DownstreamNode
from lazystandby.node.operator_node import OperatorNode
from lazystandby.operators.selection import Selection
from lazystandby.sinks.base import MemorySink
from lazystandby.transport.memory import MemoryNetwork
from lazystandby.v1 import lazystandby_pb2 as pb
from tests.unit.node.support import out_frame


def test_nd_declines_a_takeover_while_its_primary_still_delivers_and_takes_it_once_the_lease_runs_out(net, nd):
    """A standby that stopped hearing a primary which still delivers lost its primary, not the pipeline."""
    net.call_pb("nd", "Deliver", out_frame(1, 2, epoch=1))
    nd.tick(0.05)
    net.call_pb("nd", "Deliver", pb.OutputFrame(epoch=1, sender="N"))  # an idle primary's empty frame renews it
    nd.tick(0.05)
    with pytest.raises(PeerError) as e:
        net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="N'", epoch=2))
    assert e.value.status == "FAILED_PRECONDITION" and "N delivered 50 ms ago" in e.value.message
    assert nd.fence.epoch == 1 and nd.inbound.primary_node == "N" and nd.counters["takeovers"] == 0
    assert net.call_pb("nd", "Deliver", out_frame(3, 1, epoch=1)).received_through == 3  # N goes on
    # A delivery Nd refused (another sender) renews nothing.
    nd.tick(0.07)
    with pytest.raises(PeerError):
        net.call_pb("nd", "Deliver", out_frame(4, 1, epoch=1, sender="X"))
    nd.tick(0.01)
    assert net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="N'", epoch=2)).delivered_through == 3
    # The new primary holds the lease now: a third node is declined, the winner's retry is not.
    with pytest.raises(PeerError) as e:
        net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="X", epoch=3))
    assert e.value.status == "FAILED_PRECONDITION"
    assert net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="N'", epoch=2)).delivered_through == 3


def test_past_the_lease_nd_declines_a_standby_that_has_not_heard_a_primary_nd_heard_since(net, nd):
    """The primary's frame came 100 ms ago (past the 75 ms lease: a busy machine). A standby that says it
    has not heard the primary for 300 ms is cut off from a primary that lives: declined. One that says 150
    ms (a suspicion by refusals, or a crash: the frame is about as old as that) is taken."""
    net.call_pb("nd", "Deliver", out_frame(1, 2, epoch=1))
    nd.tick(0.1)
    with pytest.raises(PeerError) as e:
        net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="N'", epoch=2, primary_unheard_ms=300))
    assert e.value.status == "FAILED_PRECONDITION" and "cut off from a primary that lives" in e.value.message
    assert nd.fence.epoch == 1 and nd.counters["takeovers"] == 0
    assert nd.snapshot()["errors"] == {"takeover_declined_unheard": 1}  # apart from the lease's declines
    assert net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="N'", epoch=2,
                                                            primary_unheard_ms=150)).delivered_through == 2


def test_a_standby_says_how_long_it_has_surely_not_heard_its_primary():
    """Since its last good heartbeat, less one interval; nothing when it has heard no answer yet."""
    from lazystandby.core.recovery import RecoveryTimes

    s = OperatorNode(NodeConfig(role="standby", name="N'", listen="s", heartbeat_interval=0.2,
                                heartbeat_misses=5), Selection("price > 100"), MemoryNetwork().peer)
    s.standby_side.detector = FailureDetector(0.2, 5, now=0.0)
    assert s.takeover._unheard_ms(RecoveryTimes(last_ok=0.0, detected=1.0)) == 0  # never heard
    s.standby_side.detector.ok(0.5, 0.001)
    assert s.takeover._unheard_ms(RecoveryTimes(last_ok=0.5, detected=1.5)) == 800
    assert s.takeover._unheard_ms(RecoveryTimes(last_ok=0.5, detected=0.6)) == 0  # within an interval: says nothing


def test_a_takeover_queued_behind_a_slow_delivery_finds_the_lease_renewed_by_it(net):
    """The primary waits for Nd's reply before its next frame: a sink that took longer than the lease (a
    results topic's flush on a busy machine) is Nd's time, not the primary's silence. Renewed at arrival
    alone, the takeover that waited for the node lock meanwhile deposed a primary that was delivering."""
    now = [0.0]

    class SlowSink(MemorySink):
        def append(self, outputs, *, epoch=0):
            now[0] += 0.2  # the flush: longer than the 75 ms lease
            super().append(outputs, epoch=epoch)

    d = DownstreamNode(NodeConfig(role="downstream", listen="nd1"), SlowSink(), clock=lambda: now[0])
    net.register("nd1", d)
    net.call_pb("nd1", "Deliver", out_frame(1, 2, epoch=1))
    with pytest.raises(PeerError) as e:
        net.call_pb("nd1", "Takeover", pb.TakeoverRequest(node="N'", epoch=2))
    assert e.value.status == "FAILED_PRECONDITION" and "N delivered 0 ms ago" in e.value.message
    assert d.fence.epoch == 1 and d.counters["takeovers"] == 0
    # Silent past the lease after that reply, the primary is deposed, and Nd says for how long it was.
    now[0] += 0.1
    assert net.call_pb("nd1", "Takeover", pb.TakeoverRequest(node="N'", epoch=2)).delivered_through == 2
    assert d.inbound.takeovers.last.facts["primary_silent_ms"] == pytest.approx(100.0)


def test_an_idle_primary_renews_its_lease_three_times_per_lease_and_on_time(net, nd):
    """Empty frames every third of the lease (or ack_poll_ms, if shorter), and at the deadline: a notify
    just before it (an ack, an output) once made the loop wait a whole interval more."""
    assert NodeConfig(takeover_lease=0.075).idle_frame_s == pytest.approx(0.025)
    assert NodeConfig(heartbeat_interval=0.2).idle_frame_s == pytest.approx(0.05)  # auto: 150 ms, so ack_poll_ms
    assert NodeConfig(takeover_lease=0).idle_frame_s == 0.05  # no lease: ack_poll_ms
    now = [10.0]
    n = OperatorNode(NodeConfig(role="primary", name="N", listen="n", downstream="nd", takeover_lease=0.075),
                     Selection("price > 100"), net.peer, clock=lambda: now[0])
    net.register("n", n)
    try:
        n.primary_side.deliver.loop()  # the first frame: a resync
        waits = []

        def wait(timeout=None):  # a notify 20 ms in, then nothing: time passes as far as the wait asked
            waits.append(timeout)
            now[0] += 0.02 if len(waits) == 1 else timeout
        n.lock.wait = wait
        nd.tick(1.0)
        sent_at = now[0]
        n.primary_side.deliver.loop()
        assert now[0] - sent_at == pytest.approx(0.025) and waits == pytest.approx([0.025, 0.005])
        assert nd.counters["takeovers"] == 0 and nd.inbound.lease.renewed_at == nd.clock()
    finally:
        n.stop()


def test_with_no_lease_nd_takes_any_newer_epoch_at_once(net):
    d = DownstreamNode(NodeConfig(role="downstream", listen="nd0", takeover_lease=0), MemorySink(), clock=lambda: 0.0)
    net.register("nd0", d)
    net.call_pb("nd0", "Deliver", out_frame(1, 2, epoch=1))
    assert net.call_pb("nd0", "Takeover", pb.TakeoverRequest(node="N'", epoch=2)).delivered_through == 2
    assert d.snapshot()["takeover_lease_ms"] == 0.0  # what launch's summary reports: Nd's lease, not a default


def test_a_declined_standby_withdraws_its_epoch_and_keeps_taking_the_backup(net, nd):
    net.call_pb("nd", "Deliver", out_frame(1, 2, epoch=1))
    s = OperatorNode(NodeConfig(role="standby", listen="s", downstream="nd", upstream="nu"), Selection("price > 1"),
                     net.peer)
    s.state.fence.advance(1)
    unsealed = []
    s.standby_side.unseal = lambda: unsealed.append(1)
    s.takeover.run()
    assert s.state.role == "standby" and s.state.epoch == 1
    assert s.counters["takeovers_declined"] == 1 and s.counters["takeovers"] == 0
    assert unsealed == []  # declined at Nd's first answer: nothing held was decoded for it
    assert nd.fence.epoch == 1 and nd.inbound.primary_node == "N"
    s.check_epoch(1, "Nu", "backup")  # Nu's backup in the epoch in force is taken again
    nd.tick(0.1)  # N went silent: the next suspicion reaches Nd and takes over there
    nd.handle_takeover(m.TakeoverRequest(node="N'", epoch=2, address="s"))
    assert nd.fence.epoch == 2 and nd.inbound.primary_node == "N'"
    s.stop()


def test_a_standby_with_a_stale_epoch_steps_back_instead_of_fencing_itself(net, nd):
    net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="X", epoch=3))
    s = OperatorNode(NodeConfig(role="standby", listen="s", downstream="nd", upstream="nu"), Selection("price > 1"),
                     net.peer)
    s.state.fence.advance(1)
    s.takeover.run()
    assert s.state.role == "standby" and s.state.epoch == 3
    assert s.counters["takeovers_refused"] == 1
    s.stop()
