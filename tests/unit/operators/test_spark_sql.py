"""The Spark SQL operators' node side without Spark: the selection feed's answers, the sliding-window
rows' watermark prefix."""

from types import SimpleNamespace

import pyarrow as pa

from lazystandby.core.windows import WindowSpec
from lazystandby.operators.spark_sql import SparkSqlWindow, SqlFeed


def batch(rows):
    """A foreachBatch table: (off, rstart, marker, _o0)."""
    off, rstart, marker, out = zip(*rows, strict=True)
    return pa.table({"off": pa.array(off, pa.int64()), "rstart": pa.array(rstart, pa.int64()),
                     "marker": pa.array(marker), "_o0": pa.array(out, pa.string())})


def test_a_call_is_answered_with_its_selected_offsets_and_their_rows_once_its_ranges_are_done():
    feed = SqlFeed()
    first = feed.append(pa.array([b"a", b"b", b"c", b"d"], pa.binary()))
    a = feed.answer(first, first + 2)
    b = feed.answer(first + 2, first + 4)
    feed.commit(batch([(3, 2, False, "D"), (4, 2, True, None)]))  # the second range first
    assert not a.done() and not b.done()
    feed.commit(batch([(1, 0, False, "B"), (2, 0, True, None)]))
    offsets, rows = a.result()
    assert offsets.tolist() == [1] and rows.column("_o0").to_pylist() == ["B"]
    offsets, rows = b.result()
    assert offsets.tolist() == [1] and rows.column("_o0").to_pylist() == ["D"]


def test_a_range_committed_again_adds_nothing():
    feed = SqlFeed()
    feed.append(pa.array([b"a", b"b"], pa.binary()))
    feed.commit(batch([(0, 0, False, "A"), (2, 0, True, None)]))
    feed.commit(batch([(0, 0, False, "A"), (2, 0, True, None)]))  # a micro-batch run again
    offsets, rows = feed.answer(0, 2).result()
    assert offsets.tolist() == [0] and rows.num_rows == 1


def test_sliding_windows_rows_carry_the_watermark_in_force_and_records_stay_as_they_are():
    op = SimpleNamespace(spec=WindowSpec(10_000, 2_000))
    payloads = pa.array([b"r0", b"r1", b'{"watermark": 5}', b"r2", b'{"watermark": 9}', b"r3"], pa.binary())
    out = SparkSqlWindow._prepared(op, payloads, [2, 4], [5, 9], None)
    assert out.to_pylist() == [b"|r0", b"|r1", b'{"watermark": 5}', b"5|r2", b'{"watermark": 9}', b"9|r3"]
    out = SparkSqlWindow._prepared(op, payloads.slice(0, 2), [], [], 3)
    assert out.to_pylist() == [b"3|r0", b"3|r1"]


def test_tumbling_windows_rows_are_not_prefixed():
    op = SimpleNamespace(spec=WindowSpec(10_000, 10_000))
    payloads = pa.array([b"r0"], pa.binary())
    assert SparkSqlWindow._prepared(op, payloads, [], [], 4) is payloads


def test_avro_records_reach_spark_as_json_of_the_same_values():
    """Spark reads an Avro table's records as JSON text: every value as the table's own decoder reads it
    (a DECIMAL exactly, a TIMESTAMP in ms, a null as null); other formats pass as they are."""
    import json

    from lazystandby.formats.by_name import record_format
    from lazystandby.formats.schema import parse_table
    from lazystandby.operators.spark_sql import SparkText

    t = parse_table("CREATE TABLE r (device VARCHAR NOT NULL, temp DOUBLE, battery DECIMAL(5, 2), ok BOOLEAN, "
                    "at TIMESTAMP(3) NOT NULL) WITH ('format' = 'avro', 'avro.confluent' = 'true')")
    from decimal import Decimal

    rows = [{"device": "d1", "temp": 21.5, "battery": Decimal("3.07"), "ok": True, "at": 1764000000123},
            {"device": "d\u00e9", "temp": None, "battery": None, "ok": None, "at": 0}]
    avro = pa.array(record_format(t).encode(rows), pa.binary())
    got = [json.loads(v) for v in SparkText(t)(avro).to_pylist()]
    assert got == [{"device": "d1", "temp": 21.5, "battery": "3.07", "ok": True, "at": 1764000000123},
                   {"device": "d\u00e9", "temp": None, "battery": None, "ok": None, "at": 0}]
    csv = parse_table("CREATE TABLE c (a BIGINT) WITH ('format' = 'csv')")
    same = pa.array([b"1", b"2"], pa.binary())
    assert SparkText(csv)(same) is same


def test_an_avro_record_that_does_not_decode_fails_the_call_with_its_reason():
    import pytest

    from lazystandby.formats.schema import parse_table
    from lazystandby.operators.spark_sql import SparkText

    t = parse_table("CREATE TABLE r (a BIGINT NOT NULL, b VARCHAR NOT NULL) WITH ('format' = 'avro')")
    with pytest.raises(ValueError, match="record 0 of the call does not decode as r's Avro: .*truncated"):
        SparkText(t)(pa.array([b"\x02"], pa.binary()))
