"""The Spark SQL a plan is written as (no Spark needed: the text itself)."""

from lazystandby_spark.sql import columns, event_ms, exact, record, sql

from lazystandby.formats.schema import parse_table
from lazystandby.formats.sql import plan

T = parse_table("""CREATE TABLE t (a BIGINT, d DECIMAL(5, 2), s VARCHAR, at TIMESTAMP(3),
  WATERMARK FOR at AS at) WITH ('format' = 'csv')""")


def test_records_are_read_as_text_and_cast_by_type():
    assert record(T) == "from_csv(payload, '`a` STRING, `d` STRING, `s` STRING, `at` STRING', map('escape', '\"'))"
    cols = columns(T, {"a", "d", "s", "at"})
    assert cols[0] == "CAST(_r.`a` AS BIGINT) AS `a`" and cols[1] == "CAST(_r.`d` AS DECIMAL(5,2)) AS `d`"
    assert cols[2] == "_r.`s` AS `s`" and "timestamp_millis(CAST(_r.`at` AS BIGINT))" in cols[3]


def test_division_and_mod_give_null_for_a_zero_divisor_as_the_python_operator_does():
    p = plan("SELECT a / 2 AS h, MOD(a, 3) AS m FROM t", {"t": T})
    assert sql(p.outputs[0].expr).startswith("TRY_DIVIDE(") and sql(p.outputs[1].expr).startswith("TRY_MOD(")


def test_event_time_and_exact_types():
    p = plan("SELECT count(*) FROM t GROUP BY window(at, '1 second')", {"t": T})
    assert event_ms(p) == "unix_millis(`at`)"
    assert exact(T.column("a").type) == "DECIMAL(38,0)" and exact(T.column("d").type) == "DECIMAL(38,2)"
