"""The SQL operators against DuckDB's truth over the same records, and cut into calls at random."""

import random

import pyarrow as pa
import pytest

from lazystandby.core.seq import StreamRegistry
from lazystandby.core.tuples import TupleBatch
from lazystandby.formats import control
from lazystandby.formats.by_name import record_format
from lazystandby.formats.schema import parse_table
from lazystandby.formats.sql import plan
from lazystandby.harness.truth import same_values, truth, values_of
from lazystandby.operators.sql import SqlSelect, SqlWindow, json_texts

BID = parse_table("""CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
  date_time TIMESTAMP(3), extra VARCHAR, WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH ('topic' = 'bid', 'format' = 'json')""")
SENSOR = parse_table("""CREATE TABLE r (device VARCHAR NOT NULL, temp DOUBLE, battery DECIMAL(5, 2), ok BOOLEAN,
  at TIMESTAMP(3) NOT NULL, WATERMARK FOR at AS at) WITH ('format' = 'avro')""")


def bids(n=400, seed=1):
    rnd = random.Random(seed)
    rows = [dict(auction=rnd.randrange(1000, 1060), bidder=rnd.randrange(5), price=rnd.randrange(1, 10_000),
                 channel=rnd.choice(["a", 'b"q\\', None, "é"]), url=f"http://x/{i}", date_time=40 * i,
                 extra="") for i in range(n)]
    return record_format(BID).encode(rows)


def readings(n=300, seed=2):
    rnd = random.Random(seed)
    rows = [dict(device=rnd.choice("abc"), temp=rnd.choice([None, rnd.uniform(-20, 40)]),
                 battery=rnd.choice([None, round(__import__("decimal").Decimal(rnd.randrange(0, 10000)) / 100, 2)]),
                 ok=rnd.choice([True, False, None]), at=250 * i) for i in range(n)]
    return record_format(SENSOR).encode(rows)


def run_cut(op, payloads, seed=3, final=True):
    """Every record through `op` in calls cut at random, a watermark record after every 50 and at the end."""
    rnd = random.Random(seed)
    items = []
    for i, p in enumerate(payloads):
        items.append((1, p))
        if i % 50 == 49:
            items.append((StreamRegistry.CONTROL, None))
    items.append((StreamRegistry.CONTROL, None))
    out, pos, ts_seen = [], 1, 0
    decoded = record_format(op.plan.schema).decode(pa.array(payloads, pa.binary())).table
    times = decoded.column(op.plan.time).cast(pa.int64()).to_pylist() if op.plan.stateful else []
    k = 0
    while k < len(items):
        m = rnd.randint(1, 120)
        chunk = items[k:k + m]
        streams, pays = [], []
        for s, p in chunk:
            if s == StreamRegistry.CONTROL:
                last = k + len(pays) == len(items) - 1 and final
                wm = 10 ** 12 if last else max(times[:sum(1 for s2, _ in items[:k + len(pays)] if s2 == 1)] or [0])
                p = control.encode_watermark(max(wm, ts_seen))
                ts_seen = max(wm, ts_seen)
            streams.append(s)
            pays.append(p)
        res = op.process(TupleBatch(pos, streams, range(pos, pos + len(chunk)), pays))
        out.extend(res.payloads.to_pylist())
        pos += len(chunk)
        k += len(chunk)
    return out


def assert_same(mine, expected):
    assert len(mine) == len(expected)
    for a, b in zip(mine, expected, strict=True):
        assert same_values(values_of(a), values_of(b)), (a, b)


@pytest.mark.parametrize("query", [
    "SELECT * FROM bid",
    "SELECT auction, 0.908 * price AS price, upper(channel) AS ch, length(url) AS n FROM bid WHERE MOD(auction, 7) = 0",
    "SELECT auction, price / 3 AS p, CASE WHEN price > 5000 THEN 'hi' WHEN price > 100 THEN 'mid' END AS lvl, "
    "CAST(price AS DOUBLE) * 1.5 AS d, price % 7 AS m, concat(url, '#') AS u FROM bid "
    "WHERE channel IS NULL OR (price BETWEEN 10 AND 5000 AND auction IN (1001, 1002, 1003))",
    "SELECT substring(url, 3, 4) AS s, -price AS neg, abs(price - 5000) AS dist, coalesce(channel, 'none') AS c "
    "FROM bid WHERE NOT channel LIKE 'a%'",
])
def test_a_selection_equals_duckdbs_truth(query):
    p = plan(query, {"bid": BID})
    payloads = bids()
    assert_same(run_cut(SqlSelect(p), payloads), truth(p, payloads))


@pytest.mark.parametrize("query", [
    "SELECT auction, window.start, window.end, count(*) AS num FROM bid "
    "GROUP BY window(date_time, '1 seconds', '200 milliseconds'), auction",
    "SELECT window.start AS ws, window.end AS we, max(price) AS maxprice, min(channel) AS first_channel, "
    "sum(price) AS total, avg(price) AS mean, count(channel) AS named FROM bid WHERE price > 100 "
    "GROUP BY window(date_time, '2 seconds') HAVING count(*) >= 3",
    # Nexmark q5 whole: per sliding window, the auctions with the most bids (ties all kept).
    "SELECT auction, window.start AS starttime, count(*) AS num FROM bid "
    "GROUP BY window(date_time, '2 seconds', '400 milliseconds'), auction "
    "QUALIFY rank() OVER (PARTITION BY window.start ORDER BY num DESC) <= 1",
    # The top 2 bidders per auction by their highest price, ranked densely, after HAVING.
    "SELECT auction, bidder, window.end, max(price) AS hi FROM bid GROUP BY window(date_time, '1 second'), auction, "
    "bidder HAVING count(*) > 0 QUALIFY dense_rank() OVER (PARTITION BY window.end, auction ORDER BY hi DESC) < 3",
    # Ascending, NULLs first (Spark's default): the channels of the fewest bids, a NULL among them.
    "SELECT channel, window.start, count(*) AS n FROM bid GROUP BY window(date_time, '2 seconds'), channel "
    "QUALIFY 2 >= rank() OVER (PARTITION BY window.start ORDER BY min(channel), count(*))",
])
def test_a_window_aggregation_equals_duckdbs_truth_however_its_calls_are_cut(query):
    p = plan(query, {"bid": BID})
    payloads = bids()
    expected = truth(p, payloads)
    assert expected
    for seed in (3, 4):
        assert_same(run_cut(SqlWindow(p), payloads, seed=seed), expected)


def test_the_sensor_window_over_avro_with_nulls_and_a_decimal_equals_duckdbs_truth():
    p = plan("SELECT device, window.start, count(*) AS n, avg(temp) AS t, max(temp) AS hi, min(battery) AS low, "
             "sum(battery) AS total FROM r WHERE battery IS NOT NULL GROUP BY window(at, '5 seconds'), device",
             {"r": SENSOR})
    payloads = readings()
    assert_same(run_cut(SqlWindow(p), payloads), truth(p, payloads))


def test_results_are_json_objects_anyone_can_read():
    texts = json_texts(["s", "n", "t", "b", "x"], [pa.array(['a"\\\n', None]), pa.array([1, 2]),
                                                    pa.array([1500, 0], pa.timestamp("ms")), pa.array([True, None]),
                                                    pa.array([float("inf"), 0.5])])
    import json
    assert [json.loads(t) for t in texts.to_pylist()] == [
        {"s": 'a"\\\n', "n": 1, "t": "1970-01-01T00:00:01.500Z", "b": True, "x": None},
        {"s": None, "n": 2, "t": "1970-01-01T00:00:00.000Z", "b": None, "x": 0.5}]


def test_a_record_that_does_not_decode_is_counted_not_selected():
    op = SqlSelect(plan("SELECT auction FROM bid", {"bid": BID}))
    out = op.process(TupleBatch(1, [1, 1], [1, 2], [b'{"auction": 5}', b'{"auction": "x"}']))
    assert out.payloads.to_pylist() == [b'{"auction":5}'] and op.unparseable == 1
