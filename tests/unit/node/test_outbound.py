"""The outbound link composed by a node that is not Nu: a bare node whose queue a test fills (no source, no
intake) pushes to a primary, backs up to its standby in Bsize batches, trims by the primary's Level-1
acks, and answers the standby's takeover by resending from the checkpoint, through its `Feed` alone."""

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core import messages as m
from lazystandby.core.acks import Checkpoint
from lazystandby.core.errors import PermissionDenied
from lazystandby.core.roles import Role
from lazystandby.node.common import NodeBase
from lazystandby.node.operator_node import OperatorNode
from lazystandby.node.outbound import OutboundLink
from lazystandby.operators.selection import Selection

from .support import run


class ListFeed:
    """A feed with nothing behind it but what the test appends: what the link told it is kept."""

    windowed = False

    def __init__(self) -> None:
        self.covered_at: list[tuple[int, int]] = []
        self.members: list = []
        self.forgotten = 0
        self.registered = 0

    def needed_from(self, through):
        return None

    def params_at(self, pos):
        return None

    def forget_params(self, trimmed):
        self.forgotten = trimmed

    def covered(self, checkpoint, members, trimmed_through):
        self.covered_at.append((checkpoint.input_pos, trimmed_through))

    def record_membership(self, members):
        self.members.append(members)

    def standby_registered(self):
        self.registered += 1


@pytest.fixture
def sender(net):
    n = OperatorNode(NodeConfig(role="primary", listen="n"), Selection("price > 100"), net.peer)
    s2 = OperatorNode(NodeConfig(role="standby", listen="s2"), Selection("price > 100"), net.peer)
    net.register("n", n)
    net.register("s2", s2)
    cfg = NodeConfig(role="upstream", listen="relay", primary="n", standby="s2", bsize="10", backup_linger_ms=0)
    node = NodeBase(cfg)
    node.state.become(Role.UPSTREAM, epoch=1)
    feed = ListFeed()
    out = OutboundLink(cfg, node, feed, net.peer)
    yield out, feed, n, s2
    for x in (node, n, s2):
        x.stop()


def test_a_node_without_a_source_sends_backs_up_and_trims_through_its_feed(sender):
    out, feed, n, s2 = sender
    with out.lock:
        out.append(run(1, 30))
    out.push.loop()
    assert n.inbound.received_through == 30 and out.push.cursor == 31
    out.backup.loop()
    assert s2.inbound.received_through == 30 and s2.counters["backup_tuples"] == 30  # three batches of 10
    with out.lock:
        out.level1(1, Checkpoint(20, 8))
    assert out.oqu.trimmed_through == 20 and feed.forgotten == 20
    assert feed.covered_at[-1] == (20, 20)  # a selection: skipped past the checkpoint itself
    with out.lock:
        out.level1(1, Checkpoint(40, 9))  # beyond what was ever sent: refused, nothing trimmed
    assert out.oqu.trimmed_through == 20 and out.counters["level1_beyond_head"] == 1


def test_the_standby_takes_over_and_is_resent_from_the_checkpoint(sender):
    out, feed, n, s2 = sender
    with out.lock:
        out.append(run(1, 30))
        out.level1(1, Checkpoint(12, 5))
    with pytest.raises(PermissionDenied):  # not the standby in place: refused, nothing changes
        out.handle_takeover(m.TakeoverRequest(node="X", epoch=2, address="x", resend_from=13))
    reply = out.handle_takeover(m.TakeoverRequest(node="N2", epoch=2, address="s2", resend_from=13))
    assert (reply.epoch, reply.resend_from, reply.head_pos) == (2, 13, 30)
    assert out.epoch == 2 and out.push.address == "s2" and out.push.cursor == 13 and out.standby is None
    assert [(x.epoch, x.primary, x.standby) for x in feed.members] == [(2, "s2", "")]  # made durable once
    again = out.handle_takeover(m.TakeoverRequest(node="N2", epoch=2, address="s2", resend_from=13))
    assert again == reply and len(feed.members) == 1  # a retried takeover: the same answer
    out.handle_register_standby(m.RegisterStandby(node="N3", address="n"))
    assert feed.registered == 1 and out.standby is not None and out.standby.address == "n"
