"""Nu's Kafka adapters: the source streams, the link log, offset commits, and the dead-letter topic.

Each source stream is one single-partition topic (`<prefix>I1`, ...), so a record's sequence number is its
offset + 1 and a restarted Nu finds the same numbers. The order in which Nu interleaves the streams
depends on arrival timing, so Nu writes it down before any tuple leaves: the link log topic holds, per
admitted poll, the runs `(stream, first_seq, count)` at positions `first_pos..`. Offsets are committed only
for what Level-1 acks cover, with metadata naming the checkpoint (P, C), the epoch, the primary, and the
link-log offset from which a restart replays. A restarted Nu rebuilds OQu from there, position for
position, so N, N' and Nd see nothing change (seed 001: senders keep and resend from their buffer).

Operator parameter changes come through the `<prefix>control` topic as control records (stream id 0);
their payload is kept in the link log itself, so the truth-table checker knows where each took effect.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass

import numpy as np
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from ..core.acks import Checkpoint
from ..core.errors import SourceGap
from ..core.seq import StreamRegistry, partition_streams
from ..core.tuples import TupleBatch
from ..formats import control
from .base import Membership, Record, Records, Restored, Source

log = logging.getLogger(__name__)

CONTROL = "_control"


@dataclass(frozen=True)
class Topics:
    """Topic names for one deployment: the engine's own under `prefix`; a pipeline's sources and sink by
    the names its tables give (`sources`: source stream -> topic; `sink`: the results topic)."""

    prefix: str = "ls."
    sources: tuple[tuple[str, str], ...] = ()
    sink: str = ""

    @classmethod
    def of(cls, cfg) -> Topics:
        """The topics a node's settings name (NodeConfig: topic_prefix and the pipeline's tables)."""
        spec = cfg.pipeline_spec
        return cls(cfg.topic_prefix) if spec is None else cls.of_pipeline(cfg.topic_prefix, spec)

    @classmethod
    def of_pipeline(cls, prefix: str, spec) -> Topics:
        """The topics of a pipeline (formats/pipeline.Pipeline): its tables' and sink's, a view's under
        `prefix` (the stage that writes it, and each that reads it), the engine's own under `prefix` (a
        stage's of several under its own part of it)."""
        def own(table: str, topic: str) -> str:
            return prefix + topic if table in spec.views else topic

        # The last stage's results, where the file names no sink, go where a pipeline's of one stage do.
        sink = own(spec.sink_name, spec.sink_topic) or (f"{prefix}results" if spec.stage_prefix else "")
        return cls(prefix + spec.stage_prefix, tuple((t.table, own(t.table, t.topic)) for t in spec.sources), sink)

    def source(self, stream: str) -> str:
        named = dict(self.sources).get(stream)
        return named if named is not None else f"{self.prefix}{stream}"

    @property
    def control(self) -> str:
        return f"{self.prefix}control"

    @property
    def linklog(self) -> str:
        return f"{self.prefix}linklog"

    @property
    def results(self) -> str:
        return self.sink or f"{self.prefix}results"

    @property
    def deadletters(self) -> str:
        return f"{self.prefix}deadletters"

    @property
    def late(self) -> str:
        """A window query's late ticks (behind the watermark at their position), as dead letters are kept."""
        return f"{self.prefix}late"


# The broker stamps arrival time on what the pipeline creates: time-based retention then counts from when a
# record arrived, never from a producer's event time (ticks stamped a year ago were deleted within the
# five-minute retention check, before anyone had read them).
TOPIC_CONFIGS = {"message.timestamp.type": "LogAppendTime"}


def ensure_topics(bootstrap: str, names: list[str], *, partitions: dict[str, int] | None = None,
                  replication_factor: int = 1) -> None:
    """Create the topics that do not exist yet: one partition each (ordering), except those `partitions`
    names (the source topics), with `replication_factor` replicas. A topic in `partitions` that exists
    with another partition count is an error (ValueError naming it): reading part of it would pass off
    part of a stream as the whole."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    partitions = partitions or {}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        existing = set(admin.list_topics())
        new = [NewTopic(n, num_partitions=partitions.get(n, 1), replication_factor=replication_factor,
                        topic_configs=dict(TOPIC_CONFIGS))
               for n in names if n not in existing]
        if new:
            try:
                admin.create_topics(new)
            except TopicAlreadyExistsError:
                pass
        check = [n for n in partitions if n in existing]
        if check:
            for t in admin.describe_topics(check):
                have = len(t.get("partitions", []))
                if have != partitions[t["name"]]:
                    raise ValueError(f"topic {t['name']} has {have} partitions; this pipeline is set to "
                                     f"{partitions[t['name']]} (setting partitions, LS_PARTITIONS): every partition "
                                     f"is a stream of its own, and a part of a topic is not the stream")
    finally:
        admin.close()


def durable_producer(bootstrap: str, **settings):
    """librdkafka's producer for what the pipeline writes itself (link log, dead letters, results):
    acknowledged by every in-sync replica, idempotent (a retried request neither reorders nor repeats), no
    lingering unless `settings` (librdkafka's names) say otherwise. For Nu's records it replaced
    kafka-python's producer, which kept a network thread of its own busy in Nu's interpreter: about an
    eighth of Nu's Python samples at 120 k tuples/s, for one small record per poll."""
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 0, "message.send.max.retries": 10, **settings})


class DeliveryErrors:
    """A producer's `on_delivery` callback that keeps the failures, and the flush that reports them: what
    was produced is either in the topic when `flush` returns, or `flush` raises."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def __call__(self, err, _msg) -> None:
        if err is not None:
            self.errors.append(str(err))

    def flush(self, producer, where: str, records: str, verb: str, timeout: float = 30.0) -> None:
        """Waits for `producer`; RuntimeError "<where>: <n> <records> not <verb> within .." when something
        is still waiting after `timeout` or a delivery failed since the last flush."""
        left = producer.flush(timeout)
        if left or self.errors:
            errors, self.errors = self.errors, []
            raise RuntimeError(f"{where}: {left} {records} not {verb} within {timeout:.0f} s; errors: {errors[:3]}")


def produce_and_wait(producer, topic: str, value: bytes, *, timeout: float = 30.0) -> int:
    """Writes one record to partition 0 of `topic` and waits until the broker holds it; returns its offset.
    Raises RuntimeError, naming the topic, when it is refused or not acknowledged within `timeout`."""
    result: list = []
    producer.produce(topic, value, partition=0, on_delivery=lambda err, msg: result.append((err, msg)))
    left = producer.flush(timeout)
    if left or not result or result[0][0] is not None:
        why = result[0][0] if result else f"not acknowledged within {timeout:.0f} s"
        raise RuntimeError(f"{topic}: a record of {len(value)} bytes was not written: {why}")
    return result[0][1].offset()


def check_retained(consumer: KafkaConsumer, tp: TopicPartition, offset: int) -> None:
    """Raise SourceGap when `offset` of `tp` is no longer held by the broker."""
    begin = consumer.beginning_offsets([tp])[tp]
    if offset < begin:
        raise _deleted(tp.topic, offset, begin)


def _deleted(topic: str, offset: int, begin: int) -> SourceGap:
    return SourceGap(f"{topic}: records at offsets {offset}..{begin - 1} (seq {offset + 1}..{begin}) were "
                     f"deleted by the broker (retention or truncation) and cannot be read")


def all_topics(topics: Topics, streams: list[str]) -> list[str]:
    return [*(topics.source(s) for s in streams), topics.control, topics.linklog, topics.results,
            topics.deadletters, topics.late]


def _nus_own(run: list) -> bool:
    """A link-log run that Nu made itself (a window query's watermark record): it comes from no topic, and
    its seq is its position, not an offset of the control topic."""
    return run[0] == CONTROL and control.watermark_of(run[3]) is not None


def runs_of(batch: TupleBatch, names: dict[int, str]) -> list[list]:
    """Maximal runs of consecutive positions on one stream with consecutive seqs: [stream, first_seq, count],
    and for control records [_control, seq, 1, payload]."""
    n = len(batch)
    if not n:
        return []
    s, q = batch.streams, batch.seqs
    control = s == StreamRegistry.CONTROL
    breaks = (s[1:] != s[:-1]) | (q[1:] != q[:-1] + 1) | control[1:] | control[:-1]
    starts = [0, *(np.flatnonzero(breaks) + 1).tolist(), n]
    runs: list[list] = []
    for a, b in zip(starts, starts[1:], strict=False):
        sid, seq = int(s[a]), int(q[a])
        if sid == StreamRegistry.CONTROL:
            runs.append([CONTROL, seq, 1, batch.payload(a).decode()])
        else:
            runs.append([names[sid], seq, b - a])
    return runs


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """A record as `read_partition` returns it: its offset, key, value, headers ((name, bytes) pairs) and
    timestamp (ms since the epoch, the producer's or the broker's as the topic says)."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: list
    timestamp: int


def read_partition(bootstrap: str, topic: str, start: int = 0, timeout: float = 60.0, *, tail: int = 0,
                   partition: int = 0) -> list[TopicRecord]:
    """Every record of partition `partition` of `topic` from offset `start` (or, with `tail`, the last
    `tail` records) to the end it has now. Raises SourceGap if the broker no longer holds `start`.

    Through librdkafka (confluent-kafka), which parses record batches in C: the checks read every source
    record and every result of a run with it. An empty poll is not the end (a busy broker can take
    seconds to answer): only the end offset is.
    """
    from confluent_kafka import Consumer, KafkaError
    from confluent_kafka import TopicPartition as CTopicPartition

    # No reset policy: a position the broker dropped must be an error here, never a silent jump. No
    # commits, so the group names nothing the broker keeps.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lazystandby-read-partition",
                  "enable.auto.commit": False, "auto.offset.reset": "error",
                  "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 8 << 20,
                  # A reader of a whole partition: prefetch as much as a fetch brings, and no waiting for more.
                  "queued.min.messages": 1_000_000, "fetch.wait.max.ms": 10})
    out: list[TopicRecord] = []
    try:
        begin, end = watermarks(c, CTopicPartition(topic, partition), time.monotonic() + timeout)
        if tail:
            start = max(begin, end - tail)
        if end <= start:
            return out
        if start < begin:
            raise _deleted(topic, start, begin)
        c.assign([CTopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (not out or out[-1].offset < end - 1):
            for msg in c.consume(num_messages=100_000, timeout=0.5):
                err = msg.error()
                if err is None:
                    out.append(TopicRecord(msg.offset(), msg.key(), msg.value(), msg.headers() or [],
                                           msg.timestamp()[1]))
                elif err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    raise SourceGap(f"{topic}: offset {start} was deleted while being read ({err.str()})")
                else:  # a transient one (librdkafka retries it), said
                    log.warning("reading %s: %s", topic, err.str())
    finally:
        c.close()
    if not out or out[-1].offset < end - 1:
        raise TimeoutError(f"{topic}: read {len(out)} of {end - start} records in {timeout}s")
    return out


# What a partition's offsets query meets while the partition has no leader yet (a topic just made, a
# broker that restarts, metadata not yet spread): it clears within seconds, so the query is asked again.
_LEADERLESS = frozenset({"NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PART",
                         "_UNKNOWN_PARTITION", "_TRANSPORT"})


def watermarks(consumer, tp, deadline: float, pause: float = 0.2) -> tuple[int, int]:
    """(first, end) offsets of partition `tp`, through a confluent-kafka `consumer`. A leaderless
    partition's error is asked again until `deadline` (time.monotonic()); any other error, or the last
    leaderless one at the deadline, is raised as librdkafka gave it."""
    from confluent_kafka import KafkaError, KafkaException

    leaderless = {getattr(KafkaError, name) for name in _LEADERLESS if hasattr(KafkaError, name)}
    while True:
        left = deadline - time.monotonic()
        try:
            return consumer.get_watermark_offsets(tp, timeout=max(left, 0.1))
        except KafkaException as e:
            err = e.args[0]  # confluent-kafka raises its KafkaException with the KafkaError as its argument
            if err.code() not in leaderless or time.monotonic() + pause >= deadline:
                raise
            log.info("offsets of %s[%d]: %s; asking again", tp.topic, tp.partition, err.str())
            time.sleep(pause)


def read_linklog(bootstrap: str, topics: Topics, start: int = 0) -> list[tuple[int, dict]]:
    """(log offset, entry) for every link-log entry from `start` to the current end."""
    return [(r.offset, json.loads(r.value)) for r in read_partition(bootstrap, topics.linklog, start)]


def fetch_range(consumer: KafkaConsumer, topic: str, first_seq: int, count: int, partition: int = 0) -> list[bytes]:
    """Payloads of records with seq first_seq .. first_seq+count-1 (offset = seq - 1) of one partition."""
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    check_retained(consumer, tp, first_seq - 1)
    consumer.seek(tp, first_seq - 1)
    out: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(out) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: records {first_seq}..{first_seq + count - 1} cannot be read back")
        got = consumer.poll(timeout_ms=1000, max_records=count - len(out))
        out.extend(r.value for r in got.get(tp, []))
    return out[:count]


class KafkaSource(Source):
    """Consumes the source topics (and the control topic), keeps the link log, commits covered offsets."""

    def __init__(self, bootstrap: str, streams: list[str], *, topics: Topics | None = None,
                 group: str = "", poll_ms: int = 50, commit_interval: float = 0.2, partitions: int = 1,
                 replication_factor: int = 1) -> None:
        self.bootstrap = bootstrap
        self.streams = streams
        self.topics = topics or Topics()
        # One consumer group per deployment (topic prefix): its commits hold this pipeline's checkpoint.
        self.group = group or f"lazystandby-nu-{self.topics.prefix.rstrip('.')}"
        self.poll_ms = poll_ms
        # Each partition of a source topic is a stream of the link order (config.partition_streams names it).
        self.link_streams = partition_streams(streams, partitions)
        self._by_tp = {TopicPartition(self.topics.source(s), p): name
                       for s in streams for p, name in enumerate(partition_streams([s], partitions))}
        self._by_tp[TopicPartition(self.topics.control, 0)] = CONTROL
        self._tp_of = {name: tp for tp, name in self._by_tp.items()}
        self._tps = list(self._by_tp)
        ensure_topics(bootstrap, all_topics(self.topics, streams),
                      partitions={self.topics.source(s): partitions for s in streams},
                      replication_factor=replication_factor)
        # No reset policy: if the broker drops records Nu has not read yet, poll raises and Nu stops there
        # (SourceGap) instead of jumping to whatever is left. A fresh deployment starts at the beginning.
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=self.group, enable_auto_commit=False,
                                      auto_offset_reset="none", max_partition_fetch_bytes=8 << 20)
        # KafkaConsumer is not thread-safe: the source thread polls it, the committer thread commits through
        # it and measures lag; every use goes through this lock (a poll holds it for at most poll_ms).
        self._consumer_lock = threading.Lock()
        self.consumer.assign(self._tps)
        for tp in self._tps:
            if self.consumer.committed(tp) is None:
                self.consumer.seek_to_beginning(tp)
        self.producer = durable_producer(bootstrap)
        # (first_pos, last_pos, log offset, per-stream last seq after the entry)
        self._entries: deque[tuple[int, int, int, dict[str, int]]] = deque()
        self._last_seqs: dict[str, int] = {}
        # (checkpoint, membership, trim point): what the next commit records, and what the last one did.
        self._pending: tuple[Checkpoint, Membership, int] | None = None
        self._committed: tuple[Checkpoint, Membership, int] | None = None
        self._commit_error = ""
        self._done = threading.Condition()  # signalled when a commit lands
        self._wake = threading.Event()
        self._covered_seqs: dict[str, int] = {}
        self._controls: list[tuple[int, str]] = []  # (position, payload) of every control record admitted
        self._log_next = 0  # the link-log offset after the last entry a commit has covered
        self._lag: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._commit_interval = commit_interval
        self._fast = None  # the data path's consumer, made at the first poll (after restore)
        self._positions: dict[TopicPartition, int] = {}
        self._committer = threading.Thread(target=self._commit_loop, name="kafka-commit", daemon=True)
        self._committer.start()

    def origin(self, stream: str) -> tuple[str, int] | None:
        """The topic and partition stream `stream` is read from (a record's offset is its seq - 1)."""
        tp = self._tp_of.get(stream)
        return (tp.topic, tp.partition) if tp is not None else None

    # --- restart ---------------------------------------------------------------------------------------
    def restore(self) -> Restored | None:
        committed = {tp: self.consumer.committed(tp, metadata=True) for tp in self._tps}
        meta = next((json.loads(m.metadata) for m in committed.values() if m and m.metadata), None)
        start_log = meta["log"] if meta else 0
        entries = read_linklog(self.bootstrap, self.topics, start_log)
        if not entries and not meta:
            return None
        ckpt = Checkpoint(meta["pos"], meta["count"]) if meta else Checkpoint()
        trimmed = meta.get("trim", meta["pos"]) if meta else 0
        h_streams: list[int] = []
        h_seqs: list[int] = []
        h_payloads: list[bytes] = []
        reader = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, auto_offset_reset="none")
        last_seqs: dict[str, int] = dict(meta.get("seqs", {})) if meta else {}
        reg = StreamRegistry(self.link_streams)
        for off, e in entries:
            pos = e["first_pos"]
            for run in e["runs"]:
                stream, first_seq, count = run[0], run[1], run[2]
                payloads = ([run[3].encode()] if stream == CONTROL
                            else fetch_range(reader, self._tp_of[stream].topic, first_seq, count,
                                             self._tp_of[stream].partition))
                for i, p in enumerate(payloads):
                    if pos + i > trimmed:
                        h_streams.append(reg.id_of(stream))
                        h_seqs.append(first_seq + i)
                        h_payloads.append(p)
                pos += count
                if not _nus_own(run):
                    last_seqs[stream] = first_seq + count - 1
            self._entries.append((e["first_pos"], pos - 1, off, dict(last_seqs)))
        reader.close()
        held = TupleBatch(trimmed + 1, h_streams, h_seqs, h_payloads)
        self._last_seqs = last_seqs
        # Consume each topic after the last record the link log holds (dead letters after it come again).
        for tp in self._tps:
            name = self._by_tp[tp]
            if name in last_seqs:
                self.consumer.seek(tp, last_seqs[name])
            elif committed.get(tp) is not None:
                self.consumer.seek(tp, committed[tp].offset)
        data_seqs = {k: v for k, v in last_seqs.items() if k != CONTROL}
        return Restored(checkpoint=ckpt, epoch=meta["epoch"] if meta else 1,
                        primary=meta["primary"] if meta else "", held=held, last_seqs=data_seqs,
                        standby=meta.get("standby") if meta else None,
                        params=(meta["params"][0], meta["params"][1].encode()) if meta and meta.get("params") else None)

    # --- normal operation ------------------------------------------------------------------------------
    def _data_consumer(self):
        """The consumer of the data path: librdkafka's (confluent-kafka), assigned where kafka-python's
        consumer stands after `restore` (which owns the commits, the restart state and the lag). kafka-python
        built several Python objects per record and held Nu to about 45 k records/s."""
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as CTopicPartition

        with self._consumer_lock:
            starts = {tp: self.consumer.position(tp) for tp in self._tps}
        fast = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"{self.group}-data",
                         "enable.auto.commit": False, "auto.offset.reset": "error",
                         "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 8 << 20,
                         "queued.min.messages": 200_000})
        fast.assign([CTopicPartition(tp.topic, tp.partition, starts[tp]) for tp in self._tps])
        self._positions = dict(starts)
        self._by_key = {(tp.topic, tp.partition): tp for tp in self._tps}
        return fast

    def poll(self, max_records: int) -> Records:
        from confluent_kafka import KafkaError

        if self._fast is None:
            self._fast = self._data_consumer()
        # consume() waits until it has max_records or the timeout passes: what is there now, else a short wait
        # (a long one would hold back a trickle of records for the whole of it).
        msgs = self._fast.consume(num_messages=max_records, timeout=0)
        if not msgs:
            msgs = self._fast.consume(num_messages=max_records, timeout=min(self.poll_ms, 5) / 1000)
        by_tp: dict[TopicPartition, tuple[list[int], list[bytes]]] = {}
        for msg in msgs:
            err = msg.error()
            tp = self._by_key.get((msg.topic(), msg.partition()))
            if err is not None:
                if err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE) and tp is not None:
                    raise SourceGap(f"records not yet read were deleted by the broker (retention or truncation): "
                                    f"{tp.topic} from seq {self._positions[tp] + 1} (partition {tp.partition}); "
                                    f"Nu stops admitting here rather than skip them")
                log.warning("Kafka source: %s", err)
                continue
            offsets, values = by_tp.setdefault(tp, ([], []))
            offsets.append(msg.offset() + 1)
            values.append(msg.value() or b"")
        parts = []
        for tp in self._tps:  # a fixed topic order within one poll; the link log records what it was
            if tp in by_tp:
                seqs, values = by_tp[tp]
                self._positions[tp] = seqs[-1]
                parts.append(Records([self._by_tp[tp]], np.zeros(len(seqs), np.int64), seqs, values))
        return Records.concat(parts)

    def record_order(self, batch: TupleBatch, names: dict[int, str]) -> None:
        runs = runs_of(batch, names)
        pos = batch.first
        for r in runs:
            if r[0] == CONTROL:
                with self._lock:
                    self._controls.append((pos, r[3]))
            pos += r[2]
        entry = json.dumps({"first_pos": batch.first, "runs": runs}).encode()
        offset = produce_and_wait(self.producer, self.topics.linklog, entry)
        with self._lock:
            for r in runs:
                if not _nus_own(r):
                    self._last_seqs[r[0]] = r[1] + r[2] - 1
            self._entries.append((batch.first, batch.last, offset, dict(self._last_seqs)))

    def covered(self, checkpoint: Checkpoint, members: Membership, trimmed_through: int | None = None) -> None:
        trimmed = checkpoint.input_pos if trimmed_through is None else min(trimmed_through, checkpoint.input_pos)
        with self._lock:
            self._pending = (checkpoint, members, trimmed)

    def record_membership(self, members: Membership, timeout: float = 10.0) -> None:
        """Committed with the offsets, by the committer thread (the one that owns commits), woken at once;
        returns once the broker has it."""
        with self._lock:
            last = self._pending or self._committed
            ckpt, trimmed = (last[0], last[2]) if last else (Checkpoint(), 0)
            want = self._pending = (ckpt, members, trimmed)
        self._wake.set()
        with self._done:
            if not self._done.wait_for(lambda: self._committed == want, timeout):
                raise TimeoutError(f"the takeover to epoch {members.epoch} could not be recorded in Kafka within "
                                   f"{timeout}s{': ' + self._commit_error if self._commit_error else ''}")

    def _commit_loop(self) -> None:
        n = 0
        while not self._stop.is_set():
            self._wake.wait(self._commit_interval)
            self._wake.clear()
            self.commit_now()
            n += 1
            if n % 5 == 0:
                self._measure_lag()

    def commit_now(self) -> None:
        with self._lock:
            # Skipped only when nothing changed: a takeover with the checkpoint standing still is a change.
            if self._pending is None or self._pending == self._committed:
                return
            state = self._pending
            ckpt, members, trimmed = state
            # The per-stream seqs and the restart offset move together, as entries are dropped, whether or
            # not the commit below succeeds: a restart must never pair a new offset with older seqs. Entries
            # are kept after the trim point, not the checkpoint: a restarted Nu holds what open windows need.
            while self._entries and self._entries[0][1] <= trimmed:
                _, _, off, self._covered_seqs = self._entries.popleft()
                self._log_next = off + 1
            seqs = dict(self._covered_seqs)
            # A restart replays the link log from the first entry not fully covered; when every entry is
            # covered, from just past the last one.
            log_from = self._entries[0][2] if self._entries else self._log_next
            params = next((c for c in reversed(self._controls) if c[0] <= trimmed), None)
            meta = json.dumps({"pos": ckpt.input_pos, "count": ckpt.output_count, "trim": trimmed,
                               "epoch": members.epoch,
                               "primary": members.primary, "standby": members.standby, "log": log_from,
                               "seqs": seqs or {}, "params": params})
        offsets = {}
        for tp in self._tps:
            name = self._by_tp[tp]
            if name in seqs:
                offsets[tp] = OffsetAndMetadata(seqs[name], meta, -1)
        if not offsets:
            # Nothing fully covered yet on any topic: still record the checkpoint on the first one.
            with self._consumer_lock:
                committed = self.consumer.committed(self._tps[0]) or 0
            offsets[self._tps[0]] = OffsetAndMetadata(committed, meta, -1)
        try:
            with self._consumer_lock:
                self.consumer.commit(offsets)
        except Exception as e:  # a failed commit is retried next round; it never blocks the pipeline
            log.warning("offset commit failed: %s", e)
            self._commit_error = str(e)
            return
        with self._done:
            self._committed, self._commit_error = state, ""
            self._done.notify_all()

    def lag(self) -> dict[str, int]:
        return dict(self._lag)

    def _measure_lag(self) -> None:
        try:
            with self._consumer_lock:
                ends = self.consumer.end_offsets(self._tps)
                positions = dict(self._positions) or {tp: self.consumer.position(tp) for tp in self._tps}
            self._lag = {self._by_tp[tp]: max(0, ends[tp] - positions[tp])
                         for tp in self._tps if self._by_tp[tp] != CONTROL}
        except Exception as e:  # monitoring only: never disturbs the pipeline
            log.debug("lag measurement failed: %s", e)

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._committer.join(timeout=2)
        with self._consumer_lock:
            self.consumer.close()
        if self._fast is not None:
            self._fast.close()
        self.producer.flush(5)


def topic_limit(bootstrap: str, topic: str, timeout: float = 10.0) -> int | None:
    """The largest record `topic` accepts (its `max.message.bytes`, which is the broker's
    `message.max.bytes` unless the topic overrides it), or None when the broker does not say in time."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        res = ConfigResource(ResourceType.TOPIC, topic)
        configs = admin.describe_configs([res], request_timeout=timeout)[res].result(timeout)
        return int(configs["max.message.bytes"].value)
    except Exception as e:  # the caller falls back to a limit every broker accepts
        log.warning("%s: the record size limit could not be read (%s)", topic, e)
        return None


class KafkaDeadLetters:
    """Refused records go to `<prefix>deadletters`, keyed by stream:seq, with headers naming the reason, the
    source topic, partition and offset, and the record's size; a payload larger than the topic takes is cut
    to fit (header `truncated`).

    Writing a dead letter never ends Nu's source loop: a dead letter that cannot be written (refused, or not
    acknowledged within `flush_timeout`) is counted in `unwritten`, and logged once per reason. The limit is
    read from the topic at `open` (Nu's start; an operator node's first quarantined input), and the producer
    is sized to it (librdkafka's own default, 1,000,000 bytes, is below the broker's)."""

    # What a record costs besides its payload, key and header values: the batch and record framing
    # (about 70 bytes), header names and varints. Kept generous: a cut only needs to fit.
    OVERHEAD = 512
    FALLBACK_LIMIT = 1_000_000  # librdkafka's default message.max.bytes, below every broker's default

    def __init__(self, bootstrap: str, topics: Topics | None = None, *,
                 origin=None, flush_timeout: float = 30.0, topic: str = "") -> None:
        self.bootstrap = bootstrap
        self.topics = topics or Topics()
        self.topic = topic or self.topics.deadletters  # where they go (the late ticks' topic uses this class too)
        # stream name -> (topic, partition) of the record's source, for the headers (None: not known)
        self.origin = origin or (lambda stream: None)
        self.flush_timeout = flush_timeout
        self.producer = None
        self.limit = 0
        self.count = 0  # dead letters put
        self.truncated = 0
        self.unwritten = 0  # refused by the producer or the broker (including after the producer's timeout)
        self.waiting = 0  # not acknowledged at the last flush; still retried by the producer
        self._reasons_logged: set[str] = set()
        self._delivered = DeliveryErrors()

    def open(self) -> None:
        """Reads the topic's record limit and sizes the producer to it (Nu at start; else the first put)."""
        if self.producer is not None:
            return
        limit = topic_limit(self.bootstrap, self.topic) or self.FALLBACK_LIMIT
        self.limit = max(self.OVERHEAD * 2, min(limit, 1_000_000_000))  # librdkafka's ceiling
        self.producer = durable_producer(self.bootstrap, **{"message.max.bytes": self.limit})

    def headers(self, reason: str, record: Record, truncated: bool) -> list[tuple[str, bytes]]:
        h = [("reason", reason.encode()[:4096]), ("stream", record.stream.encode()), ("seq", str(record.seq).encode()),
             ("original_size", str(len(record.payload)).encode()), ("truncated", b"1" if truncated else b"0")]
        where = self.origin(record.stream)
        if where is not None:
            topic, partition = where
            # A source stream's seq is its offset + 1 (one stream per topic partition).
            h += [("topic", topic.encode()), ("partition", str(partition).encode()),
                  ("offset", str(record.seq - 1).encode())]
        return h

    def put(self, reason: str, record: Record) -> None:
        if self.producer is None:
            self.open()
        key = f"{record.stream}:{record.seq}".encode()
        fixed = len(key) + sum(len(k) + len(v) for k, v in self.headers(reason, record, True)) + self.OVERHEAD
        room = max(0, self.limit - fixed)
        truncated = len(record.payload) > room
        self.count += 1
        self.truncated += truncated
        try:
            self.producer.produce(self.topic, record.payload[:room], key,
                                  headers=self.headers(reason, record, truncated), on_delivery=self._delivered)
        except Exception as e:  # BufferError (queue full), KafkaException (refused at once)
            self._unwritten(1, f"{type(e).__name__}: {e}")

    def flush(self) -> None:
        """Waits up to `flush_timeout` for the dead letters put so far to be in the topic. Those refused are
        counted (`unwritten`), those not acknowledged yet (`waiting`) stay with the producer, which retries
        them; nothing is raised: a dead letter never stops Nu."""
        if self.producer is None or (not len(self.producer) and not self._delivered.errors):
            return  # nothing waiting (the source loop asks after every poll)
        left = self.producer.flush(self.flush_timeout)
        errors, self._delivered.errors = self._delivered.errors, []
        for e in errors:
            self._unwritten(1, e)
        self.waiting = left
        if left and "waiting" not in self._reasons_logged:
            # Still queued: librdkafka retries them until its message timeout, then reports each (counted
            # above, at a later flush, if it failed).
            self._reasons_logged.add("waiting")
            log.error("%s: %d dead letter(s) not acknowledged within %.0f s; the producer keeps retrying (logged "
                      "once)", self.topic, left, self.flush_timeout)

    def _unwritten(self, n: int, why: str) -> None:
        self.unwritten += n
        reason = why.split(":")[0]
        if reason not in self._reasons_logged:
            self._reasons_logged.add(reason)
            log.error("%s: %d dead letter(s) not written: %s (counted as dead_letters_unwritten; logged once "
                      "per reason)", self.topic, n, why)

    def close(self) -> None:
        if self.producer is not None:
            self.flush()
