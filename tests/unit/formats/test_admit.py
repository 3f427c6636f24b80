import numpy as np
import pyarrow as pa

from lazystandby.formats.admit import TableRules, TickRules
from lazystandby.formats.schema import parse_table

T = parse_table("""CREATE TABLE t (k VARCHAR, at TIMESTAMP(3), WATERMARK FOR at AS at) WITH ('format' = 'json')""")
U = parse_table("""CREATE TABLE u (n BIGINT NOT NULL) WITH ('format' = 'csv')""")


def test_each_tables_records_are_judged_by_its_own_format_and_a_missing_event_time_is_refused():
    rules = TableRules({"t": T, "u": U})
    payloads = pa.array([b'{"k": "a", "at": 5}', b"7", b'{"k": "b"}', b"x", b'{"k": 1, "at": 5}'], pa.binary())
    stream = np.array([0, 1, 0, 1, 0])
    bad = rules.refusals(["t/0", "u"], stream, payloads, max_bytes=100)
    assert set(bad) == {2, 3, 4}
    assert "event time" in bad[2] and "integer" in bad[3] and "takes text" in bad[4]
    assert rules.refusals(["t/0", "u"], stream[:2], payloads[:2], max_bytes=100) is None


def test_event_times_come_from_the_declared_column():
    rules = TableRules({"t": T})
    payloads = pa.array([b'{"at": 1500}', b'{"at": "1970-01-01T00:00:02Z"}'], pa.binary())
    assert rules.event_times(payloads, ["t", "t/1"]).tolist() == [1500, 2000]


def test_the_tick_rules_name_each_bad_tick():
    bad = TickRules().refusals(["I1"], np.zeros(2, np.int64), pa.array([b"ACME,1.5,100,1,XNYS", b"nope"]),
                               max_bytes=100)
    assert list(bad) == [1] and "fields" in bad[1]


def test_the_event_times_of_a_poll_just_admitted_are_those_its_judgement_read():
    rules = TableRules({"t": T, "u": U})
    payloads = pa.array([b'{"k": "a", "at": 1500}', b"7", b'{"at": "1970-01-01T00:00:02Z"}'], pa.binary())
    stream = np.array([0, 1, 0])
    assert rules.refusals(["t", "u"], stream, payloads, max_bytes=100) is None
    remembered = rules.event_times(payloads, ["t", "u", "t"])
    fresh = TableRules({"t": T, "u": U}).event_times(payloads, ["t", "u", "t"])
    assert remembered.tolist() == fresh.tolist() == [1500, 0, 2000]
    other = pa.array([b'{"at": 9}'], pa.binary())  # another poll is read, not taken from the last judgement
    assert rules.event_times(other, ["t"]).tolist() == [9]
