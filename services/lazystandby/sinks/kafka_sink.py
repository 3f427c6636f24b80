"""Nd's Kafka sink: the output stream in a single-partition results topic, one record per output, the
output sequence number in a header. A restarted Nd reads the topic's last record to learn the last
output it holds: that is its dedup state, so it loses nothing and writes nothing twice."""

from __future__ import annotations

from kafka import KafkaProducer

from ..core.seq import StreamRegistry
from ..core.tuples import TupleBatch
from ..sources.kafka_source import Topics, ensure_topics, read_partition
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
    """Writes in order, waits for the broker before acking (Nd's Level-0 ack means "durable here")."""

    def __init__(self, bootstrap: str, registry: StreamRegistry, topics: Topics | None = None, *,
                 replication_factor: int = 1) -> None:
        self.topics = topics or Topics()
        self.registry = registry
        ensure_topics(bootstrap, [self.topics.results], replication_factor=replication_factor)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=1,
                                      max_in_flight_requests_per_connection=1, retries=10,
                                      batch_size=512 << 10)
        self._last, self._epoch = last_output(bootstrap, self.topics.results)

    def last_epoch(self) -> int:
        return self._epoch

    def append(self, outputs: TupleBatch, *, epoch: int = 0) -> None:
        topic = self.topics.results
        self._epoch = max(self._epoch, epoch)
        ep = b"%d" % self._epoch
        rows = zip(outputs.streams.tolist(), outputs.seqs.tolist(), outputs.payload_list(), strict=True)
        for i, (sid, seq, payload) in enumerate(rows):
            name = self.registry.name_of(sid).encode()
            self.producer.send(topic, payload, key=b"%s:%d" % (name, seq), partition=0,
                               headers=[("oseq", b"%d" % (outputs.first + i)), ("stream", name),
                                        ("seq", b"%d" % seq), ("epoch", ep)])
        self.producer.flush()
        self._last = outputs.last

    def last_delivered(self) -> int:
        return self._last

    def close(self) -> None:
        self.producer.close()
