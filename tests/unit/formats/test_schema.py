import re

import pytest

from lazystandby.core.errors import SchemaError
from lazystandby.formats.schema import parse_table

BID = """CREATE TABLE bid (auction BIGINT, bidder BIGINT NOT NULL, price DECIMAL(10, 2), channel VARCHAR(8),
  ok BOOLEAN, n INT, t DOUBLE, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND) WITH ('topic' = 'bids', 'format' = 'json')"""


def test_a_table_declares_columns_types_event_time_and_options():
    s = parse_table(BID)
    assert s.table == "bid" and s.topic == "bids" and s.format == "json"
    assert s.names == ["auction", "bidder", "price", "channel", "ok", "n", "t", "date_time"]
    assert [c.type.text() for c in s.columns] == ["BIGINT", "BIGINT", "DECIMAL(10, 2)", "VARCHAR(8)", "BOOLEAN",
                                                  "INT", "DOUBLE", "TIMESTAMP(3)"]
    assert not s.column("bidder").nullable and s.column("auction").nullable
    assert (s.event_time, s.watermark_delay_ms) == ("date_time", 4000)


def test_the_normalised_statement_reads_back_equal():
    s = parse_table(BID)
    assert parse_table(s.ddl()) == s


@pytest.mark.parametrize("ddl, says", [
    ("CREATE TABLE t (a BIGINT", "does not parse"),
    ("CREATE TABLE t (a ARRAY<INT>)", "not one of"),
    ("CREATE TABLE t (a BIGINT, a INT)", "twice"),
    ("CREATE TABLE t (a DECIMAL(40, 2))", "precision 1-38"),
    ("CREATE TABLE t (a TIMESTAMP(6))", "only TIMESTAMP(3)"),
    ("CREATE TABLE t (a BIGINT, WATERMARK FOR b AS b)", "no such column"),
    ("CREATE TABLE t (a VARCHAR, WATERMARK FOR a AS a)", "TIMESTAMP(3) or a BIGINT"),
    ("CREATE TABLE t (a BIGINT) WITH ('format' = 'xml')", "format 'xml'"),
    ("CREATE VIEW v AS SELECT 1", "expected CREATE TABLE"),
    ("CREATE TABLE t (a BIGINT PRIMARY KEY)", "not supported"),
])
def test_a_declaration_the_engine_cannot_read_is_refused_with_its_reason(ddl, says):
    with pytest.raises(SchemaError, match=re.escape(says)):
        parse_table(ddl)
