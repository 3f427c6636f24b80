"""The query declaration: one text form, read and written back, with errors that say what is wrong."""

import pytest

from lazystandby.core.errors import QueryError
from lazystandby.formats.query import EXAMPLES, Aggregate, Query, parse_query


def test_the_named_examples_are_the_selection_and_a_one_second_window_by_symbol():
    assert parse_query("select") == Query("select", where="price > 100")
    w = parse_query("window")
    assert w == Query("window", where="price > 100", keys=("symbol",), size_ms=1000, slide_ms=1000,
                      aggregates=(Aggregate("count"), Aggregate("avg", "price"), Aggregate("max", "price")))
    assert w.stateful and not parse_query("select").stateful
    assert [a.name for a in w.aggregates] == ["count", "avg_price", "max_price"]


@pytest.mark.parametrize("text", [*EXAMPLES.values(), "select",
                                  "window 500ms slide 250ms lateness 2s by symbol, venue agg sum(volume), min(price)",
                                  "window 2m by venue agg count where venue = 'XNYS' AND volume >= 1000"])
def test_a_query_reads_back_from_its_own_text(text):
    q = parse_query(text)
    assert parse_query(q.text()) == q


@pytest.mark.parametrize("text, why", [
    ("aggregate 1s", "starts with select or window"),
    ("select symbol", "a select takes only a where clause"),
    ("window 1s by symbol", "expected window <size>"),
    ("window 0s by symbol agg count", "above 0"),
    ("window 1.5s by symbol agg count", "not a whole number"),
    ("window 1s slide 300ms by symbol agg count", "must divide the size"),
    ("window 1s slide 2s by symbol agg count", "must divide the size"),
    ("window 1s by ts agg count", "key 'ts' is not a field to group by"),
    ("window 1s by colour agg count", "key 'colour'"),
    ("window 1s by symbol, symbol agg count", "a key is named twice"),
    ("window 1s by symbol agg avg(symbol)", "needs a numeric column"),
    ("window 1s by symbol agg median(price)", "is not count or one of"),
    ("window 1s by symbol agg count, count", "an aggregate is named twice"),
    ("window 1s by symbol agg count where price >", "ends too early"),
])
def test_a_query_that_declares_nothing_runnable_is_refused_with_the_reason(text, why):
    with pytest.raises(QueryError, match=why):
        parse_query(text)
