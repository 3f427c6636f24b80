"""The operator node's inbound part on its own (node/inbound.py): a frame checked whole before anything
changes, a jump past covered positions, arrivals timed for the covering latency."""

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core.acks import Checkpoint
from lazystandby.core.errors import DuplicateSequence, QueueFull, SequenceGap
from lazystandby.node.inbound import Inbound
from lazystandby.node.runs import Jump
from tests.unit.node.support import run


def inbound(now, **kw):
    return Inbound(NodeConfig(role="standby", **kw), lambda: now[0])


def test_a_refused_frame_leaves_the_inbound_side_as_it_was():
    now = [0.0]
    i = inbound(now, iq_capacity=10)
    assert not i.admit([run(1, 5)], Checkpoint(), None, stateful=False, timed=True)
    with pytest.raises(SequenceGap):
        i.admit([run(8, 2)], Checkpoint(), None, stateful=False, timed=True)
    with pytest.raises(DuplicateSequence):
        i.admit([run(3, 4)], Checkpoint(), None, stateful=False, timed=True)
    # A standby's IQ' is four times iq_capacity: 40 tuples, 5 held.
    with pytest.raises(QueueFull):
        i.admit([run(6, 36)], Checkpoint(), None, stateful=False, timed=True)
    assert i.received_through == 5 and len(i.iq) == 5 and list(i.arrived) == [(5, 0.0)]


def test_a_frame_past_a_covering_checkpoint_jumps_and_a_stateful_one_rebuilds_from_its_first():
    now = [0.0]
    i = inbound(now)
    assert i.admit([run(11, 5, seq0=11)], Checkpoint(10, 4), None, stateful=False, timed=False)
    jump = i.iq.take_all(100, None)[0]
    assert isinstance(jump, Jump) and jump.checkpoint == Checkpoint(10, 4) and jump.rebuild_from is None
    assert i.received_through == 15 and not i.arrived
    s = inbound(now)
    assert s.admit([run(11, 5, seq0=11)], Checkpoint(12, 4), None, stateful=True, timed=False)
    jump = s.iq.take_all(100, None)[0]
    assert jump.rebuild_from == 11 and jump.checkpoint == Checkpoint(12, 4) and s.received_through == 15


def test_the_covering_latency_is_from_the_arrival_of_what_a_checkpoint_covers():
    now = [1.0]
    i = inbound(now)
    i.admit([run(1, 5)], Checkpoint(), None, stateful=False, timed=True)
    now[0] = 2.0
    i.admit([run(6, 5)], Checkpoint(), None, stateful=False, timed=True)
    now[0] = 2.5
    i.covered_through(3)  # part of the oldest frame still listed: from its arrival
    assert i.cover_latency == pytest.approx(1.5) and len(i.arrived) == 2
    now[0] = 3.0
    i.covered_through(7)  # the first frame wholly, the second in part: from the newest wholly covered
    assert i.cover_latency == pytest.approx(2.0) and list(i.arrived) == [(10, 2.0)]
