"""A bounded load into a pipeline's source topics, for `run --fault`, the trials and the bench: the
Nexmark events from the `nexmark` crate's generator for the Nexmark tables, the tick generator for the
tick example, and records drawn from the schema (sources/drawn.py) for any other table.

The Nexmark generator is the crate's CLI (`make nexmark`; NEXMARK_BIN or `.cache/nexmark/bin/nexmark`),
run with `--format json --no-wait`: one JSON object per line tagged by kind (`{"Bid": {...}}`); each
line's inner object is the record, as written, in the topic of its kind's table.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..formats.pipeline import Pipeline
from ..formats.schema import Schema
from .drawn import draw_records
from .generator import interleave
from .kafka_source import Topics, all_topics, ensure_topics

NEXMARK_KINDS = {"bid": "Bid", "person": "Person", "auction": "Auction"}
REPO = Path(__file__).resolve().parents[3]


def nexmark_bin() -> str:
    """The nexmark generator's path: NEXMARK_BIN, the repo's cache (`make nexmark`), or PATH."""
    for candidate in (os.environ.get("NEXMARK_BIN", ""), str(REPO / ".cache/nexmark/bin/nexmark")):
        if candidate and Path(candidate).is_file():
            return candidate
    found = shutil.which("nexmark")
    if not found:
        raise FileNotFoundError("the nexmark generator is not installed: `make nexmark` installs it (cargo install "
                                "nexmark --features bin), or set NEXMARK_BIN")
    return found


def is_nexmark(schema: Schema) -> bool:
    """A Nexmark table: bid, person or auction with the columns the generator writes."""
    return schema.table in NEXMARK_KINDS and "date_time" in schema.names


def is_ticks(schema: Schema) -> bool:
    """The tick example's table (examples/ticks-*.sql)."""
    return schema.table == "ticks" and schema.format == "csv"


def nexmark_events(kind: str, n: int) -> Iterator[bytes]:
    """The first `n` events of one kind, each the JSON object of its fields."""
    tag = NEXMARK_KINDS[kind]
    prefix = b'{"' + tag.encode() + b'":'
    with subprocess.Popen([nexmark_bin(), "-t", kind, "-n", str(n), "--format", "json", "--no-wait"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip(b"\n")
            if line.startswith(prefix) and line.endswith(b"}"):
                yield line[len(prefix):-1]
        if proc.wait() != 0:
            raise RuntimeError(f"the nexmark generator ended with exit code {proc.returncode}")


def records(schema: Schema, n: int, *, seed: int = 7) -> Iterator[bytes]:
    """The load of one table: `n` records of its generator."""
    if is_nexmark(schema):
        yield from nexmark_events(schema.table, n)
    elif is_ticks(schema):
        for _, _, payload in interleave([schema.table], n, seed):
            yield payload
    else:
        step = 10_000
        for lo in range(0, n, step):
            yield from draw_records(schema, min(step, n - lo), seed=seed, first=lo,
                                    iso_times=schema.format == "json")


def write_load(bootstrap: str, pipeline: Pipeline, total: int, *, rate: float = 0.0, seed: int = 7,
               topics: Topics | None = None, partitions: int = 1, bad_records: list[bytes | None] | None = None,
               stop: threading.Event | None = None) -> int:
    """Write `total` records into each source table's topic (round robin over its partitions), at `rate`
    records a second over all (0: as fast as the broker takes them); `bad_records` spread evenly among
    the first table's. Returns how many were written."""
    from .kafka_source import DeliveryErrors, durable_producer

    topics = topics or Topics()
    streams = [t.table for t in pipeline.sources]
    ensure_topics(bootstrap, all_topics(topics, streams), partitions={topics.source(s): partitions for s in streams})
    producer = durable_producer(bootstrap, **{"linger.ms": 5, "batch.size": 1 << 20, "message.max.bytes": 8 << 20,
                                              "queue.buffering.max.messages": 1 << 20})
    failed = DeliveryErrors()
    bad_at = {(k + 1) * total // (len(bad_records) + 1): r for k, r in enumerate(bad_records or [])}
    gens = [(topics.source(t.table), records(t, total, seed=seed)) for t in pipeline.sources]
    t0, n = time.monotonic(), 0

    def send(topic: str, value: bytes | None, part: int, key: bytes | None = None) -> None:
        while True:
            try:
                producer.produce(topic, value, key, partition=part, on_delivery=failed)
                return
            except BufferError:  # the local queue is full: let it drain
                producer.poll(0.05)

    for i in range(total):
        for j, (topic, gen) in enumerate(gens):
            payload = next(gen)
            if j == 0 and i in bad_at:  # a null value comes with a key, as Kafka requires (a tombstone)
                send(topic, bad_at[i], i % partitions, None if bad_at[i] is not None else b"null")
            send(topic, payload, i % partitions)
            n += 1
        if i % 1000 == 0:
            producer.poll(0)
            if stop is not None and stop.is_set():
                break
        if rate > 0 and n % 100 == 0:
            ahead = n / rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
    failed.flush(producer, "the load", "records", "written", timeout=120.0)
    return n
