"""The tick schema: Spark's parse columns come from it."""



def test_spark_parse_columns_come_from_the_tick_schema():
    from lazystandby.formats.ticks import FIELDS, spark_columns

    cols = spark_columns("payload")
    assert [c.rsplit(" AS ", 1)[1] for c in cols] == [name for name, _ in FIELDS]
    assert cols[1] == "try_cast(split(payload, ',')[1] AS DOUBLE) AS price"
    assert cols[0] == "split(payload, ',')[0] AS symbol"


def test_each_field_admits_exactly_what_its_type_holds():
    import pyarrow as pa
    import pytest

    from lazystandby.core.errors import MalformedRecord
    from lazystandby.formats.ticks import parse_columns, valid_mask, validate

    good = [b"ACME,123456789.123456,999999999999999999,999999999999999,XNYS",
            b"ACME,-1,-999999999999999999,0,XNYS", b"S" * 32 + b",1.5,1,1," + b"V" * 32]
    bad = {b"ACME,1.5,99999999999999999999999,1,XNYS": "volume",  # int64 overflow
           b"ACME,1.5,1000000000000000000,1,XNYS": "volume",  # 19 digits
           b"ACME,1234567890.5,1,1,XNYS": "price",  # 16 significant digits
           b"ACME,1.1234567,1,1,XNYS": "price",
           b"ACME,1.5,1,-5,XNYS": "ts",  # before 1970
           b"ACME,1.5,1,1000000000000000,XNYS": "ts",  # 16 digits
           b"S" * 33 + b",1.5,1,1,XNYS": "symbol",
           b"ACME,1.5,1,1," + b"V" * 33: "venue"}
    for p in good:
        validate(p, max_bytes=1000)
    cols = parse_columns(pa.array(good, pa.binary()), {"price", "volume", "ts"})[1]
    assert cols["volume"].to_pylist()[:2] == [999999999999999999, -999999999999999999]
    assert cols["price"].to_pylist()[0] == 123456789.123456  # read back exactly as written
    for p, field in bad.items():
        with pytest.raises(MalformedRecord, match=f"field {field}=") as e:
            validate(p, max_bytes=1000)
        assert "'.'" not in str(e.value) or field == "price"  # an integer's refusal names no decimal point
    mask = valid_mask(pa.array(good + list(bad), pa.binary()), max_bytes=1000)
    assert mask is not None and mask.tolist() == [True] * len(good) + [False] * len(bad)
    # A batch that did not come through admission: the out-of-range values are nulls, never a failed cast.
    ok, cols = parse_columns(pa.array(list(bad), pa.binary()), {"volume"}, admitted=True)
    assert ok is not None and not ok.to_pylist().count(True) and cols["volume"].null_count == len(bad)


def test_an_integer_refusal_says_what_an_integer_may_hold():
    import pytest

    from lazystandby.core.errors import MalformedRecord
    from lazystandby.formats.ticks import validate

    with pytest.raises(MalformedRecord, match=r"volume='1\.5' is not an integer of at most 18 digits \(inside int64\)"):
        validate(b"ACME,5.0,1.5,1,XNYS", max_bytes=100)
