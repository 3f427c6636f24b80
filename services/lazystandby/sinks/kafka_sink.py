"""Nd's Kafka sink: the output stream in a single-partition results topic, one record per output.

The format (README, "The results topic"): every record has key `<stream>:<seq>` (the input it came from)
and the output payload as value; a pipeline's window results are keyed by their group instead
(`group_keys`: a JSON object of the window and key columns), so a compacted topic keeps the latest result
per group. The first record of each frame Nd writes is its anchor: headers `oseq`
(that record's output sequence number) and `epoch`. A record's oseq is its anchor's plus the offset
distance to it, because one idempotent producer writes the partition in order, with no gaps. So a frame
is one produce call for its anchor and one batch call for the rest, where a header per record cost
librdkafka and the broker three times as much.

A restarted Nd reads the topic's tail back to the last anchor to learn the last output it holds (its
dedup state and its Level-0 ack): it loses nothing and writes nothing twice. Topics written by earlier
versions (an `oseq` header on every record) read the same way: each record is its own anchor.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..core.errors import ResultsFormatError
from ..core.seq import StreamRegistry, streams_present
from ..core.tuples import TupleBatch
from ..sources.kafka_source import DeliveryErrors, Topics, durable_producer, ensure_topics, read_partition
from .base import Sink

ANCHOR_SCAN = 4096  # records read back from the end at first when looking for the last anchor


def group_key(payload: bytes, names: Sequence[str]) -> bytes:
    """A window result's record key: the JSON object of its group's columns (window and keys), in order."""
    row = json.loads(payload)
    return json.dumps({n: row.get(n) for n in names}, separators=(",", ":")).encode()


def _anchor(record) -> tuple[int, int] | None:
    """(oseq, epoch) a record's headers carry, None for a record that is no anchor."""
    h = dict(record.headers or ())
    return (int(h["oseq"]), int(h.get("epoch", b"0"))) if "oseq" in h else None


def _no_anchor(topic: str, offset: int) -> ResultsFormatError:
    return ResultsFormatError(f"{topic}: the record at offset {offset} has no anchor before it (an `oseq` "
                              f"header): not a results topic this version can read")


def oseqs_of(records: Sequence, topic: str = "results") -> list[tuple[int, int]]:
    """(oseq, epoch) of each record (kafka records in offset order, all after one anchor): from the
    closest anchor before it. Raises ResultsFormatError when the first record is no anchor."""
    out: list[tuple[int, int]] = []
    at = None  # (offset, oseq, epoch) of the closest anchor so far
    for r in records:
        a = _anchor(r)
        if a is not None:
            at = (r.offset, *a)
        elif at is None:
            raise _no_anchor(topic, r.offset)
        out.append((at[1] + r.offset - at[0], at[2]))
    return out


def last_output(bootstrap: str, topic: str) -> tuple[int, int]:
    """The output sequence number and epoch of the topic's last record ((0, 0) when empty), read back
    from its tail as far as its last anchor."""
    tail = ANCHOR_SCAN
    while True:
        recs = read_partition(bootstrap, topic, tail=tail)
        if not recs:
            return 0, 0
        for r in reversed(recs):
            a = _anchor(r)
            if a is not None:
                return a[0] + recs[-1].offset - r.offset, a[1]
        if len(recs) < tail:  # the whole topic, and no anchor in it
            raise _no_anchor(topic, recs[0].offset)
        tail *= 16


def read_results(bootstrap: str, topic: str) -> list[tuple[int, str, int, bytes]]:
    """(oseq, stream, seq, payload) of every record in the results topic; a record keyed by its group (a
    window result) has its key as the stream and seq 0."""
    recs = read_partition(bootstrap, topic)
    out = []
    for r, (oseq, _) in zip(recs, oseqs_of(recs, topic), strict=True):
        key = r.key.decode()
        stream, _, seq = key.rpartition(":")
        if key.startswith("{") or not seq.isdigit():
            stream, seq = key, "0"
        out.append((oseq, stream, int(seq), r.value))
    return out


class KafkaSink(Sink):
    """Writes in order and waits for the broker before acking (Nd's Level-0 ack means "durable here").

    librdkafka (confluent-kafka), idempotent, so a retried request neither reorders nor repeats what it
    carried. A write that fails may still have landed in part: the next one first waits for the producer
    to settle and reads from the topic what it holds, and writes only what follows."""

    def __init__(self, bootstrap: str, registry: StreamRegistry, topics: Topics | None = None, *,
                 replication_factor: int = 1, group_keys: Sequence[str] = ()) -> None:
        self.bootstrap = bootstrap
        self.group_keys = list(group_keys)
        self.topics = topics or Topics()
        self.registry = registry
        ensure_topics(bootstrap, [self.topics.results], replication_factor=replication_factor)
        self.producer, self._delivered = self._producer(), DeliveryErrors()
        self._last, self._epoch = last_output(bootstrap, self.topics.results)
        self._unsure = False  # a write failed: what the topic holds must be read before the next

    def _producer(self):
        return durable_producer(self.bootstrap, **{
            "linger.ms": 1, "batch.size": 1 << 20, "queue.buffering.max.messages": 1 << 20,
            # Reports only for what failed: a Python callback per delivered output cost more than the
            # produce itself.
            "delivery.report.only.error": True,
            # A record that fails for good must stop the ones after it: a gap would shift every later
            # record's oseq (they are counted from the anchor by offset).
            "enable.gapless.guarantee": True})

    def last_epoch(self) -> int:
        return self._epoch

    def append(self, outputs: TupleBatch, *, epoch: int = 0) -> None:
        if self._unsure:
            self._settle()
        if outputs.first <= self._last:  # landed by a write that failed after part of it was written
            outputs = outputs.slice(self._last + 1, outputs.end)
        if not len(outputs):
            return
        self._epoch = max(self._epoch, epoch)
        topic = self.topics.results
        payloads = outputs.payload_list()
        if self.group_keys:
            keys = [group_key(p, self.group_keys) for p in payloads]
        else:
            names = {sid: self.registry.name_of(sid).encode() for sid in streams_present(outputs.streams)}
            keys = [b"%s:%d" % (names[sid], seq)
                    for sid, seq in zip(outputs.streams.tolist(), outputs.seqs.tolist(), strict=True)]
        try:
            self.producer.produce(topic, payloads[0], keys[0], partition=0, on_delivery=self._delivered,
                                  headers=[("oseq", b"%d" % outputs.first), ("epoch", b"%d" % self._epoch)])
            if len(payloads) > 1:
                rest = [{"value": v, "key": k} for v, k in zip(payloads[1:], keys[1:], strict=True)]
                queued = self.producer.produce_batch(topic, rest, partition=0, on_delivery=self._delivered)
                if queued != len(rest):
                    why = next((m["_error"] for m in rest if "_error" in m), "unknown")
                    raise RuntimeError(f"results topic {topic}: {len(rest) - queued} outputs refused by the "
                                       f"producer: {why}")
            self._delivered.flush(self.producer, f"results topic {topic}", "outputs", "delivered")
        except BaseException:
            self._unsure = True
            raise
        self._last = outputs.last

    def _settle(self) -> None:
        """After a failed write: wait until nothing is in flight, then take what the topic holds as the
        truth, with a fresh producer (a failed idempotent one may refuse everything after)."""
        topic = self.topics.results
        left = self.producer.flush(30)
        if left:
            raise RuntimeError(f"results topic {topic}: {left} outputs of a failed write still in flight; "
                               f"nothing more is written until they settle")
        self.producer, self._delivered = self._producer(), DeliveryErrors()  # the failed write's errors were raised
        self._last, epoch = last_output(self.bootstrap, topic)
        self._epoch = max(self._epoch, epoch)
        self._unsure = False

    def last_delivered(self) -> int:
        return self._last

    def close(self) -> None:
        self.producer.flush(10)
