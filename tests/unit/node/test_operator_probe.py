"""A primary's operator probe (node/operator_probe.py): a copy of its operator, timed at a replay's size on
its latest inputs, fits the cost per tuple that its small steady calls cannot show."""

from concurrent.futures import Future

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core.errors import ProbeFailed
from lazystandby.core.recovery_model import CallCost
from lazystandby.core.roles import Role
from lazystandby.core.tuples import TupleBatch
from lazystandby.formats.query import parse_query
from lazystandby.formats.ticks import Tick
from lazystandby.node.operator_node import OperatorNode
from lazystandby.node.operator_probe import PROBE_EVERY_S, PROBES_AT_ONCE, OperatorProbe
from lazystandby.operators.base import Operator
from lazystandby.operators.selection import Selection
from lazystandby.operators.window import WindowAggregate
from tests.unit.node.support import run

WINDOW = "SELECT symbol, count(*), avg(price), max(price) FROM ticks GROUP BY window(ts, '20 seconds'), symbol"


def answered(n, batch, selected):
    """Holding the node's lock: a call for `batch` made 2 ms ago and answered, taken as the operator loop
    takes it (the books kept, then the outputs into OQ)."""
    fut = Future()
    fut.set_result(selected)
    n.calls.made(batch, fut, n.clock() - 0.002)
    n.calls.answered(primary=n.state.role is Role.PRIMARY)
    n._finish(batch, selected)


def ticks(first, n):
    keys = range(first, first + n)
    return TupleBatch(first, [1] * n, list(keys), [Tick(f"S{i % 7}", 150.0 + i % 3, 100, 1_000 + i, "XTKS").encode()
                                                   for i in keys])


class Timed(Operator):
    """An operator whose copies take 1 ms a call and 10 us a tuple on the test's clock."""

    probeable = True

    def __init__(self, clock, fail=False):
        self.clock, self.fail, self.calls = clock, fail, []

    def process(self, batch):
        self.calls.append(len(batch))
        if self.fail:
            raise MemoryError("no room")
        self.clock[0] += 0.001 + 1e-5 * len(batch)
        return []

    def probe_copy(self):
        return Timed(self.clock, self.fail)


def test_the_probe_keeps_the_latest_inputs_and_waits_for_enough_new_ones():
    t = [0.0]
    probe = OperatorProbe(Timed(t), lambda: t[0], tuples=100, least=50)
    probe.note(ticks(1, 30))
    assert probe.run() is None  # 30 new: fewer than `least`
    for first in range(31, 331, 30):
        probe.note(ticks(first, 30))
    b = probe.batch()
    assert len(b) == 100 and b.seqs.tolist() == list(range(231, 331))  # the latest 100, in order
    assert b.payloads.to_pylist() == ticks(231, 100).payloads.to_pylist()
    assert probe.batch() is None  # nothing new since


def test_a_probe_times_a_copy_and_leaves_the_live_operator_alone():
    t = [0.0]
    live = Timed(t)
    probe = OperatorProbe(live, lambda: t[0], tuples=100, least=50)
    probe.note(ticks(1, 120))
    size, seconds = probe.run()
    assert size == 100 and seconds == pytest.approx(0.001 + 1e-5 * 100)
    assert live.calls == [] and probe.probes == 1


def test_a_copy_that_fails_raises_and_measures_nothing():
    t = [0.0]
    probe = OperatorProbe(Timed(t, fail=True), lambda: t[0], tuples=100, least=50)
    probe.note(ticks(1, 60))
    with pytest.raises(ProbeFailed, match="MemoryError: no room"):
        probe.run()
    assert probe.probes == 0


def test_operators_give_a_stateless_copy_of_their_query_and_an_engine_none():
    w = WindowAggregate(parse_query(WINDOW))
    w.process(ticks(1, 50))
    copy = w.probe_copy()
    assert copy is not w and copy.query == w.query and copy.live_keys() == 0 < w.live_keys()
    sel = Selection("price > 100")
    assert sel.probe_copy().predicate == "price > 100"
    assert Timed([0.0]).probe_copy() is not None and Operator.probe_copy(sel) is None  # the base: no copy
    assert w.probeable and sel.probeable and not Operator.probeable


def test_with_a_probe_the_fit_prices_a_large_replay_at_its_cost_per_tuple():
    # Steady calls of 20-60 tuples at 2 ms, whatever their size (the call's cost hides the tuples'); a
    # probe of 4,096 at 30 ms: 12,000 tuples then cost about 88 ms, where the calls alone said 2.
    cost = CallCost()
    for i in range(200):
        cost.add(20 + i % 40, 0.002)
    call, per_tuple = cost.fit()
    assert per_tuple == 0.0
    cost.add(4_096, 0.030, keep=True)
    call, per_tuple = cost.fit()
    assert call + 12_000 * per_tuple == pytest.approx(0.002 + 0.028 * 12_000 / 4_066, rel=0.02)


def test_a_primary_probes_a_copy_of_its_operator_and_its_fit_takes_it_in(net):
    n = OperatorNode(NodeConfig(role="primary", listen="n"), WindowAggregate(parse_query(WINDOW)), net.peer)
    try:
        assert n.calls.probe is not None
        n.calls.probe.least = 100
        n.primary_side.probe_operator()
        assert n.counters.get("operator_probes", 0) == 0  # nothing processed yet
        with n.lock:
            for first in range(1, 301, 50):
                answered(n, ticks(first, 50), n.operator.process(ticks(first, 50)))
        n.primary_side.probe_operator()
        assert n.counters["operator_probes"] == 1 and len(n.calls.cost.kept) == 1
        assert n.calls.cost.kept[0][0] == 300
        first = 301
        for k in range(2, PROBES_AT_ONCE + 2):  # the first few as soon as `least` new inputs came, then due later
            with n.lock:
                answered(n, ticks(first, 100), n.operator.process(ticks(first, 100)))
            first += 100
            n.primary_side.probe_operator()
            assert n.counters["operator_probes"] == min(k, PROBES_AT_ONCE)
        assert n.calls.probe_due == pytest.approx(n.clock() + PROBE_EVERY_S, abs=1.0)
    finally:
        n.stop()


def test_a_standby_and_an_engine_without_a_copy_do_not_probe(net, standby):
    standby.calls.probe.note(run(1, 2_000))
    standby.primary_side.probe_operator()
    assert standby.state.role is Role.STANDBY and standby.counters.get("operator_probes", 0) == 0

    class Engine(Operator):
        def process(self, batch):
            return []

    n = OperatorNode(NodeConfig(role="primary", listen="e"), Engine(), net.peer)
    try:
        assert n.calls.probe is None
    finally:
        n.stop()


def test_a_primary_whose_copy_fails_counts_it_says_it_once_and_keeps_its_fit(net, caplog):
    class CopyFails(Operator):
        probeable = True

        def process(self, batch):
            return []

        def probe_copy(self):
            return Timed([0.0], fail=True)

    n = OperatorNode(NodeConfig(role="primary", listen="f"), CopyFails(), net.peer)
    try:
        n.calls.probe.least = 10
        for k in range(2):
            with n.lock:
                answered(n, run(1 + 20 * k, 20), [])
            n.calls.probe_due = 0.0
            n.primary_side.probe_operator()
        assert n.counters["operator_probe_errors"] == 2 and not n.calls.cost.kept
        assert n.state.role is Role.PRIMARY and not n.fatal
        assert sum("a copy of the operator failed" in r.message for r in caplog.records) == 1
    finally:
        n.stop()
