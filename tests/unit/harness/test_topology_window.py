"""The window query through the four nodes (the in-memory twin): exact results through a failover, a
standby whose state is warm, Nu's trim held back for the windows still open, a standby rebuilt."""

import pytest

from lazystandby.formats.query import parse_query
from lazystandby.harness.check import compare_results, window_expected
from lazystandby.harness.inprocess import InProcessTopology
from lazystandby.operators.window import WindowAggregate
from lazystandby.sources.generator import interleave

QUERY = ("SELECT symbol, count(*), avg(price), max(price) FROM ticks WHERE price > 50 "
         "GROUP BY window(ts, '500 milliseconds'), symbol")
EVERY = 256


def topology(total, rate, **kw):
    q = parse_query(QUERY)
    return q, InProcessTopology("memory", total=total, rate=rate, query=QUERY, watermark_every=EVERY,
                                operator=lambda _: WindowAggregate(q), **kw)


def expected(q, total):
    ticks = list(interleave(["I1", "I2"], total, 7))
    results, late = window_expected([p for _, _, p in ticks], q, every=EVERY, streams=[st for st, _, _ in ticks])
    return results, late


def check(q, t, exp):
    got = [(o, p) for o, _, _, p in t.sink.rows]
    return compare_results(exp, got, aggregates=len(q.aggregates))


def test_no_failure_every_result_once_and_nu_trims_only_what_no_open_window_needs():
    q, topo = topology(6000, 0.0, bsize="1")
    exp, late = expected(q, 6000)
    assert len(exp) > 50  # the streams keep pace: no tick is late (the placer's tests make late ones)
    with topo as t:
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through >= len(exp))
        r = check(q, t, exp)
        assert r["ok"], r
        nu = t.nodes["nu"]
        assert nu.counters["late_tuples"] == len(late)
        assert len(nu.late_data.items) == len(late)
        # The last windows are open: Nu keeps their inputs though Nd's acks cover every position.
        assert t.wait(lambda: nu.outbound.checkpoint.input_pos == nu.outbound.oqu.last)
        assert nu.outbound.oqu.trimmed_through < nu.outbound.checkpoint.input_pos
        # The standby applied every input (its state is warm) and skipped none. Bsize 1: no partial batch
        # waits at Nu (Algorithm 1 cuts whole batches only), so every position reaches it.
        n2 = t.nodes["n2"]
        assert t.wait(lambda: n2.processed.input_pos == nu.outbound.oqu.last)
        assert n2.counters["skipped_tuples"] == 0
        assert n2.operator.live_keys() == t.nodes["n"].operator.live_keys() > 0
        status = n2.snapshot()
        assert status["stateful"] and status["state_keys"] == n2.operator.live_keys()
        assert status["state_bytes"] > 0 and status["state_lag_tuples"] == 0


@pytest.mark.parametrize("bsize", ["1", "10", "inf"])
def test_kill_primary_the_results_are_exact(bsize):
    total = 20_000
    q, topo = topology(total, 20_000.0, bsize=bsize)
    exp, _ = expected(q, total)
    with topo as t:
        # Killed once Nu has trimmed what Nd's results cover: a takeover then starts past the first input,
        # and with no backup (Bsize inf) the new primary rebuilds its state from Nu's oldest held input.
        nu = t.nodes["nu"]
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through > 30 and nu.outbound.oqu.first > 1)
        t.kill("n")
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through >= len(exp), 30)
        r = check(q, t, exp)
        assert r["ok"], r
        n2 = t.nodes["n2"]
        assert n2.state.role == "primary"
        if bsize == "inf":
            assert n2.counters["rebuilds"] == 1  # no backup: the state is rebuilt from what Nu holds
        assert t.nodes["nd"].counters["duplicates_dropped"] == 0


def test_a_standby_started_empty_rebuilds_its_state_from_nus_trim_point_and_takes_over_exactly():
    from lazystandby.config import NodeConfig
    from lazystandby.node.operator_node import OperatorNode

    total = 24_000
    q, topo = topology(total, 12_000.0, bsize="10")
    exp, _ = expected(q, total)
    with topo as t:
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through > 30)
        t.kill("n2")
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through > 60)
        old = t.nodes["n2"]
        fresh = OperatorNode(NodeConfig(**{**vars(old.cfg), "extra": {}}), WindowAggregate(q), t.net.peer)
        t.nodes["n2"] = fresh
        t.net.register(t.addr["n2"], fresh)
        t.net.up(t.addr["n2"])
        fresh.start()
        # Its first run starts at Nu's trim point, before the checkpoint: rebuilt, not jumped past.
        assert t.wait(lambda: fresh.counters["rebuilds"] == 1 and fresh.processed.input_pos > 0, 20)
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through > 100)
        t.kill("n")
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through >= len(exp), 30)
        r = check(q, t, exp)
        assert r["ok"], r
        assert fresh.state.role == "primary"
        assert fresh.counters["rebuilt_tuples"] > 0
