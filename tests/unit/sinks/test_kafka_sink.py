"""Nd's results topic format (one record per output, an anchor per frame) and what the sink does when a
write fails after part of it landed. A fake partition stands in for the broker; the real one runs in
tests/integration/test_kafka_pipeline.py (kill and restart of Nd, every fault, exact output)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest

from lazystandby.core.errors import ResultsFormatError
from lazystandby.core.seq import StreamRegistry
from lazystandby.core.tuples import TupleBatch
from lazystandby.sinks import kafka_sink
from lazystandby.sinks.kafka_sink import KafkaSink, oseqs_of


@dataclass
class Rec:
    offset: int
    key: bytes
    value: bytes
    headers: list


class Partition:
    """One partition's log, and a producer writing to it: `fail_after` records land, then the rest of
    that flush fails (as a broker that goes away mid-write), once."""

    def __init__(self) -> None:
        self.log: list[Rec] = []
        self.queued: list[tuple] = []
        self.fail_after: int | None = None
        self.producers = 0

    def producer(self):
        self.producers += 1
        return self

    def produce(self, topic, value, key=None, *, partition=0, on_delivery=None, headers=None) -> None:
        self.queued.append((key, value, headers or [], on_delivery))

    def produce_batch(self, topic, messages, partition=0, on_delivery=None) -> int:
        for m in messages:
            self.produce(topic, m["value"], m["key"], on_delivery=on_delivery)
        return len(messages)

    def flush(self, timeout: float) -> int:
        for i, (key, value, headers, cb) in enumerate(self.queued):
            if self.fail_after is not None and i >= self.fail_after:
                cb("Broker: Request timed out", None)
                continue
            self.log.append(Rec(len(self.log), key, value, headers))
        self.queued, self.fail_after = [], None
        return 0

    def read(self, bootstrap, topic, start=0, timeout=60.0, *, tail=0, partition=0):
        return self.log[-tail:] if tail else self.log[start:]


@pytest.fixture
def part(monkeypatch) -> Partition:
    p = Partition()
    monkeypatch.setattr(kafka_sink, "durable_producer", lambda bootstrap, **settings: p.producer())
    monkeypatch.setattr(kafka_sink, "read_partition", p.read)
    monkeypatch.setattr(kafka_sink, "ensure_topics", lambda *a, **k: None)
    return p


REG = StreamRegistry(["I1", "I2"])


def outputs(first: int, n: int) -> TupleBatch:
    streams = np.array([1 + i % 2 for i in range(n)], np.int32)
    seqs = np.arange(100 + first, 100 + first + n, dtype=np.int64)
    return TupleBatch(first, streams, seqs, pa.array([b"tick%d" % (first + i) for i in range(n)], pa.binary()))


def test_one_record_per_output_with_an_anchor_per_frame(part):
    sink = KafkaSink("kafka:9092", REG)
    sink.append(outputs(1, 3), epoch=2)
    sink.append(outputs(4, 2), epoch=2)
    assert [r.key for r in part.log] == [b"I1:101", b"I2:102", b"I1:103", b"I1:104", b"I2:105"]
    assert [dict(r.headers) for r in part.log] == [{"oseq": b"1", "epoch": b"2"}, {}, {},
                                                   {"oseq": b"4", "epoch": b"2"}, {}]
    assert kafka_sink.read_results("kafka:9092", "ls.results") == [
        (i, s, 100 + i, b"tick%d" % i) for i, s in zip(range(1, 6), ["I1", "I2", "I1", "I1", "I2"], strict=True)]
    assert sink.last_delivered() == 5


def test_a_restarted_sink_reads_its_last_output_back_to_the_anchor_of_a_frame_cut_short(part, monkeypatch):
    sink = KafkaSink("kafka:9092", REG)
    sink.append(outputs(1, 4), epoch=3)
    part.fail_after = 2  # the next frame is cut short (Nd killed mid-write): its anchor and one more land
    with pytest.raises(RuntimeError):
        sink.append(outputs(5, 5), epoch=3)
    monkeypatch.setattr(kafka_sink, "ANCHOR_SCAN", 1)  # the anchor lies beyond the first look back
    again = KafkaSink("kafka:9092", REG)
    assert (again.last_delivered(), again.last_epoch()) == (6, 3)


def test_a_failed_write_that_landed_in_part_is_finished_not_repeated(part):
    sink = KafkaSink("kafka:9092", REG)
    part.fail_after = 2
    with pytest.raises(RuntimeError, match=r"results topic ls\.results: 0 outputs not delivered"):
        sink.append(outputs(1, 5))
    assert len(part.log) == 2 and sink.last_delivered() == 0  # Nd does not ack: N sends the frame again
    sink.append(outputs(1, 5))
    assert [o for o, *_ in kafka_sink.read_results("kafka:9092", "ls.results")] == [1, 2, 3, 4, 5]
    assert sink.last_delivered() == 5 and part.producers == 2  # a fresh producer after the failure
    sink.append(outputs(3, 4))  # a retry overlapping what is held: only the new outputs are written
    assert [o for o, *_ in kafka_sink.read_results("kafka:9092", "ls.results")] == [1, 2, 3, 4, 5, 6]


def test_topics_of_earlier_versions_read_as_before_and_a_topic_without_anchors_is_refused():
    old = [Rec(o, b"I1:%d" % o, b"v", [("oseq", b"%d" % (o + 1)), ("stream", b"I1"), ("seq", b"%d" % o),
                                         ("epoch", b"1")]) for o in range(3)]
    assert oseqs_of(old) == [(1, 1), (2, 1), (3, 1)]
    with pytest.raises(ResultsFormatError, match="offset 7 has no anchor"):
        oseqs_of([Rec(7, b"I1:1", b"v", [])], "ls.results")
