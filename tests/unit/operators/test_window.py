"""The window operator against the truth table, however its inputs are cut into calls."""

import random

import numpy as np
import pytest

from lazystandby.core.seq import StreamRegistry
from lazystandby.core.tuples import TupleBatch
from lazystandby.core.watermarks import WatermarkPlacer
from lazystandby.core.windows import WindowSpec
from lazystandby.formats import control
from lazystandby.formats.query import parse_query
from lazystandby.harness.check import compare_results, window_expected
from lazystandby.operators.window import WindowAggregate
from lazystandby.sources.generator import interleave

QUERIES = [  # (text, lateness in ms)
    ("window", 0),
    ("SELECT symbol, venue, count(*), sum(volume), min(price) FROM ticks "
     "GROUP BY window(ts, '500 milliseconds'), symbol, venue", 0),
    ("SELECT venue, count(*), avg(price), max(volume) FROM ticks WHERE volume > 1000 "
     "GROUP BY window(ts, '1 second', '250 milliseconds'), venue", 200),
]


def link_order(query, ticks, every, rng=None, lateness_ms=0):
    """What Nu sends: the ticks placed by WatermarkPlacer, admitted in polls of random sizes."""
    q = parse_query(query, lateness_ms)
    placer = WatermarkPlacer(WindowSpec(q.size_ms, q.slide_ms, q.lateness_ms), every)
    streams, seqs, payloads, late = [], [], [], []
    i, pos = 0, 1
    rng = rng or random.Random(1)
    while i < len(ticks):
        n = rng.randint(1, 3000)
        poll = ticks[i:i + n]
        ts = np.array([int(p.split(b",")[3]) for _, _, p in poll])
        placed = placer.place(pos, ts)
        wms = iter(placed.watermarks)
        for k in placed.order.tolist():
            if k < 0:
                streams.append(StreamRegistry.CONTROL)
                seqs.append(pos + len(streams) - 1)
                payloads.append(control.encode_watermark(next(wms)))
            else:
                streams.append(1 if poll[k][0] == "I1" else 2)
                seqs.append(poll[k][1])
                payloads.append(poll[k][2])
        late.extend(i + k for k in placed.late.tolist())
        pos = 1 + len(streams)
        i += n
    return q, TupleBatch(1, streams, seqs, payloads), late


def run(q, batch, cuts):
    op = WindowAggregate(q)
    out = []
    bounds = [0, *sorted(cuts), len(batch)]
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        if hi > lo:
            got = op.process(batch.slice(batch.first + lo, batch.first + hi))
            out += [(lo + int(a), p) for a, p in zip(got.at, got.payloads.to_pylist(), strict=True)]
    return op, out


@pytest.mark.parametrize("query, lateness", QUERIES)
def test_same_results_however_cut_and_equal_to_the_truth_table(query, lateness):
    ticks = list(interleave(["I1", "I2"], 30_000, 7))
    q, batch, late = link_order(query, ticks, every=700, lateness_ms=lateness)
    assert q.lateness_ms == lateness
    expected, late_exp = window_expected([p for _, _, p in ticks], q, every=700)
    assert late == late_exp
    assert len(expected) > 20
    op, whole = run(q, batch, [])
    assert [p for _, p in whole] == expected
    rng = random.Random(query)
    for _ in range(3):
        _, cut = run(q, batch, rng.sample(range(1, len(batch)), 40))
        assert cut == whole  # same results at the same positions
    # Each result is mapped to a watermark record.
    assert all(batch.streams[pos] == StreamRegistry.CONTROL for pos, _ in whole)
    assert op.live_keys() > 0  # the last windows are still open


def test_late_ticks_are_dropped_by_the_placer_and_counted():
    q = parse_query("SELECT symbol, count(*) FROM ticks GROUP BY window(ts, '100 milliseconds'), symbol")
    placer = WatermarkPlacer(WindowSpec(100, 100), every=4)
    placed = placer.place(1, np.array([1000, 1010, 1020, 1300, 900, 1310, 1320]))
    # positions 1-3 take three ticks, 4 is a record (watermark 1020), 5-7 ticks, 8 a record (1320).
    assert placed.order.tolist()[:4] == [0, 1, 2, -1]
    assert placed.watermarks[0] == 1020
    assert placed.late.tolist() == [4]  # 900's window [900, 1000) is final at 1020
    placed2 = placer.place(9, np.array([1000, 1399]))  # 1000's window [1000, 1100) is final at 1320
    assert placed2.late.tolist() == [0]
    assert placer.late_tuples == 2
    expected, late = window_expected([f"A,1.0,1,{t},X".encode() for t in [1000, 1010, 1020, 1300, 900, 1310, 1320,
                                                                           1000, 1399]], q, every=4)
    assert late == [4, 7]
    assert expected == [b"1000,1100,A,3"]


def test_exact_sums_and_averages():
    q = parse_query("SELECT symbol, count(*), sum(price), avg(price) FROM ticks "
                    "GROUP BY window(ts, '1 second'), symbol")
    op = WindowAggregate(q)
    ps = [b"A,0.1,1,1,X", b"A,0.2,1,2,X", b"A,0.000001,1,3,X", control.encode_watermark(5000)]
    out = op.process(TupleBatch(1, [1, 1, 1, 0], [1, 2, 3, 4], ps))
    assert out.payloads.to_pylist() == [b"0,1000,A,3,0.300001,0.100000"]
    assert out.at.tolist() == [3]


def test_compare_results_names_lost_duplicated_and_wrong():
    exp = [b"0,1000,A,3", b"0,1000,B,1", b"1000,2000,A,2"]
    got = [(1, b"0,1000,A,3"), (2, b"0,1000,B,9"), (3, b"0,1000,B,9"), (4, b"5000,6000,Z,1")]
    r = compare_results(exp, got, aggregates=1)
    assert (r["lost"], r["duplicated"], r["wrong"], r["unexpected"], r["ok"]) == (1, 1, 1, 1, False)
    assert compare_results(exp, list(enumerate(exp, 1)), aggregates=1)["ok"]


def test_restore_starts_empty_with_the_watermark_in_force():
    from lazystandby.core.messages import Params
    q = parse_query("SELECT symbol, count(*) FROM ticks GROUP BY window(ts, '100 milliseconds'), symbol")
    op = WindowAggregate(q)
    op.process(TupleBatch(1, [1], [1], [b"A,1.0,1,50,X"]))
    op.restore(10, Params(9, control.encode_watermark(300)))
    assert op.watermark == 300 and op.live_keys() == 0
    # A tick of a window final at 300 is not taken into it.
    out = op.process(TupleBatch(11, [1, 1, 0], [2, 3, 13],
                                [b"A,1.0,1,250,X", b"A,1.0,1,350,X", control.encode_watermark(400)]))
    assert out.payloads.to_pylist() == [b"300,400,A,1"]


def test_windows_merged_early_give_the_same_results(monkeypatch):
    """A window holds at most COMPACT_AT partial tables: merging at every call changes no result."""
    ticks = list(interleave(["I1", "I2"], 20_000, 7))
    q, batch, _ = link_order(QUERIES[2][0], ticks, every=900, lateness_ms=QUERIES[2][1])
    _, whole = run(q, batch, [])
    monkeypatch.setattr(WindowAggregate, "COMPACT_AT", 1)
    op, cut = run(q, batch, random.Random(3).sample(range(1, len(batch)), 200))
    assert cut == whole and len(whole) > 10
    assert all(len(parts) <= 1 for parts in op._by_window.values())


def test_a_large_windows_tables_grow_geometrically_so_a_call_never_merges_the_whole_state():
    """Many keys in one long window, many small calls: each table held is more than twice the next newer
    one, so a window of G groups holds about log2(G / a call's groups) tables, and the calls' results are
    those of one call over everything."""
    ticks = list(interleave(["I1", "I2"], 30_000, 7, keys=20_000))
    q, batch, _ = link_order("SELECT symbol, count(*), sum(volume) FROM ticks "
                             "GROUP BY window(ts, '10 seconds'), symbol", ticks, every=5000)
    _, whole = run(q, batch, [])
    op = WindowAggregate(q)
    most = 0
    for lo in range(0, len(batch), 200):
        op.process(batch.slice(batch.first + lo, batch.first + min(lo + 200, len(batch))))
        for parts in op._by_window.values():
            rows = [t.num_rows for t in parts]
            assert all(a > 2 * b for a, b in zip(rows, rows[1:], strict=False)), rows
            most = max(most, len(parts))
    assert 2 <= most <= 8 and op.live_keys() > 5000
    _, cut = run(q, batch, list(range(200, len(batch), 200)))
    assert cut == whole and len(whole) > 5000


def test_state_is_read_from_another_thread_while_calls_change_it():
    """Status reads live_keys and state_bytes while the operator loop calls: never a walk over what the call
    changes (a dict changed size during iteration failed Status calls)."""
    import threading
    import time

    ticks = list(interleave(["I1", "I2"], 20_000, 7, keys=5000))
    q, batch, _ = link_order("SELECT symbol, count(*) FROM ticks "
                             "GROUP BY window(ts, '1 second'), symbol", ticks, every=300)
    op = WindowAggregate(q)
    done = threading.Event()
    seen = []

    def read():
        while not done.is_set():
            seen.append((op.live_keys(), op.state_bytes()))
            time.sleep(0.0002)

    t = threading.Thread(target=read)
    t.start()
    try:
        for lo in range(0, len(batch), 97):
            op.process(batch.slice(batch.first + lo, batch.first + min(lo + 97, len(batch))))
    finally:
        done.set()
        t.join()
    assert seen and max(k for k, _ in seen) > 0
    assert op.live_keys() == sum(t.num_rows for parts in op._by_window.values() for t in parts)
    assert op.state_bytes() == sum(t.nbytes for parts in op._by_window.values() for t in parts)


def test_a_state_shipped_and_loaded_makes_the_same_results_as_the_state_it_came_from():
    """Passive Standby's snapshot: encode_state of a view taken between calls, loaded by another operator,
    then the same inputs into both: the same outputs, mapped to the same inputs; an empty state ships too."""
    from lazystandby.core.tuples import TupleBatch
    from lazystandby.formats import control
    from lazystandby.formats.query import parse_query
    from lazystandby.formats.ticks import Tick
    from lazystandby.operators.window import WindowAggregate

    q = parse_query("SELECT symbol, count(*), avg(price), max(price), sum(volume) FROM ticks "
                    "GROUP BY window(ts, '1 second'), symbol")

    def batch(first, items):
        return TupleBatch(first=first, streams=[s for s, _ in items], seqs=list(range(first, first + len(items))),
                          payloads=[p for _, p in items])

    ticks = [(1, Tick(f"S{i % 7}", 100.0 + i / 7, 10 + i, 1000 + i * 10, "X").encode()) for i in range(300)]
    part1 = ticks[:70] + [(0, control.encode_watermark(1500))] + ticks[70:150]
    part2 = ticks[150:] + [(0, control.encode_watermark(5000))]
    a = WindowAggregate(q)
    a.process(batch(1, part1))
    view = a.state_view()
    a.process(batch(len(part1) + 1, part2[:10]))  # calls after the view change nothing in it
    b = WindowAggregate(q)
    b.load_state(a.encode_state(view))
    assert b.watermark == 1500 and b.live_keys() > 0
    a2 = WindowAggregate(q)
    a2.load_state(a2.encode_state(a2.state_view()))  # nothing open, no watermark: ships and loads
    assert a2.live_keys() == 0 and a2.watermark is None
    ref = WindowAggregate(q)
    ref.process(batch(1, part1))
    x, y = ref.process(batch(len(part1) + 1, part2)), b.process(batch(len(part1) + 1, part2))
    assert len(x) > 0 and x.payloads.to_pylist() == y.payloads.to_pylist() and list(x.at) == list(y.at)


def test_a_full_snapshot_with_the_deltas_after_it_loads_the_state_the_primary_holds():
    """Incremental snapshots: a full view, then deltas of what the calls after it added (windows closing
    in between); loaded as a chain, the state makes the results the primary makes from there on."""
    from lazystandby.operators.window import WindowAggregate
    from lazystandby.sources.generator import interleave

    q = parse_query("SELECT symbol, count(*), avg(price), max(price) FROM ticks "
                    "GROUP BY window(ts, '1 second'), symbol")
    ticks = list(interleave(["I1", "I2"], 6_000, 5, keys=300))
    _, batch, _ = link_order(q.text(), ticks, every=200, rng=random.Random(3))
    a = WindowAggregate(q)
    cuts = [0, 1_000, 1_700, 2_900, 3_500, 4_800, len(batch)]
    blobs = []
    for i, (lo, hi) in enumerate(zip(cuts, cuts[1:-1], strict=False)):
        a.process(batch.slice(batch.first + lo, batch.first + hi))
        view = a.state_view(full=i == 0)
        assert a.view_is_full(view) == (i == 0)
        blobs.append(a.encode_state(view))
    b = WindowAggregate(q)
    b.load_state(blobs[0], blobs[1:])
    assert b.watermark == a.watermark and b.results == a.results
    rest = batch.slice(batch.first + cuts[-2], batch.first + cuts[-1])
    x, y = a.process(rest), b.process(rest)
    assert len(x) > 0 and x.payloads.to_pylist() == y.payloads.to_pylist() and list(x.at) == list(y.at)


def test_a_delta_ships_what_changed_not_the_state():
    from lazystandby.operators.window import WindowAggregate
    from lazystandby.sources.generator import interleave

    q = parse_query("SELECT symbol, count(*), max(price) FROM ticks GROUP BY window(ts, '60 minutes'), symbol")
    _, batch, _ = link_order(q.text(), list(interleave(["I1", "I2"], 21_000, 5, keys=100_000)), every=500)
    a = WindowAggregate(q)
    a.process(batch.slice(batch.first, batch.first + 20_000))
    full = a.encode_state(a.state_view())
    a.process(batch.slice(batch.first + 20_000, batch.first + 21_000))
    delta = a.encode_state(a.state_view(full=False))
    assert a.live_keys() > 15_000 and len(delta) * 5 < len(full)


def test_a_delta_asked_of_an_operator_that_tracked_none_is_a_full_view_and_a_chain_must_start_full():
    from lazystandby.operators.window import WindowAggregate

    q = parse_query("SELECT symbol, count(*) FROM ticks GROUP BY window(ts, '1 second'), symbol")
    a = WindowAggregate(q)
    view = a.state_view(full=False)  # no view before it: nothing tracked
    assert a.view_is_full(view)
    # A delta grown past the state it changes (and past 65,536 groups: nobody asked for one for long)
    # is not kept: the next view is full.
    from lazystandby.sources.generator import interleave

    _, batch, _ = link_order(q.text(), list(interleave(["I1", "I2"], 90_000, 5, keys=200_000)), every=5_000)
    a.process(batch)
    assert a._delta is None and a.view_is_full(a.state_view(full=False))
    delta = a.encode_state(a.state_view(full=False))
    with pytest.raises(ValueError, match="one full snapshot, then deltas"):
        WindowAggregate(q).load_state(delta)
