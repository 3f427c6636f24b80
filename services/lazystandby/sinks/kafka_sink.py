"""Nd's Kafka sink: the output stream in a single-partition results topic, one record per output, the
output sequence number in a header. A restarted Nd reads the topic's last record to learn the last
output it holds: that is its dedup state, so it loses nothing and writes nothing twice."""

from __future__ import annotations

from kafka import KafkaProducer

from ..core.seq import StreamRegistry
from ..core.tuples import TupleBatch
from ..sources.kafka_source import Topics, ensure_topics, read_partition
from .base import Sink


def last_oseq(bootstrap: str, topic: str) -> int:
    """The output sequence number of the topic's last record (0 when empty)."""
    recs = read_partition(bootstrap, topic, tail=1)
    return int(dict(recs[-1].headers)["oseq"]) if recs else 0


def read_results(bootstrap: str, topic: str) -> list[tuple[int, str, int, bytes]]:
    """(oseq, stream, seq, payload) of every record in the results topic."""
    out = []
    for r in read_partition(bootstrap, topic):
        h = dict(r.headers)
        out.append((int(h["oseq"]), h["stream"].decode(), int(h["seq"]), r.value))
    return out


class KafkaSink(Sink):
    """Writes in order, waits for the broker before acking (Nd's Level-0 ack means "durable here")."""

    def __init__(self, bootstrap: str, registry: StreamRegistry, topics: Topics | None = None) -> None:
        self.topics = topics or Topics()
        self.registry = registry
        ensure_topics(bootstrap, [self.topics.results])
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=1,
                                      max_in_flight_requests_per_connection=1, retries=10,
                                      batch_size=512 << 10)
        self._last = last_oseq(bootstrap, self.topics.results)

    def append(self, outputs: TupleBatch) -> None:
        topic = self.topics.results
        for i, (sid, seq, payload) in enumerate(zip(outputs.streams, outputs.seqs, outputs.payloads, strict=True)):
            name = self.registry.name_of(sid).encode()
            self.producer.send(topic, payload, key=b"%s:%d" % (name, seq), partition=0,
                               headers=[("oseq", b"%d" % (outputs.first + i)), ("stream", name),
                                        ("seq", b"%d" % seq)])
        self.producer.flush()
        self._last = outputs.last

    def last_delivered(self) -> int:
        return self._last

    def close(self) -> None:
        self.producer.close()
