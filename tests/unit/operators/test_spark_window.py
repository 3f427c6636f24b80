"""The Spark window operator's results without Spark: update-mode rows in, each window once, final."""

import numpy as np
import pyarrow as pa
from lazystandby_spark.feed import WindowFeed

from lazystandby.core.windows import WindowSpec
from lazystandby.formats.query import parse_query
from lazystandby.operators.spark_window import SparkWindow


def operator(floor=None):
    q = parse_query("SELECT symbol, count(*) FROM ticks GROUP BY window(ts, '1 second'), symbol")
    op = object.__new__(SparkWindow)  # no Spark session: what comes back from the commits is under test
    op.window, op.spec = q, WindowSpec(q.size_ms, q.slide_ms, q.lateness_ms)
    op._floor, op._open, op.results = floor, {}, 0
    op.feed = WindowFeed(max_rows=10)
    return op


def commits(op, *tables):
    for t in tables:
        op.feed.rows.append(pa.table(t))


def test_a_window_comes_out_once_final_with_each_groups_newest_row():
    op = operator()
    commits(op, {"_window": [0, 0, 1000], "symbol": ["A", "B", "A"], "_n": [1, 2, 1]},
            {"_window": [0, 1000], "symbol": ["A", "A"], "_n": [3, 2]})  # A's window 0 changed again
    out = op._collect(np.array([10, 20]), np.array([500, 1000]))  # records at 10 and 20; 1000 closes window 0
    assert out.payloads.to_pylist() == [b"0,1000,A,3", b"0,1000,B,2"] and out.at.tolist() == [20, 20]
    assert list(op._open) == [1000], "window 1000 stays open"
    commits(op, {"_window": [1000, 2000], "symbol": ["B", "A"], "_n": [1, 1]})
    out = op._collect(np.array([30]), np.array([2000]))
    assert out.payloads.to_pylist() == [b"1000,2000,A,2", b"1000,2000,B,1"] and out.at.tolist() == [30, 30]
    assert list(op._open) == [2000]


def test_windows_final_at_a_restored_watermark_are_not_given_again_nor_kept():
    op = operator(floor=1000)
    commits(op, {"_window": [0, 1000], "symbol": ["A", "A"], "_n": [1, 1]})
    out = op._collect(np.array([5]), np.array([2000]))
    assert out.payloads.to_pylist() == [b"1000,2000,A,1"] and not op._open
