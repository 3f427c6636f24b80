"""The tick schema: Spark's parse columns come from it."""



def test_spark_parse_columns_come_from_the_tick_schema():
    from lazystandby.formats.ticks import FIELDS, spark_columns

    cols = spark_columns("payload")
    assert [c.rsplit(" AS ", 1)[1] for c in cols] == [name for name, _ in FIELDS]
    assert cols[1] == "try_cast(split(payload, ',')[1] AS DOUBLE) AS price"
    assert cols[0] == "split(payload, ',')[0] AS symbol"
