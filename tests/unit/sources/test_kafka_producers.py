"""Nu's own Kafka records (link log, dead letters) through librdkafka's producer: what the caller learns
when the broker refuses or does not answer. A fake producer stands in for the broker here; the real one
runs in tests/integration/test_kafka_pipeline.py (restart of Nu, dead letters)."""

from __future__ import annotations

import pytest

from lazystandby.sources import kafka_source
from lazystandby.sources.base import Record


class _Msg:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset


class FakeProducer:
    """Queues records; `flush` delivers them as told: an offset each, an error, or nothing (a timeout)."""

    def __init__(self, outcome: str = "ok", first_offset: int = 41) -> None:
        self.outcome = outcome
        self.next_offset = first_offset
        self.queued: list[tuple[str, bytes, object]] = []
        self.written: list[tuple[str, bytes]] = []
        self.flushes = 0

    def produce(self, topic, value, key=None, *, partition=0, on_delivery=None, headers=None) -> None:
        self.queued.append((topic, value, on_delivery))

    def __len__(self) -> int:
        return len(self.queued)

    def flush(self, timeout: float) -> int:
        self.flushes += 1
        if self.outcome == "timeout":
            return len(self.queued)
        for topic, value, cb in self.queued:
            if self.outcome == "ok":
                self.written.append((topic, value))
                cb(None, _Msg(self.next_offset))
                self.next_offset += 1
            else:
                cb("Broker: Not enough in-sync replicas", None)
        self.queued = []
        return 0


def test_produce_and_wait_returns_the_offset_the_broker_gave():
    p = FakeProducer(first_offset=41)
    assert kafka_source.produce_and_wait(p, "ls.linklog", b"entry") == 41
    assert kafka_source.produce_and_wait(p, "ls.linklog", b"next") == 42
    assert p.written == [("ls.linklog", b"entry"), ("ls.linklog", b"next")]


@pytest.mark.parametrize("outcome, why", [("error", "Not enough in-sync replicas"),
                                          ("timeout", "not acknowledged within 3 s")])
def test_produce_and_wait_raises_naming_the_topic_when_the_record_is_not_written(outcome, why):
    with pytest.raises(RuntimeError, match=rf"ls\.linklog: a record of 5 bytes was not written: .*{why}"):
        kafka_source.produce_and_wait(FakeProducer(outcome), "ls.linklog", b"entry", timeout=3)


def _dead_letters(monkeypatch, producer: FakeProducer, limit: int | None = 16 << 20) -> kafka_source.KafkaDeadLetters:
    made: list[dict] = []

    def durable(bootstrap, **settings):
        made.append(settings)
        return producer

    monkeypatch.setattr(kafka_source, "durable_producer", durable)
    monkeypatch.setattr(kafka_source, "topic_limit", lambda bootstrap, topic: limit)
    dl = kafka_source.KafkaDeadLetters("127.0.0.1:9", origin=lambda s: ("ls.I1", 0) if s == "I1" else None)
    dl.made = made
    return dl


def test_dead_letters_flush_waits_for_the_broker_and_skips_when_nothing_waits(monkeypatch):
    p = FakeProducer()
    dl = _dead_letters(monkeypatch, p)
    dl.flush()
    assert p.flushes == 0  # asked after every poll: nothing put, nothing to wait for
    dl.put("not a tick", Record("I1", 7, b"garbage"))
    dl.flush()
    assert p.written == [("ls.deadletters", b"garbage")] and dl.count == 1 and dl.unwritten == 0
    assert dl.made == [{"message.max.bytes": 16 << 20}]  # the producer is sized to the topic's limit


@pytest.mark.parametrize("outcome", ["error", "timeout"])
def test_dead_letters_that_cannot_be_written_are_counted_and_never_raise(monkeypatch, outcome, caplog):
    dl = _dead_letters(monkeypatch, FakeProducer(outcome))
    for seq in (7, 8):
        dl.put("not a tick", Record("I1", seq, b"garbage"))
        dl.flush()  # never raises: Nu's source loop goes on
    if outcome == "error":
        assert dl.unwritten == 2 and dl.count == 2
    else:  # still with the producer, which retries them: not counted lost
        assert dl.unwritten == 0 and dl.waiting == 2
    logged = [r for r in caplog.records if "dead letter(s) not" in r.getMessage()]
    assert len(logged) == 1  # once per reason


def test_a_dead_letter_refused_at_once_by_the_producer_is_counted(monkeypatch):
    class Refusing(FakeProducer):
        def produce(self, *a, **kw):
            raise BufferError("Local: Queue full")

    dl = _dead_letters(monkeypatch, Refusing())
    dl.put("not a tick", Record("I1", 7, b"x"))
    dl.flush()
    assert dl.unwritten == 1


@pytest.mark.parametrize("limit, size, cut", [(1 << 20, 5 << 20, True), (None, 2_000_000, True),
                                              (16 << 20, 5 << 20, False)])
def test_a_dead_letter_is_cut_to_what_the_topic_accepts_with_its_origin_in_headers(monkeypatch, limit, size, cut):
    class Keeping(FakeProducer):
        def produce(self, topic, value, key=None, *, partition=0, on_delivery=None, headers=None):
            self.kept = (value, key, dict(headers))
            super().produce(topic, value, key, on_delivery=on_delivery)

    p = Keeping()
    dl = _dead_letters(monkeypatch, p, limit)
    dl.put("record of 5 MB exceeds the limit", Record("I1", 12, b"A" * size))
    dl.flush()
    value, key, headers = p.kept
    accepted = limit or kafka_source.KafkaDeadLetters.FALLBACK_LIMIT  # unreadable: what every broker takes
    record_size = len(value) + len(key) + sum(len(k) + len(v) for k, v in headers.items())
    assert record_size <= accepted and (len(value) < size) == cut and dl.truncated == int(cut)
    assert key == b"I1:12" and headers["topic"] == b"ls.I1" and headers["partition"] == b"0"
    assert headers["offset"] == b"11" and headers["original_size"] == str(size).encode()
    assert headers["truncated"] == (b"1" if cut else b"0") and headers["reason"].startswith(b"record of 5 MB")


@pytest.mark.parametrize("outcome, left", [("error", 0), ("timeout", 1)])
def test_delivery_errors_name_where_and_how_many_when_outputs_are_not_delivered(outcome, left):
    # The results topic's sink reports through the same DeliveryErrors as the dead letters.
    p, report = FakeProducer(outcome), kafka_source.DeliveryErrors()
    p.produce("ls.results", b"out", on_delivery=report)
    with pytest.raises(RuntimeError, match=rf"results topic ls\.results: {left} outputs not delivered within 30 s"):
        report.flush(p, "results topic ls.results", "outputs", "delivered")
    p.outcome = "ok"
    report.flush(p, "results topic ls.results", "outputs", "delivered")  # reported once, then clear
