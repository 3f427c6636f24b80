"""A primary that announces itself: to an Nd that does not know its epoch, and to a Nu that knows it by
another address."""

from lazystandby.config import NodeConfig
from lazystandby.core.roles import Role
from lazystandby.node.operator_node import OperatorNode
from lazystandby.operators.selection import Selection
from tests.unit.node.support import RecordingSource, frame, nu_with, push, run


def test_a_primary_announces_itself_to_an_nd_that_does_not_know_its_epoch(net, nd):
    n = OperatorNode(NodeConfig(role="primary", listen="n", downstream="nd", upstream="nu"),
                     Selection("price > 100"), net.peer)
    net.register("n", n)
    try:
        n.state.fence.advance(2)  # this primary took over in epoch 2; Nd restarted and knows epoch 1
        assert push(net, frame(run(1, 4), epoch=2)).received_through == 4
        n._operator_loop()
        n.primary_side.deliver.loop()  # refused (unknown epoch): announces itself
        assert n.counters["announced"] == 1 and nd.fence.epoch == 2
        n.primary_side.deliver.loop()  # an empty frame learns where Nd stands
        n.primary_side.deliver.loop()
        assert nd.inbound.delivered_through == 4 and nd.counters["takeovers"] == 1
    finally:
        n.stop()


def test_a_primary_nu_knows_by_another_address_is_told_so_and_not_fenced(net, caplog):
    """A primary's announcement to a Nu that pushes to it under another address (a name against an IP, NAT)
    was refused as stale, and the live primary fenced itself after a second without pushes: a failover,
    or, with no standby, a pipeline stopped for good. The refusal now fences nobody and says why."""
    nu = nu_with(RecordingSource())
    net.register("nu", nu)
    n = OperatorNode(NodeConfig(role="primary", listen="n", advertise="n.example:50051", upstream="nu"),
                     Selection("price > 100"), net.peer)
    try:
        with caplog.at_level("WARNING"):
            n.primary_side.announce(n.upstream, 1)
            n.primary_side.announce(n.upstream, 1)  # a second later: counted, not logged again
        assert n.state.role is Role.PRIMARY and n.counters["fenced"] == 0
        assert n.counters["announce_refused"] == 2 and n.counters["announced"] == 0
        said = [r.getMessage() for r in caplog.records if "did not take the announcement" in r.getMessage()]
        assert len(said) == 1 and "set its advertise to n" in said[0]
        assert nu.errors["not_the_primary"] == 2 and nu.outbound.push.address == "n" and nu.fence.epoch == 1
        nu.fence.advance(2)  # a newer epoch in force at Nu still fences it, once it has worked (else: rejoins)
        n.primary_side.worked = True
        n.primary_side.announce(n.upstream, 1)
        assert n.state.role is Role.FENCED
    finally:
        n.stop()
        nu.stop()
