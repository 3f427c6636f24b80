"""The Spark feed without Spark: Arrow ranges out, selected offsets back, answers in order."""

import numpy as np
import pyarrow as pa
import pytest
from lazystandby_spark.feed import Feed, payloads_from

from lazystandby.v1 import lazystandby_pb2 as pb


class Aborted(Exception):
    pass


class Context:
    def abort(self, code, details):
        raise Aborted(code, details)


def emit(feed, ranges, selected):
    feed.Emit(pb.EmitRequest(range_starts=[s for s, _ in ranges], range_ends=[e for _, e in ranges],
                             selected=np.asarray(selected, "<i8").tobytes()), Context())


def test_a_range_across_appends_comes_back_as_the_same_strings():
    feed = Feed()
    feed.append(pa.array([b"a", b"bb"], pa.binary()))
    feed.append(pa.array([b"zz", b"ccc", b"", b"dd"], pa.binary()).slice(1, 2))  # a view into a larger array
    assert feed.end == 4
    reply = feed.Fetch(pb.FetchRequest(start=1, end=4), Context())
    assert payloads_from(reply).to_pylist() == ["bb", "ccc", ""]
    assert reply.data == b"bbccc", "only the range's bytes travel"


def test_fetch_outside_the_feed_is_refused():
    feed = Feed()
    feed.append(pa.array([b"a"], pa.binary()))
    with pytest.raises(Aborted):
        feed.Fetch(pb.FetchRequest(start=0, end=2), Context())


def test_answers_resolve_in_order_once_every_offset_below_is_answered():
    feed = Feed()
    first = feed.append(pa.array([b"x"] * 4, pa.binary()))
    a = feed.answer(first, first + 4)
    second = feed.append(pa.array([b"y"] * 3, pa.binary()))
    b = feed.answer(second, second + 3)
    emit(feed, [(4, 7)], [4, 6])  # the later range first: nothing is answered yet
    assert not a.done() and not b.done()
    emit(feed, [(0, 2), (2, 4)], [1, 3])
    assert a.result(0).tolist() == [1, 3] and b.result(0).tolist() == [0, 2]
    emit(feed, [(0, 2)], [0, 1])  # a retried task: ignored
    assert feed.done_through == 7 and not feed.chunks, "what Spark answered is dropped from the feed"


def test_a_dead_query_fails_every_waiting_answer():
    feed = Feed()
    fut = feed.answer(0, feed.append(pa.array([b"x"], pa.binary())) + 1)
    feed.fail(RuntimeError("query died"))
    with pytest.raises(RuntimeError, match="query died"):
        fut.result(0)


def test_invalid_utf8_reaches_spark_replaced_not_as_a_failure():
    feed = Feed()
    feed.append(pa.array([b"ok", b"\xff\xfe"], pa.binary()))
    assert payloads_from(feed.Fetch(pb.FetchRequest(start=0, end=2), Context())).to_pylist() == ["ok", "\ufffd\ufffd"]


def test_a_query_that_died_fails_the_wait_and_everything_waiting_in_the_feed():
    from types import SimpleNamespace

    from lazystandby.operators.spark import SparkSelection

    class DeadQuery:
        isActive = False

        def exception(self):
            return "py4j: the executor was lost"

    op = object.__new__(SparkSelection)  # no Spark session: only the failure path is under test
    op.feed, op.query, op.cfg = Feed(), DeadQuery(), SimpleNamespace(name="N")
    first = op._append(pa.array([b"x"] * 3, pa.binary()))
    later = op._append(pa.array([b"y"], pa.binary()))
    with pytest.raises(RuntimeError, match="executor was lost"):
        op._wait(first)
    with pytest.raises(RuntimeError, match="executor was lost"):
        later.result(0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def latest(feed, after=0, wait_ms=0):
    return feed.Latest(pb.LatestRequest(after=after, wait_ms=wait_ms), Context()).end


def test_a_primary_feed_offers_every_row_at_once():
    feed = Feed(clock=Clock())
    feed.append(pa.array([b"a"] * 3, pa.binary()))
    assert latest(feed) == 3


def test_a_held_feed_offers_rows_once_their_hold_ends_or_enough_wait():
    clock = Clock()
    feed = Feed(clock=clock)
    feed.pace(1.0, hold_rows=5)
    feed.append(pa.array([b"a"] * 3, pa.binary()))
    assert latest(feed) == 0, "three rows, held for a second"
    clock.now += 0.5
    feed.append(pa.array([b"b"] * 1, pa.binary()))
    assert latest(feed) == 0
    clock.now += 0.5  # the oldest row has waited its second: every row that waits goes
    assert latest(feed) == 4
    feed.append(pa.array([b"c"] * 4, pa.binary()))
    assert latest(feed, after=4) == 4, "the hold starts again with the next row"
    feed.append(pa.array([b"d"] * 1, pa.binary()))
    assert latest(feed, after=4) == 9, "five rows wait: enough for a micro-batch of their own"


def test_taking_the_hold_off_offers_what_waits_to_a_reader_waiting_in_latest():
    import threading
    import time

    feed = Feed()
    feed.pace(60.0, hold_rows=1000)
    feed.append(pa.array([b"a"] * 3, pa.binary()))
    got = []
    reader = threading.Thread(target=lambda: got.append(latest(feed, after=0, wait_ms=1000)))
    t0 = time.monotonic()
    reader.start()
    time.sleep(0.1)
    assert not got, "the reader waits: nothing is offered"
    feed.pace(0.0)  # a takeover began
    reader.join(2)
    assert got == [3] and time.monotonic() - t0 < 0.9


def test_a_long_poll_returns_when_a_row_arrives_or_its_wait_ends():
    import threading
    import time

    feed = Feed()
    t0 = time.monotonic()
    assert latest(feed, after=0, wait_ms=200) == 0
    assert time.monotonic() - t0 >= 0.19, "nothing came: the poll waited its 200 ms"
    threading.Timer(0.05, lambda: feed.append(pa.array([b"x"], pa.binary()))).start()
    t0 = time.monotonic()
    assert latest(feed, after=0, wait_ms=1000) == 1
    assert time.monotonic() - t0 < 0.5


def test_a_bad_pace_is_refused():
    with pytest.raises(ValueError):
        Feed().pace(-1.0)
    with pytest.raises(ValueError):
        Feed().pace(1.0, hold_rows=0)
