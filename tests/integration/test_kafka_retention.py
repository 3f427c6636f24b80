"""Records the broker no longer holds: the pipeline's topics never put fresh records under retention, and a
reader or Nu that needs deleted records says so (SourceGap) instead of silently starting after them."""

import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from lazystandby.core.errors import SourceGap
from lazystandby.sources.kafka_source import KafkaSource, Topics, ensure_topics, fetch_range, read_partition

YEAR_AGO_MS = int((time.time() - 365 * 86400) * 1000)


def _produce(bootstrap: str, topic: str, n: int, *, timestamp_ms: int | None = None) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(n):
        p.send(topic, f"ACME,{100 + i}.5,100,1,XTKS".encode(), partition=0, timestamp_ms=timestamp_ms)
    p.flush()
    p.close()


def _delete_before(bootstrap: str, topic: str, offset: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_records({TopicPartition(topic, 0): offset})
    finally:
        admin.close()


@pytest.fixture
def topics(kafka):
    t = Topics(f"r{uuid.uuid4().hex[:10]}.")
    ensure_topics(kafka, [t.source("I1"), t.control, t.linklog])
    return t


def test_topics_the_pipeline_creates_stamp_arrival_time_not_event_time(kafka, topics):
    # Event times a year old under CreateTime fall to the 7-day retention at the next check (5 minutes).
    _produce(kafka, topics.source("I1"), 3, timestamp_ms=YEAR_AGO_MS)
    got = read_partition(kafka, topics.source("I1"))
    assert len(got) == 3
    assert all(r.timestamp > time.time() * 1000 - 600_000 for r in got), [r.timestamp for r in got]


def test_read_partition_refuses_to_start_after_deleted_records(kafka, topics):
    topic = topics.source("I1")
    _produce(kafka, topic, 10)
    _delete_before(kafka, topic, 4)
    with pytest.raises(SourceGap, match=r"offsets 0\.\.3 .*deleted"):
        read_partition(kafka, topic)
    assert [r.offset for r in read_partition(kafka, topic, start=4)] == list(range(4, 10))
    assert [r.offset for r in read_partition(kafka, topic, tail=20)] == list(range(4, 10))


def test_restart_read_back_of_deleted_records_is_a_source_gap(kafka, topics):
    topic = topics.source("I1")
    _produce(kafka, topic, 10)
    _delete_before(kafka, topic, 6)
    c = KafkaConsumer(bootstrap_servers=kafka, enable_auto_commit=False, auto_offset_reset="none")
    try:
        with pytest.raises(SourceGap, match=r"seq 3\.\.6"):
            fetch_range(c, topic, 3, 5)
        assert fetch_range(c, topic, 7, 4) == [f"ACME,{100 + i}.5,100,1,XTKS".encode() for i in range(6, 10)]
    finally:
        c.close()


def _poll_all(src: KafkaSource, n: int) -> list:
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        got += src.poll(100)
    return got


def test_a_fresh_deployment_starts_where_the_topic_begins(kafka, topics):
    topic = topics.source("I1")
    _produce(kafka, topic, 10)
    _delete_before(kafka, topic, 5)
    src = KafkaSource(kafka, ["I1"], topics=topics, group=f"g-{uuid.uuid4().hex[:8]}")
    try:
        assert [r.seq for r in _poll_all(src, 5)] == [6, 7, 8, 9, 10]
    finally:
        src.close()


def test_nu_source_stops_at_records_deleted_before_it_read_them(kafka, topics):
    topic = topics.source("I1")
    _produce(kafka, topic, 10)
    group = f"g-{uuid.uuid4().hex[:8]}"
    # This deployment had read through seq 2 (committed offset 2) when seqs 3..7 were deleted.
    c = KafkaConsumer(bootstrap_servers=kafka, group_id=group, enable_auto_commit=False)
    from kafka.structs import OffsetAndMetadata
    c.commit({TopicPartition(topic, 0): OffsetAndMetadata(2, "", -1)})
    c.close()
    _delete_before(kafka, topic, 7)
    src = KafkaSource(kafka, ["I1"], topics=topics, group=group)
    try:
        with pytest.raises(SourceGap, match=r"I1 from seq 3"):
            _poll_all(src, 1)
    finally:
        src.close()


def test_read_partition_says_so_when_records_are_deleted_while_it_reads(kafka, topics, monkeypatch):
    """The records go between the look at the partition's start and the first fetch: a SourceGap, not a
    read that starts after them."""
    import confluent_kafka

    topic = topics.source("I1")
    _produce(kafka, topic, 10)

    class DeletedOnAssign(confluent_kafka.Consumer):
        def assign(self, partitions):
            _delete_before(kafka, topic, 5)
            super().assign(partitions)

    monkeypatch.setattr(confluent_kafka, "Consumer", DeletedOnAssign)
    with pytest.raises(SourceGap, match="deleted while being read"):
        read_partition(kafka, topic, timeout=20)


def test_read_partition_gives_keys_values_and_headers_as_written(kafka, topics):
    topic = topics.source("I1")
    p = KafkaProducer(bootstrap_servers=kafka, acks="all")
    for i in range(3):
        p.send(topic, f"v{i}".encode(), key=f"k{i}".encode(), headers=[("oseq", str(i).encode())], partition=0)
    p.send(topic, b"no key", partition=0)
    p.flush()
    p.close()
    got = read_partition(kafka, topic)
    assert [(r.offset, r.key, r.value) for r in got] == [(0, b"k0", b"v0"), (1, b"k1", b"v1"), (2, b"k2", b"v2"),
                                                         (3, None, b"no key")]
    assert [dict(r.headers) for r in got] == [{"oseq": b"0"}, {"oseq": b"1"}, {"oseq": b"2"}, {}]
    assert read_partition(kafka, topic, start=4) == []
    assert [r.offset for r in read_partition(kafka, topic, tail=2)] == [2, 3]
