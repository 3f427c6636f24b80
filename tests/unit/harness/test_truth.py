"""DuckDB's truth of a window query against the operator fed the link order Nu's placer makes: watermark
records where Nu puts them, late records dropped, records out of order."""

import numpy as np
import pyarrow as pa
import pytest

from lazystandby.core.seq import StreamRegistry
from lazystandby.core.tuples import TupleBatch
from lazystandby.core.watermarks import WatermarkPlacer
from lazystandby.formats import control
from lazystandby.formats.admit import TableRules
from lazystandby.formats.schema import parse_table
from lazystandby.formats.sql import plan
from lazystandby.harness.truth import same_values, selection_truth, values_of, window_truth
from lazystandby.operators.sql import SqlSelect, SqlWindow
from lazystandby.sources.drawn import draw_records

SENSOR = parse_table("""CREATE TABLE r (device VARCHAR NOT NULL, site VARCHAR, temp DOUBLE, battery DECIMAL(5, 2),
  at TIMESTAMP(3) NOT NULL, WATERMARK FOR at AS at - INTERVAL '20' MILLISECOND) WITH ('format' = 'json')""")


def link_order(p, payloads, every):
    """What Nu admits: the records with its watermark records placed, the late ones out."""
    placer = WatermarkPlacer(p.spec, every, [1])
    ts = TableRules({"r": SENSOR}).event_times(pa.array(payloads, pa.binary()), ["r"] * len(payloads))
    placed = placer.place(1, ts, np.ones(len(ts), np.int64))
    streams, pays, marks = [], [], iter(placed.watermarks)
    for i in placed.order.tolist():
        if i < 0:
            streams.append(StreamRegistry.CONTROL)
            pays.append(control.encode_watermark(next(marks)))
        else:
            streams.append(1)
            pays.append(payloads[i])
    return streams, pays, placed.late.tolist()


@pytest.mark.parametrize("query", [
    "SELECT device, window.start, window.end, count(*) AS n, avg(temp) AS t, min(battery) AS low "
    "FROM r GROUP BY window(at, '200 milliseconds', '50 milliseconds'), device",
    "SELECT window.start AS ws, site, max(temp) AS hi, sum(battery) AS total FROM r WHERE temp > 0 "
    "GROUP BY window(at, '100 milliseconds'), site HAVING count(*) > 2",
])
def test_the_operator_over_nus_link_order_equals_the_truth(query):
    p = plan(query, {"r": SENSOR})
    payloads = draw_records(SENSOR, 3000, seed=5, iso_times=True)
    streams, pays, late = link_order(p, payloads, every=64)
    assert late  # the draw steps back now and then, past the delay
    op = SqlWindow(p)
    got = []
    for lo in range(0, len(pays), 97):
        b = TupleBatch(lo + 1, streams[lo:lo + 97], range(lo + 1, lo + 1 + len(pays[lo:lo + 97])), pays[lo:lo + 97])
        got.extend(op.process(b).payloads.to_pylist())
    expected, late_truth = window_truth(p, payloads, every=64, streams=["r"] * len(payloads), known=("r",))
    assert late_truth == late
    assert len(got) == len(expected) > 10
    assert all(same_values(values_of(a), values_of(b)) for a, b in zip(got, expected, strict=True))


def test_a_selections_truth_is_given_per_input():
    p = plan("SELECT device, temp * 2 AS t2 FROM r WHERE temp > 10", {"r": SENSOR})
    payloads = draw_records(SENSOR, 500, seed=6)
    per_input = selection_truth(p, payloads)
    out = SqlSelect(p).process(TupleBatch(1, [1] * 500, range(1, 501), payloads))
    assert [i for i, r in enumerate(per_input) if r is not None] == out.at.tolist()
    assert all(same_values(values_of(per_input[i]), values_of(t))
               for i, t in zip(out.at.tolist(), out.payloads.to_pylist(), strict=True))
