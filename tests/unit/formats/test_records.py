import decimal
import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazystandby.formats.by_name import record_format
from lazystandby.formats.schema import Column, Schema, SqlType, parse_table

DDL = """CREATE TABLE r (id BIGINT NOT NULL, n INT, x DOUBLE, d DECIMAL(6, 2), s VARCHAR(5), b BOOLEAN,
  t TIMESTAMP(3)) WITH ('format' = '{fmt}')"""


def fmt(name):
    return record_format(parse_table(DDL.format(fmt=name)))


def decode(f, payloads, **kw):
    return f.decode(pa.array(payloads, pa.binary()), **kw)


GOOD = {"id": 1, "n": 2, "x": 1.5, "d": decimal.Decimal("3.25"), "s": "ab", "b": True, "t": 1_700_000_000_123}

BAD_JSON = [
    (b'{"id": null}', "NOT NULL"),
    (b'{"n": 1}', "NOT NULL"),
    (b'{"id": "1"}', "takes an integer"),
    (b'{"id": 1.0}', "takes an integer"),
    (b'{"id": true}', "takes an integer"),
    (b'{"id": 9223372036854775808}', "holds"),
    (b'{"id": 1, "n": 2147483648}', "holds"),
    (b'{"id": 1, "x": NaN}', "finite"),
    (b'{"id": 1, "x": Infinity}', "finite"),
    (b'{"id": 1, "x": 1e400}', "range"),
    (b'{"id": 1, "x": "1.5"}', "takes a number"),
    (b'{"id": 1, "d": 1.234}', "at most 2 decimals"),
    (b'{"id": 1, "d": 12345.5}', "integer digits"),
    (b'{"id": 1, "d": "abc"}', "takes a number"),
    (b'{"id": 1, "s": 5}', "takes text"),
    (b'{"id": 1, "s": "toolong"}', "at most 5"),
    (b'{"id": 1, "b": 1}', "true or false"),
    (b'{"id": 1, "t": 1.5}', "ms since 1970"),
    (b'{"id": 1, "t": "yesterday"}', "ISO-8601"),
    (b'{"id": 1, "t": 253402300800000}', "outside years"),
    (b'{"id": 1, "id": 2}', "twice"),
    (b'[1, 2]', "not an object"),
    (b'{"id": 1', "not JSON"),
    (b'\xff\xfe{}', "not UTF-8"),
    (b'', "not JSON"),
]


@pytest.mark.parametrize("payload, says", BAD_JSON)
def test_a_malformed_json_record_is_refused_with_its_reason(payload, says):
    d = decode(fmt("json"), [json.dumps({"id": 7}).encode(), payload])
    assert list(d.bad) == [1] and says in d.bad[1]
    assert d.table.column("id").to_pylist() == [7, None]


def test_every_bad_record_of_a_poll_is_counted_and_the_good_ones_kept():
    payloads = [b'{"id": %d}' % i for i in range(5)] + [p for p, _ in BAD_JSON]
    d = decode(fmt("json"), payloads)
    assert len(d.bad) == len(BAD_JSON) and set(d.bad) == set(range(5, 5 + len(BAD_JSON)))
    assert d.table.column("id").to_pylist()[:5] == list(range(5))


@pytest.mark.parametrize("payloads", [
    [b"  ", b'{"id": 1} {"id": 2}'],  # a blank record beside one of two objects: as many objects as records
    [b'{"id": 1, "x":', b'{"id": 2}}', b'{"id": 3} {"id": 4}'],  # one object over two records, two in one
    [b'{"id": 1}\n{"id": 2}', b'{"id": 3}}'],
])
def test_records_that_do_not_each_hold_one_object_are_refused_not_shifted(payloads):
    d = decode(fmt("json"), payloads)
    assert set(d.bad) == set(range(len(payloads)))


def test_a_record_with_newlines_between_its_tokens_reads_as_json_reads_it():
    d = decode(fmt("json"), [b'{"id":\n 5,\n "s": "a"}', b'{"id": 6}'])
    assert not d.bad and d.table.column("id").to_pylist() == [5, 6]
    assert d.table.column("s").to_pylist() == ["a", None]


def test_a_record_over_the_size_limit_is_refused():
    big = json.dumps({"id": 1, "pad": "x" * (5 << 20)}).encode()
    d = decode(fmt("json"), [big, b'{"id": 2}'], max_bytes=65536)
    assert "exceeds the 65536-byte limit" in d.bad[0] and 1 not in d.bad


@pytest.mark.parametrize("payload, says", [
    (b"1,2", "fields; expected 7"),
    (b"x,,,,,,", "takes an integer"),
    (b"1,,nan,,,,", "takes a number"),
    (b"1,,,1.234,,,", "at most 2 decimals"),
    (b"1,,,,,yes,", "true or false"),
    (b",,,,,,", "NOT NULL"),
    (b'1,,,,"unclosed,,', "not CSV"),
    (b"1,,,,\xff,,", "not UTF-8"),
    (b"1,,,,,,soon", "ISO-8601"),
    (b"1,,,,a\nb,,", "line break"),
])
def test_a_malformed_csv_record_is_refused_with_its_reason(payload, says):
    d = decode(fmt("csv"), [b"7,,,,,,", payload])
    assert list(d.bad) == [1] and says in d.bad[1]


def test_avro_records_round_trip_and_bad_ones_are_refused():
    f = fmt("avro")
    good = f.encode([GOOD])[0]
    d = decode(f, [good, good[:-3], good + b"\x00", b"", b"\x02\x80"])
    assert d.table.slice(0, 1).to_pylist()[0]["d"] == decimal.Decimal("3.25")
    assert d.table.column("t").cast(pa.int64()).to_pylist()[0] == GOOD["t"]
    assert "truncated" in d.bad[1] and "after its last field" in d.bad[2] and "truncated" in d.bad[3]
    assert set(d.bad) == {1, 2, 3, 4}


def test_avro_with_the_confluent_header():
    s = parse_table(DDL.format(fmt="avro").replace("'avro')", "'avro', 'avro.confluent' = 'true')"))
    f = record_format(s)
    rec = f.encode([GOOD])[0]
    assert rec[:1] == b"\x00" and len(rec) > 5
    d = decode(f, [rec, rec[5:]])
    assert d.table.slice(0, 1).to_pylist()[0]["id"] is not None and "Confluent header" in d.bad[1]


@pytest.mark.parametrize("name", ["json", "csv", "avro"])
def test_every_format_reads_back_what_it_writes(name):
    f = fmt(name)
    rows = [GOOD, {**GOOD, "n": None, "x": None, "d": None, "s": None, "b": None, "t": None}]
    d = decode(f, f.encode(rows))
    assert not d.bad
    got = d.table.to_pylist()
    assert got[0]["d"] == GOOD["d"] and got[0]["x"] == 1.5 and got[1]["n"] is None


def test_iso_timestamps_are_read_in_utc_to_the_millisecond():
    d = decode(fmt("json"), [b'{"id":1,"t":"1970-01-01T00:00:01.5Z"}', b'{"id":1,"t":"1970-01-01T01:00:00+01:00"}',
                             b'{"id":1,"t":"1970-01-01 00:00:00.0019"}'])
    assert d.table.column("t").cast(pa.int64()).to_pylist() == [1500, 0, 1]


# --- the property: a valid record is admitted with its values, an invalid one refused, never a crash --
KINDS = st.sampled_from(["BIGINT", "INT", "DOUBLE", "DECIMAL", "VARCHAR", "BOOLEAN", "TIMESTAMP"])


@st.composite
def schemas(draw):
    n = draw(st.integers(1, 5))
    cols = []
    for i in range(n):
        kind = draw(KINDS)
        typ = SqlType("DECIMAL", draw(st.integers(1, 18)), 0) if kind == "DECIMAL" else SqlType(kind)
        if kind == "DECIMAL":
            typ = SqlType("DECIMAL", typ.precision, draw(st.integers(0, typ.precision)))
        cols.append(Column(f"c{i}", typ, draw(st.booleans())))
    return Schema("t", tuple(cols), options=(("format", draw(st.sampled_from(["json", "csv"]))),))


JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 64), 1 << 64), st.floats(allow_nan=True),
                        st.text(max_size=8), st.sampled_from(["1.5", "2026-01-01T00:00:00Z", "12", "-0.01"]))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(schemas(), st.lists(st.dictionaries(st.sampled_from([f"c{i}" for i in range(5)]), JSON_VALUES), min_size=1,
                           max_size=6))
def test_decoding_generated_records_admits_the_valid_and_refuses_the_rest(schema, objs):
    f = record_format(schema)
    if schema.format == "json":
        payloads = [json.dumps(o).encode() for o in objs]
    else:
        payloads = [",".join("" if o.get(n) is None else str(o.get(n)) for n in schema.names).encode() for o in objs]
    d = f.decode(pa.array(payloads, pa.binary()))
    slow = f.decode_records(pa.array(payloads, pa.binary()))
    assert d.bad.keys() == slow.bad.keys()
    assert d.table.to_pylist() == slow.table.to_pylist()
    for i, row in enumerate(d.table.to_pylist()):
        if i in d.bad:
            assert all(v is None for v in row.values())
        else:
            assert all(c.nullable or row[c.name] is not None for c in schema.columns)


# --- ISO-8601 TIMESTAMPs in the results writer's shape, read column-wise -------------------------------
TS_DDL = "CREATE TABLE v (k BIGINT, t TIMESTAMP(3)) WITH ('format' = 'json')"
TRICKY_TS = ["2026-02-30T00:00:00.000Z", "2026-01-01T24:00:00.000Z", "2026-01-01T23:59:60.000Z",
             "2026-01-01T00:00:00.000+01:00", " 2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z ",
             "2026-01-01 00:00:00.000Z", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00.1234Z", "2026-1-01T00:00:00.000Z",
             "2026-01-01T00:00:00.000z", "2026-01-01T00:00:00.000ZZ", "10000-01-01T00:00:00.000Z", "", "Z"]


def _writer_text(ms: int, zone: str) -> str:
    """A TIMESTAMP as the results writer gives it (operators/sql.json_texts)."""
    from lazystandby.operators.sql import json_texts

    return json.loads(json_texts(["t"], [pa.array([ms], pa.timestamp("ms"))])[0].as_py())["t"].removesuffix("Z") + zone


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(-62_135_596_800_000, 253_402_300_799_999), st.sampled_from(["Z", ""])),
                min_size=1, max_size=20))
def test_timestamps_in_the_writers_shape_take_the_columnar_path_with_the_record_paths_values(values):
    f = record_format(parse_table(TS_DDL))
    payloads = pa.array([json.dumps({"k": i, "t": _writer_text(ms, z)}).encode() for i, (ms, z) in enumerate(values)],
                        pa.binary())
    fast = f.decode_columnar(payloads)
    assert fast is not None
    assert fast.column("t").cast(pa.int64()).to_pylist() == [ms for ms, _ in values]
    assert fast.to_pylist() == f.decode_records(payloads).table.to_pylist()


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.one_of(st.none(), st.sampled_from(TRICKY_TS), st.integers(-(1 << 50), 1 << 50),
                          st.integers(0, 253_402_300_799_999).map(lambda ms: _writer_text(ms, "Z"))),
                min_size=1, max_size=8))
def test_a_timestamp_out_of_the_writers_shape_is_read_as_the_record_path_reads_it(values):
    f = record_format(parse_table(TS_DDL))
    payloads = pa.array([json.dumps({"k": 1, "t": v}).encode() for v in values], pa.binary())
    d, slow = f.decode(payloads), f.decode_records(payloads)
    assert d.bad.keys() == slow.bad.keys()
    assert d.table.to_pylist() == slow.table.to_pylist()


def test_the_path_a_poll_took_is_tried_first_and_the_other_still_read():
    f = record_format(parse_table(TS_DDL))
    text = pa.array([b'{"k":1,"t":"2026-01-01T00:00:00.000Z"}'], pa.binary())
    ms = pa.array([b'{"k":1,"t":1767225600000}'], pa.binary())
    for payloads in (text, text, ms, ms, text):
        got = f.decode_columnar(payloads)
        assert got is not None and got.column("t").cast(pa.int64()).to_pylist() == [1_767_225_600_000]
