"""The operator calls' books on their own (node/operator_calls.py): order, room, the oldest call, and a
stall said once when it begins and once when it ends, on a primary only."""

from concurrent.futures import Future

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core.tuples import TupleBatch
from lazystandby.node.operator_calls import DEFAULT_TAKE, OperatorCalls
from lazystandby.operators.selection import Selection


def batch(first, n):
    return TupleBatch(first, [1] * n, list(range(first, first + n)), [b"x"] * n)


def calls(now, **kw):
    return OperatorCalls(NodeConfig(role="primary", operator_stall_max=1.0, **kw), Selection("price > 1"),
                         lambda: now[0])


def test_answers_are_taken_oldest_first_and_measured():
    now = [10.0]
    c = calls(now)
    assert c.take == DEFAULT_TAKE["python"] and not c and c.oldest() is None
    f1, f2 = Future(), Future()
    c.made(batch(1, 3), f1, c.begin())
    now[0] = 10.5
    c.made(batch(4, 2), f2, c.begin())
    assert c.in_flight_tuples == 5 and c.oldest() == 10.0 and not c.head_done()
    f2.set_result([])
    assert not c.head_done()  # the second's answer waits for the first's
    f1.set_result([])
    now[0] = 11.0
    b, took = c.answered(primary=True)
    assert b.first == 1 and took == pytest.approx(1.0) and c.slowest_s == pytest.approx(1.0)
    assert c.in_flight_tuples == 2 and c.oldest() == 10.5 and c.cost.samples


def test_room_is_what_oq_holds_less_what_is_in_flight_and_one_call_at_a_time_unless_pipelined():
    now = [0.0]
    c = calls(now, operator_batch=100)
    assert c.take == 100 and c.room(50) == 50
    c.made(batch(1, 20), Future(), c.begin())
    assert c.room(50) <= 0  # in_flight_max 0: one call at a time
    c.operator.in_flight_max = 40
    assert c.room(50) == 20 and c.room(100) == 20  # the operator's bound, then OQ's
    assert c.room(30) == 10


def test_a_stall_is_said_when_it_begins_and_ends_and_never_on_a_standby():
    now = [0.0]
    c = calls(now)
    fut = Future()
    c.made(batch(1, 1), fut, c.begin())
    now[0] = 0.5
    assert c.stalled(primary=True) == (0.0, "")
    now[0] = 2.0
    seconds, changed = c.stalled(primary=True)
    assert seconds == pytest.approx(2.0) and changed == "began"
    assert c.stalled(primary=True)[1] == ""  # said once
    assert c.stalled(primary=False) == (0.0, "")  # a standby's calls wait by design
    fut.set_result([])
    c.answered(primary=True)
    c.stalled(primary=True)
    c.made(batch(2, 1), Future(), c.begin())
    now[0] = 4.0
    assert c.stalled(primary=True)[1] == "began"
    c.in_flight.clear()
    assert c.stalled(primary=True) == (0.0, "ended")
