"""The window query on a real Spark session: the same results at the same positions as the Python
operator and the truth table, however the link order is cut into calls, held back (a lazy standby) or
resumed from a checkpoint; on both state stores."""

import random

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core.messages import Params
from lazystandby.core.seq import StreamRegistry
from lazystandby.harness.check import window_expected
from lazystandby.operators.spark_window import SparkWindow
from lazystandby.sources.generator import interleave
from tests.unit.operators.test_window import link_order, run


def spark_run(op, batch, cuts, *, lazy=False):
    """Every call submitted before the first is collected (the node pipelines as much), results by
    position in `batch`."""
    op.lazy(lazy)
    bounds = [0, *sorted(cuts), len(batch)]
    futs = [(lo, op.submit(batch.slice(batch.first + lo, batch.first + hi)))
            for lo, hi in zip(bounds, bounds[1:], strict=False) if hi > lo]
    op.lazy(False)  # a takeover: what is held back is answered now
    out = []
    for lo, fut in futs:
        got = fut.result(timeout=120)
        out += [(lo + int(a), p) for a, p in zip(got.at, got.payloads.to_pylist(), strict=True)]
    return out


@pytest.mark.parametrize("store, query, lateness", [
    ("hdfs", "window", 0),
    ("rocksdb", "SELECT symbol, venue, count(*), sum(volume), min(price), avg(price) FROM ticks "
                "GROUP BY window(ts, '500 milliseconds'), symbol, venue", 300),
])
def test_spark_windows_equal_the_python_operator_however_cut_held_or_resumed(store, query, lateness):
    ticks = list(interleave(["I1", "I2"], 20_000, 11))
    q, batch, late = link_order(query, ticks, every=500, lateness_ms=lateness)
    expected, late_exp = window_expected([p for _, _, p in ticks], q, every=500)
    _, whole = run(q, batch, [])
    assert [p for _, p in whole] == expected and len(expected) > 50
    op = SparkWindow(q, NodeConfig(name="N", operator="spark", query=query, lateness_ms=lateness,
                                   spark_state_store=store,
                                   spark_partitions=1, spark_standby_hold=0.3, spark_max_rows=3_000))
    try:
        rng = random.Random(query)
        assert spark_run(op, batch, rng.sample(range(1, len(batch)), 30)) == whole
        assert op.live_keys() > 0  # the last windows are open, in Spark's state store

        # A standby's feed holds rows back and hands many records to one micro-batch: the same results.
        op.restore(0)
        assert spark_run(op, batch, rng.sample(range(1, len(batch)), 60), lazy=True) == whole

        # Resumed at a record halfway (a fresh state): every window not final there, as the Python
        # operator resumed at the same place gives it.
        at = [i for i in range(len(batch) // 2, len(batch)) if batch.streams[i] == StreamRegistry.CONTROL][0]
        params = Params(batch.first + at, batch.payload(at))
        rest = batch.slice(batch.first + at + 1, batch.first + len(batch))
        py = run_restored(q, rest, params)
        # From a thread of its own, as a node's operator loop restores: a new thread's JVM side has no
        # active Spark session, and the query's sink (a Python data source) is looked up in it.
        on_thread(lambda: op.restore(batch.first + at, params))
        got = spark_run(op, rest, rng.sample(range(1, len(rest)), 10))
        assert got == py and 0 < len(got) < len(whole)
    finally:
        op.close()


def on_thread(fn):
    """`fn()` on a new thread; what it raises is raised here."""
    import threading

    failed: list[BaseException] = []

    def body():
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - raised again in the caller
            failed.append(e)

    t = threading.Thread(target=body)
    t.start()
    t.join(120)
    if failed:
        raise failed[0]


def run_restored(q, batch, params):
    from lazystandby.operators.window import WindowAggregate

    op = WindowAggregate(q)
    op.restore(params.pos, params)
    got = op.process(batch)
    return [(int(a), p) for a, p in zip(got.at, got.payloads.to_pylist(), strict=True)]
