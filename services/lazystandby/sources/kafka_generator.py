"""The load generator: writes the tick streams to their Kafka topics (key = symbol; the tick's event time
stays in the payload), at a fixed rate or as fast as the broker takes them, optionally with malformed records
mixed in. Given a pipeline file (`--pipeline`, LS_PIPELINE in the compose stack), it writes that pipeline's
load instead (sources/pipeline_load.py)."""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import zlib

from kafka import KafkaProducer

from .generator import interleave
from .kafka_source import Topics, all_topics, ensure_topics

# The last is oversized for a pipeline whose max_tuple_bytes is below 300 (the tests set 200).
MALFORMED = [b"\xff\xfe not utf-8", b"ACME,not-a-price,100,1,XTKS", b"only,three,fields", b"",
             b"ACME,101.5,100,1764000000000," + b"X" * 270]

# The records real producers send by mistake, one of each kind, by name (`--bad-records all`). None is a
# record whose value is null (a tombstone). Every one must be dead lettered at Nu, none admitted.
_T = b"1764000000000"
BAD_RECORDS: dict[str, bytes | None] = {
    "random-bytes": bytes(range(256)) * 4,
    "100KB": b"ACME,101.50,100," + _T + b"," + b"X" * 100_000,
    "5MB": b"ACME,101.50,100," + _T + b"," + b"X" * (5 << 20),
    "nan": b"ACME,nan,100," + _T + b",XNYS",
    "infinity": b"ACME,Infinity,100," + _T + b",XNYS",
    "missing-field": b"ACME,101.50,100," + _T,
    "wrong-type": b"ACME,101.50,lots," + _T + b",XNYS",
    "exponent": b"ACME,1.0e2,100," + _T + b",XNYS",
    "null-value": None,
    "empty": b"",
    "extra-field": b"ACME,101.50,100," + _T + b",XNYS,extra",
    "not-utf8": b"ACME,101.50,100," + _T + b",\xff\xfe",
    "json-object": b'{"symbol": "ACME", "price": 101.5, "volume": 100}',
    "int64-overflow": b"ACME,101.50,99999999999999999999999," + _T + b",XNYS",
    "int-19-digits": b"ACME,101.50,1000000000000000000," + _T + b",XNYS",
    "price-16-digits": b"ACME,1234567890.123456,100," + _T + b",XNYS",
    "ts-negative": b"ACME,101.50,100,-1,XNYS",
    "ts-beyond-range": b"ACME,101.50,100,10000000000000000,XNYS",
    "symbol-too-long": b"A" * 33 + b",101.50,100," + _T + b",XNYS",
    "space-in-number": b"ACME, 101.50,100," + _T + b",XNYS",
    "underscore-in-int": b"ACME,101.50,1_000," + _T + b",XNYS",
    "empty-symbol": b",101.50,100," + _T + b",XNYS",
    "only-commas": b",,,,",
    "trailing-newline": b"ACME,101.50,100," + _T + b",XNYS\n",
}


def generate(bootstrap: str, streams: list[str], total: int, *, rate: float = 0.0, seed: int = 7,
             topics: Topics | None = None, malformed_every: int = 0, start: int = 0,
             stop: threading.Event | None = None, partitions: int = 1,
             bad_records: list[bytes | None] | None = None, span: int = 0, keys: int = 0) -> int:
    """Write tuples start .. total-1 of the deterministic interleaving (fewer if `stop` is set first);
    returns how many were written. With several partitions a tick goes to the partition of its symbol
    (crc32 of the key), so each partition holds its symbols' ticks in order. `bad_records` are written
    too, one each, spread evenly over the whole load (before tuple (k + 1) * span / (len + 1); `span` is
    `total` unless a load is written in parts)."""
    topics = topics or Topics()
    ensure_topics(bootstrap, all_topics(topics, streams), partitions={topics.source(s): partitions for s in streams})
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, batch_size=256 << 10,
                      max_request_size=8 << 20)
    span = span or total
    bad_at = {(k + 1) * span // (len(bad_records) + 1): r for k, r in enumerate(bad_records or [])}
    if len(bad_at) < len(bad_records or []):
        raise ValueError(f"{len(bad_records or [])} bad records do not fit apart in a load of {span} tuples")
    t0 = time.monotonic()
    n = 0
    for i, (stream, _seq, payload) in enumerate(interleave(streams, total, seed, keys=keys)):
        if i < start:
            continue
        key = payload.partition(b",")[0]
        part = zlib.crc32(key) % partitions
        if malformed_every and i and i % malformed_every == 0:
            p.send(topics.source(stream), MALFORMED[(i // malformed_every) % len(MALFORMED)], partition=part)
        if i in bad_at:  # a null value comes with a key, as Kafka requires (a tombstone)
            p.send(topics.source(stream), bad_at[i], key=None if bad_at[i] is not None else key, partition=part)
        # No record timestamp from the tick: event times in the past would put the records under time-based
        # retention at once on a topic the pipeline did not create (LogAppendTime guards the ones it did).
        p.send(topics.source(stream), payload, key=key, partition=part)
        n += 1
        if stop is not None and n % 100 == 0 and stop.is_set():
            break
        if rate > 0 and n % 100 == 0:
            ahead = n / rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
    p.flush()
    p.close()
    return n


def set_predicate(bootstrap: str, predicate: str, topics: Topics | None = None) -> None:
    """Publish an operator parameter change; Nu puts it in the link order, N and N' switch there."""
    from ..formats import control

    topics = topics or Topics()
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    p.send(topics.control, control.encode(predicate), partition=0).get(timeout=30)
    p.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="lazystandby-generator")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--streams", default="I1,I2")
    ap.add_argument("--total", type=int, default=100_000)
    ap.add_argument("--rate", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--prefix", default="ls.")
    ap.add_argument("--malformed-every", type=int, default=0)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--keys", type=int, default=0, help="distinct symbols (0: the ten named ones; up to 1,000,000)")
    ap.add_argument("--pipeline", default=os.environ.get("LS_PIPELINE", ""),
                    help="a pipeline file: `--total` records into each of its tables' topics, of each table's "
                         "generator (default: LS_PIPELINE; none: the ticks)")
    a = ap.parse_args(argv)
    if a.pipeline:
        from ..formats.pipeline import read_stages
        from .pipeline_load import write_load

        try:
            spec = read_stages(a.pipeline)[0]  # of several stages, the load is what the first one reads
        except ValueError as e:  # PipelineError, SchemaError, UnsupportedSql: the file names what is wrong
            print(f"lazystandby-generator: {e}", file=sys.stderr)
            return 2
        print(write_load(a.bootstrap, spec, a.total, rate=a.rate, seed=a.seed,
                         topics=Topics.of_pipeline(a.prefix, spec), partitions=a.partitions))
        return 0
    n = generate(a.bootstrap, a.streams.split(","), a.total, rate=a.rate, seed=a.seed, topics=Topics(a.prefix),
                 malformed_every=a.malformed_every, partitions=a.partitions, keys=a.keys)
    print(n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
