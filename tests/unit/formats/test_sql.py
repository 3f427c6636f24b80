import pytest

from lazystandby.core.errors import UnsupportedSql
from lazystandby.formats.schema import parse_table
from lazystandby.formats.sql import plan

BID = parse_table("""CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
  date_time TIMESTAMP(3), extra VARCHAR, WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH ('topic' = 'bid', 'format' = 'json')""")
TABLES = {"bid": BID}


def test_a_selection_plans_its_outputs_with_their_types():
    p = plan("SELECT auction, 0.908 * price AS price, upper(channel) AS ch FROM bid WHERE MOD(auction, 123) = 0",
             TABLES)
    assert not p.stateful and p.names == ["auction", "price", "ch"]
    assert [o.type.text() for o in p.outputs] == ["BIGINT", "DECIMAL(23, 3)", "VARCHAR"]
    assert p.input_columns == {"auction", "price", "channel"}


def test_a_window_aggregation_plans_its_windows_keys_and_aggregates():
    p = plan("SELECT auction, window.start, window.end, count(*) AS num FROM bid "
             "GROUP BY window(date_time, '10 seconds', '2 seconds'), auction HAVING count(*) > 2", TABLES)
    assert p.stateful and (p.spec.size_ms, p.spec.slide_ms) == (10_000, 2_000)
    assert p.names == ["auction", "window_start", "window_end", "num"]
    assert p.key_names == ["auction", "window_start", "window_end"]
    assert [a.fn for a in p.aggregates] == ["count"] and p.having.sql() == "_agg0 > 2"


Q5 = "SELECT auction, count(*) AS num FROM bid GROUP BY window(date_time, '10 seconds', '2 seconds'), auction"

REFUSED = [
    ("SELECT nope FROM bid", "no such column"),
    ("SELECT * FROM bid b JOIN bid c ON b.auction = c.auction", "JOIN"),
    ("SELECT count(*) FROM bid", "needs GROUP BY window"),
    ("SELECT price FROM bid ORDER BY price", "ORDER BY"),
    ("SELECT price FROM bid LIMIT 3", "LIMIT"),
    ("SELECT DISTINCT price FROM bid", "DISTINCT"),
    ("SELECT auction FROM bid GROUP BY auction", "exactly one window"),
    ("SELECT price + 'x' FROM bid", "not a number"),
    ("SELECT foo(price) FROM bid", "FOO"),
    ("SELEC x", "is not a SELECT"),
    ("SELECT 1 FROM bid; SELECT 2 FROM bid", "one statement"),
    ("SELECT * FROM nope", "no such table"),
    ("SELECT price FROM bid WHERE price", "not a condition"),
    ("SELECT sum(channel) FROM bid GROUP BY window(date_time, '1 second')", "needs a number"),
    ("SELECT price FROM bid GROUP BY window(date_time, '1 second')", "neither grouped nor aggregated"),
    ("SELECT count(*) FROM bid GROUP BY window(date_time, '3 seconds', '2 seconds')", "must divide"),
    ("SELECT count(*) FROM bid GROUP BY window(extra, '3 seconds')", "event time is date_time"),
    ("SELECT count(*) FROM bid GROUP BY window(date_time, 'soon')", "window duration"),
    ("SELECT row_number() OVER (ORDER BY price) FROM bid", "OVER"),
    ("SELECT * FROM bid UNION SELECT * FROM bid", "UNION"),
    ("SELECT price FROM (SELECT * FROM bid)", "subquery"),
    ("SELECT price, price FROM bid", "names 'price' twice"),
    ("INSERT INTO x SELECT * FROM bid", "is not a SELECT"),
    ("SELECT count(DISTINCT bidder) FROM bid GROUP BY window(date_time, '1 second')", "DISTINCT"),
    ("SELECT CAST(price AS ARRAY<INT>) FROM bid", "CAST to"),
    ("SELECT price FROM bid WHERE channel > 3", "cannot compare"),
    ("SELECT price FROM bid HAVING price > 3", "HAVING without GROUP BY"),
    ("SELECT price FROM bid WHERE price IN (SELECT 1)", "subquer"),
    ("SELECT * FROM bid GROUP BY window(date_time, '1 second')", "SELECT *"),
    ("SELECT price FROM bid QUALIFY rank() OVER (ORDER BY price) <= 1", "QUALIFY without GROUP BY"),
    (f"{Q5} QUALIFY row_number() OVER (PARTITION BY window.start ORDER BY num DESC) <= 1", "row_number()"),
    (f"{Q5} QUALIFY rank() OVER (PARTITION BY auction ORDER BY num DESC) <= 1", "PARTITION BY the window"),
    (f"{Q5} QUALIFY rank() OVER (PARTITION BY window.start, count(*) ORDER BY num) <= 1", "PARTITION BY the window"),
    (f"{Q5} QUALIFY rank() OVER (PARTITION BY window.start) <= 1", "needs ORDER BY"),
    (f"{Q5} QUALIFY rank() OVER (PARTITION BY window.start ORDER BY num DESC) = 2", "keeps no top n"),
    (f"{Q5} QUALIFY rank() OVER (PARTITION BY window.start ORDER BY num DESC) < 1", "at least 1"),
    (f"{Q5} QUALIFY rank() OVER (PARTITION BY window.start ORDER BY num DESC) <= 1.5", "whole number"),
    (f"{Q5} QUALIFY rank() OVER (PARTITION BY window.start ORDER BY num DESC) > 1", "QUALIFY takes"),
    (f"{Q5} QUALIFY num > 3", "QUALIFY takes"),
    (f"{Q5} QUALIFY rank() OVER (PARTITION BY window.start ORDER BY price) <= 1", "neither grouped"),
]


@pytest.mark.parametrize("text, says", REFUSED)
def test_a_query_the_engine_cannot_run_is_refused_in_one_line_that_names_it(text, says):
    with pytest.raises(UnsupportedSql) as e:
        plan(text, TABLES)
    assert says in str(e.value) and "\n" not in str(e.value)
