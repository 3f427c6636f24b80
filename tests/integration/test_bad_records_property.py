"""Bad input found by a generator, not by hand: hypothesis draws source records, good and bad, into the
real Kafka pipeline (Nu, N, N', Nd as processes), and every batch drawn must come out as the truth table
says: the good ones' outputs exactly, and the bad ones as dead letters, one for one.

The oracle here is written from the format's words (formats/ticks.py's SCHEMA), not from its regular
expressions, so that the two must agree for the test to pass."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import HealthCheck, assume, given, seed, settings
from hypothesis import strategies as st

from lazystandby.harness.launcher import Topology, run_dir
from lazystandby.harness.wait import wait_until
from lazystandby.sinks.kafka_sink import read_results
from lazystandby.sources.kafka_source import Topics, read_partition

MAX_TUPLE_BYTES = 200
PREDICATE = "price > 100"


def _text_ok(s: str) -> bool:
    return 1 <= len(s) <= 32 and all(c != "," and ord(c) >= 0x20 and ord(c) != 0x7F for c in s)


def _digits(s: str, most: int) -> bool:
    return 1 <= len(s) <= most and s.isascii() and s.isdigit()


def oracle(record: bytes | None) -> float | None:
    """The price of a record the pipeline must admit, or None for one it must dead letter."""
    if record is None or len(record) > MAX_TUPLE_BYTES:
        return None
    try:
        text = record.decode("utf-8")
    except UnicodeDecodeError:
        return None
    parts = text.split(",")
    if len(parts) != 5:
        return None
    symbol, price, volume, ts, venue = parts
    whole, dot, frac = price.removeprefix("-").partition(".")
    ok = (_text_ok(symbol) and _text_ok(venue) and _digits(whole, 9) and (not dot or _digits(frac, 6))
          and _digits(volume.removeprefix("-"), 18) and _digits(ts, 15))
    return float(price) if ok else None


# Each record is drawn from a few choices (hypothesis keeps a bounded budget of them per example, and an
# example holds 200 or more records): a good tick, or a tick with one field drawn from outside its range
# or format, or bytes that are no tick at all.
_sym = st.sampled_from(["ACME", "WAYNE", "X", "INITECH", "Ü", "東京"])
_text = st.one_of(_sym, st.integers(30, 36).map(lambda n: "S" * n), st.sampled_from(["", " ", "A\n", "A\x00",
                  "A\x7f", "A\tB", "a,b"]))
_price = st.one_of(st.builds(lambda w, f: f"{w}.{f:02d}", st.integers(0, 10**9 - 1), st.integers(0, 99)),
                   st.builds(lambda w, f: f"-{w}.{f}", st.integers(0, 10**9 - 1), st.integers(0, 10**7)),
                   st.integers(-(10**11), 10**11).map(str),
                   st.sampled_from(["nan", "inf", "1e5", " 5", "5.", ".5", "--5", "5.0.0", "", "٥"]))
_int = st.one_of(st.integers(-(10**18) + 1, 10**18 - 1), st.integers(-(10**25), 10**25),
                 st.sampled_from(["", "1_000", "1.5", "+5", "0x10", "١٢"])).map(str)
_ts = st.one_of(st.integers(0, 10**15 - 1), st.integers(-(10**3), 10**17)).map(str)
_good = st.builds(lambda s, w, f, v, t, u: f"{s},{w}.{f:02d},{v},{t},{u}".encode(), _sym, st.integers(0, 500),
                  st.integers(0, 99), st.integers(-(10**18) + 1, 10**18 - 1), st.integers(0, 10**15 - 1), _sym)
_near = st.builds(lambda *f: ",".join(f).encode(), st.one_of(_sym, _text), _price, _int, _ts, st.one_of(_sym, _text))
_fields = st.lists(_sym, min_size=0, max_size=8).map(lambda f: ",".join(f).encode())
_junk = st.one_of(st.binary(max_size=24), st.none(), st.integers(150, 400).map(lambda n: b"A,1.00,1,1," + b"V" * n),
                  st.just(b"\xff\xfe,1.00,1,1,X"), _fields)
# Half good ticks, the rest near misses and junk.
RECORDS = st.lists(st.integers(0, 9).flatmap(lambda k: _good if k < 5 else _near if k < 8 else _junk),
                   min_size=200, max_size=240)


@pytest.fixture(scope="module")
def pipeline(kafka):
    """Nu, N, N', Nd on a Kafka prefix of their own, up for every drawn batch."""
    prefix = f"prop{random.getrandbits(32):x}."
    workdir = run_dir() / f"property-{prefix.rstrip('.')}"
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = {"bsize": 10, "codec": "zstd-stream-dict", "total": 0, "rate": 0.0, "predicate": PREDICATE, "seed": 7,
           "heartbeat_interval": 0.1, "heartbeat_misses": 3, "kafka_bootstrap": kafka, "topic_prefix": prefix,
           "max_tuple_bytes": MAX_TUPLE_BYTES}
    with Topology(cfg, workdir) as topo:
        topo.start_all()
        yield kafka, Topics(prefix), topo


@seed(20261202)
@settings(max_examples=5, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(records=RECORDS)
def test_drawn_records_come_out_as_the_truth_table_says(pipeline, records):
    from kafka import KafkaProducer

    kafka, topics, topo = pipeline
    topic = topics.source("I1")
    before = len(read_partition(kafka, topic))
    seqs = range(before + 1, before + len(records) + 1)  # a record's seq is its offset + 1
    verdicts = [oracle(r) for r in records]
    want = [("I1", q) for q, price in zip(seqs, verdicts, strict=True) if price is not None and price > 100]
    bad = {("I1", q) for q, price in zip(seqs, verdicts, strict=True) if price is None}
    assume(len(want) >= 10 and len(bad) >= 10)  # a batch that tries both sides (not the all-alike first one)

    p = KafkaProducer(bootstrap_servers=kafka, acks="all")
    for r in records:
        p.send(topic, r, key=b"k" if r is None else None, partition=0)
    p.flush()
    p.close()

    def ours(rows):
        return [(s, q) for _, s, q, _ in rows if q in seqs]

    def letters():
        out = set()
        for m in read_partition(kafka, topics.deadletters):
            stream, _, q = m.key.decode().rpartition(":")
            if int(q) in seqs:
                out.add((stream, int(q)))
        return out

    # Nu admits in order, so once the last record's fate is known every earlier one's is too.
    wait_until(lambda: topo.status("nu")["counters"].get("source_tuples", 0)
               + topo.status("nu")["counters"].get("dead_letters", 0) >= before + len(records), 60)
    assert wait_until(lambda: len(ours(read_results(kafka, topics.results))) >= len(want) and
                      len(letters()) >= len(bad), 60), "the pipeline did not answer every drawn record"
    time.sleep(0.2)  # anything wrongly admitted late would show now
    assert ours(read_results(kafka, topics.results)) == want
    assert letters() == bad
