"""A window query's feed without Spark: micro-batches cut only just past watermark records, and the
offset below which every record's windows are out, from the commits of micro-batches that read."""

import pyarrow as pa
import pytest
from lazystandby_spark.feed import WindowFeed

from lazystandby.v1 import lazystandby_pb2 as pb

from .test_feed import Context


def rows(n):
    return pa.array([b"t"] * n, pa.binary())


def latest(feed, after):
    return feed.Latest(pb.LatestRequest(after=after, wait_ms=0), Context()).end


def fetch(feed, start, end):
    feed.Fetch(pb.FetchRequest(start=start, end=end), Context())


def commit(feed, table=None):
    feed.commit(table if table is not None else pa.table({"_window": pa.array([], pa.int64())}))


def test_micro_batches_end_only_just_past_a_record_and_within_max_rows_where_one_allows():
    feed = WindowFeed(max_rows=10)
    feed.append_cut(rows(5), [])
    assert latest(feed, 0) == 0  # no record yet: nothing may be read
    feed.append_cut(rows(20), [2, 8, 17])  # records at offsets 7, 13 and 22
    assert latest(feed, 0) == 8  # the last bound within 10 rows (14 is past it)
    assert latest(feed, 8) == 14
    assert latest(feed, 14) == 23  # no bound within 10 rows of 14: the first one past it
    assert latest(feed, 23) == 23  # the ticks after the last record wait


def test_windows_are_out_once_the_micro_batch_that_read_their_record_commits():
    feed = WindowFeed(max_rows=100)
    feed.append_cut(rows(10), [4, 9])  # bounds 5 and 10
    first, second = feed.until(5), feed.until(10)
    assert latest(feed, 0) == 10
    commit(feed)  # a micro-batch that read nothing (Spark evicting): nothing is out by it
    assert not first.done() and feed.closed_through == 0
    fetch(feed, 0, 10)
    assert not first.done(), "read, not yet committed"
    commit(feed, pa.table({"_window": [1000]}))  # the groups 0..10 changed, with all of 0..10 in them
    assert first.done() and second.done() and feed.closed_through == 10
    assert [t.num_rows for t in feed.drain()] == [1] and feed.drain() == []
    assert not feed.chunks, "what Spark read and committed is dropped from the feed"

    feed.append_cut(rows(5), [4])  # bound 15
    third = feed.until(15)
    assert latest(feed, 10) == 15
    assert latest(feed, 15) == 15 and latest(feed, 15) == 15
    assert not third.done(), "polls that find nothing put nothing out"
    fetch(feed, 10, 15)
    commit(feed)
    assert third.done()


def test_a_failed_query_fails_the_waiters_and_a_restart_drops_what_was_not_offered():
    feed = WindowFeed(max_rows=100)
    feed.append_cut(rows(4), [1])
    waiting = feed.until(2)
    feed.fail(RuntimeError("query died"))
    with pytest.raises(RuntimeError, match="query died"):
        waiting.result(timeout=1)
    feed.restart_at_end()
    assert feed.query_start == feed.end == 4 and feed.closed_through == 4
    assert latest(feed, 4) == 4 and feed.until(4).done()
