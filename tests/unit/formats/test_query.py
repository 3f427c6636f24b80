"""The tick query in SQL: read and written back, the tick operators' shape checked, and every query they
cannot compute refused with the reason."""

import pytest

from lazystandby.core.errors import QueryError
from lazystandby.formats.query import EXAMPLES, Aggregate, Query, parse_query

W = "GROUP BY window(ts, '1 second'), symbol"


def test_the_named_examples_are_the_selection_and_a_one_second_window_by_symbol():
    assert parse_query("select") == Query("select", where="price > 100")
    w = parse_query("window")
    assert w == Query("window", where="price > 100", keys=("symbol",), size_ms=1000, slide_ms=1000,
                      aggregates=(Aggregate("count"), Aggregate("avg", "price"), Aggregate("max", "price")))
    assert w.stateful and not parse_query("select").stateful
    assert [a.name for a in w.aggregates] == ["count", "avg_price", "max_price"]


@pytest.mark.parametrize("text", [
    *EXAMPLES.values(), "select", "SELECT * FROM ticks",
    "SELECT symbol, venue, sum(volume), min(price) FROM ticks "
    "GROUP BY window(ts, '500 milliseconds', '250 milliseconds'), symbol, venue",
    "select venue, COUNT(*) from ticks where venue = 'XNYS' AND volume >= 1000 group by window(ts, '2 minutes'), venue",
])
def test_a_query_reads_back_from_its_own_text(text):
    q = parse_query(text)
    assert parse_query(q.text()) == q


def test_the_lateness_is_the_tick_tables_watermark_delay():
    q = parse_query(f"SELECT symbol, count(*) FROM ticks {W}", lateness_ms=300)
    assert q.lateness_ms == 300 and parse_query(q.text(), 300) == q


@pytest.mark.parametrize("text, why", [
    ("aggregate 1s", "does not parse|is not a SELECT"),
    ("window 1s by symbol agg count", "does not parse|is not a SELECT"),
    ("SELECT symbol FROM ticks", "outputs whole ticks"),
    ("SELECT *, price * 2 FROM ticks", "outputs whole ticks"),
    ("SELECT * FROM trades", "no such table"),
    ("SELECT symbol, count(*) FROM ticks GROUP BY symbol", "exactly one window"),
    ("SELECT symbol, count(*) FROM ticks GROUP BY window(ts, '0 seconds'), symbol", "window duration"),
    ("SELECT symbol, count(*) FROM ticks GROUP BY window(ts, '1.5 seconds'), symbol", "window duration"),
    ("SELECT symbol, count(*) FROM ticks GROUP BY window(ts, '1 second', '300 milliseconds'), symbol", "divide"),
    ("SELECT symbol, count(*) FROM ticks GROUP BY window(ts, '1 second', '2 seconds'), symbol", "divide"),
    ("SELECT count(*) FROM ticks GROUP BY window(ts, '1 second')", "at least one key"),
    ("SELECT ts, count(*) FROM ticks GROUP BY window(ts, '1 second'), ts", "key 'ts' is not a field"),
    ("SELECT colour, count(*) FROM ticks GROUP BY window(ts, '1 second'), colour", "colour"),
    ("SELECT symbol, count(*) FROM ticks GROUP BY window(ts, '1 second'), symbol, symbol", "named twice"),
    (f"SELECT symbol, avg(symbol) FROM ticks {W}", "avg"),
    (f"SELECT symbol, median(price) FROM ticks {W}", "median|not supported"),
    (f"SELECT symbol, count(*), count(*) FROM ticks {W}", "names .* twice"),
    (f"SELECT symbol, count(*) AS a, count(*) AS b FROM ticks {W}", "an aggregate is named twice"),
    (f"SELECT symbol, count(*) FROM ticks {W} HAVING count(*) > 2", "HAVING runs in a pipeline file"),
    (f"SELECT symbol, count(*) * 2 AS twice FROM ticks {W}", "selects its keys .*, then its"),
    (f"SELECT symbol, count(*) FROM ticks WHERE price > {W}", "does not parse"),
])
def test_a_query_that_declares_nothing_runnable_is_refused_with_the_reason(text, why):
    with pytest.raises(QueryError, match=why):
        parse_query(text)


@pytest.mark.parametrize("items, why", [("count(*), symbol", "then its aggregates"),
                                        ("venue, symbol, count(*)", "then its aggregates"),
                                        ("symbol", "at least one aggregate")])
def test_a_window_selects_its_keys_then_its_aggregates(items, why):
    with pytest.raises(QueryError, match=why):
        parse_query(f"SELECT {items} FROM ticks GROUP BY window(ts, '1 second'), symbol, venue"
                    if "venue" in items else f"SELECT {items} FROM ticks {W}")
