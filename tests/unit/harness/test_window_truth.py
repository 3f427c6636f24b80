"""The window truth table's exact arithmetic: prices in millionths, integer sums past int64 in Python
integers, both equal to the operator's decimal128 results."""

import random

from lazystandby.harness.check import _micro, window_expected
from tests.unit.operators.test_window import link_order, run


def test_decimal_texts_become_exact_millionths():
    assert [_micro(t) for t in ("0", "1", "-1.5", "-0.000001", "123456789.123456", "7.1")] == [
        0, 1_000_000, -1_500_000, -1, 123_456_789_123_456, 7_100_000]


def test_sums_beyond_int64_and_negative_prices_equal_the_operators():
    rng = random.Random(5)
    ticks, ts = [], 1_764_000_000_000
    for i in range(3_000):
        ts += rng.randint(0, 3)
        volume = rng.choice([999_999_999_999_999_999, -999_999_999_999_999_999, rng.randint(1, 10)])
        price = f"{rng.choice(['-', ''])}{rng.randint(0, 999_999_999)}.{rng.randint(0, 999_999):06d}"
        ticks.append(("I1", i + 1, f"K{i % 3},{price},{volume},{ts},X".encode()))
    query = ("SELECT symbol, count(*), sum(volume), avg(price), min(price), max(volume) FROM ticks "
             "GROUP BY window(ts, '1 second'), symbol")
    q, batch, _ = link_order(query, ticks, every=200)
    expected, _ = window_expected([p for _, _, p in ticks], q, every=200)
    _, got = run(q, batch, [])
    assert len(expected) > 10 and [p for _, p in got] == expected
    assert any(abs(int(p.split(b",")[4])) > 1 << 63 for p in expected)  # a sum past int64 was exact
