"""Nd's Kafka sink: the output stream in a single-partition results topic, one record per output, the
output sequence number in a header. A restarted Nd reads the topic's last record to learn the last
output it holds: that is its dedup state, so it loses nothing and writes nothing twice."""

from __future__ import annotations

import numpy as np

from ..core.seq import StreamRegistry
from ..core.tuples import TupleBatch
from ..sources.kafka_source import DeliveryErrors, Topics, durable_producer, ensure_topics, read_partition
from .base import Sink


def last_output(bootstrap: str, topic: str) -> tuple[int, int]:
    """The output sequence number and epoch of the topic's last record ((0, 0) when empty)."""
    recs = read_partition(bootstrap, topic, tail=1)
    if not recs:
        return 0, 0
    h = dict(recs[-1].headers)
    return int(h["oseq"]), int(h.get("epoch", b"0"))


def read_results(bootstrap: str, topic: str) -> list[tuple[int, str, int, bytes]]:
    """(oseq, stream, seq, payload) of every record in the results topic."""
    out = []
    for r in read_partition(bootstrap, topic):
        h = dict(r.headers)
        out.append((int(h["oseq"]), h["stream"].decode(), int(h["seq"]), r.value))
    return out


class KafkaSink(Sink):
    """Writes in order and waits for the broker before acking (Nd's Level-0 ack means "durable here").

    librdkafka (confluent-kafka) on this path: one C call per output and one flush per frame, where
    kafka-python built several Python objects per record and held Nd to about 40 k outputs/s. The producer
    is idempotent, so a retried request neither reorders nor repeats what it carried."""

    def __init__(self, bootstrap: str, registry: StreamRegistry, topics: Topics | None = None, *,
                 replication_factor: int = 1) -> None:
        self.topics = topics or Topics()
        self.registry = registry
        ensure_topics(bootstrap, [self.topics.results], replication_factor=replication_factor)
        self.producer = durable_producer(bootstrap, **{
            "linger.ms": 1, "batch.size": 1 << 20, "queue.buffering.max.messages": 1 << 20,
            # Reports only for what failed: a Python callback per delivered output cost more than the
            # produce itself.
            "delivery.report.only.error": True})
        self._delivered = DeliveryErrors()
        self._last, self._epoch = last_output(bootstrap, self.topics.results)

    def last_epoch(self) -> int:
        return self._epoch

    def append(self, outputs: TupleBatch, *, epoch: int = 0) -> None:
        topic = self.topics.results
        self._epoch = max(self._epoch, epoch)
        ep = b"%d" % self._epoch
        names = {sid: self.registry.name_of(sid).encode() for sid in np.unique(outputs.streams).tolist()}
        produce, first = self.producer.produce, outputs.first
        rows = zip(outputs.streams.tolist(), outputs.seqs.tolist(), outputs.payload_list(), strict=True)
        for i, (sid, seq, payload) in enumerate(rows):
            name = names[sid]
            produce(topic, payload, b"%s:%d" % (name, seq), partition=0, on_delivery=self._delivered,
                    headers=[("oseq", b"%d" % (first + i)), ("stream", name), ("seq", b"%d" % seq), ("epoch", ep)])
        self._delivered.flush(self.producer, f"results topic {topic}", "outputs", "delivered")
        self._last = outputs.last

    def last_delivered(self) -> int:
        return self._last

    def close(self) -> None:
        self.producer.flush(10)
