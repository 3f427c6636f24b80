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


def _dead_letters(monkeypatch, producer: FakeProducer) -> kafka_source.KafkaDeadLetters:
    monkeypatch.setattr(kafka_source, "durable_producer", lambda bootstrap: producer)
    return kafka_source.KafkaDeadLetters("127.0.0.1:9")


def test_dead_letters_flush_waits_for_the_broker_and_skips_when_nothing_waits(monkeypatch):
    p = FakeProducer()
    dl = _dead_letters(monkeypatch, p)
    dl.flush()
    assert p.flushes == 0  # asked after every poll: nothing put, nothing to wait for
    dl.put("not a tick", Record("I1", 7, b"garbage"))
    dl.flush()
    assert p.written == [("ls.deadletters", b"garbage")] and dl.count == 1


@pytest.mark.parametrize("outcome", ["error", "timeout"])
def test_dead_letters_that_cannot_be_written_are_an_error_not_a_silent_loss(monkeypatch, outcome):
    dl = _dead_letters(monkeypatch, FakeProducer(outcome))
    dl.put("not a tick", Record("I1", 7, b"garbage"))
    with pytest.raises(RuntimeError, match=r"ls\.deadletters: [01] dead letters not written"):
        dl.flush()


@pytest.mark.parametrize("outcome, left", [("error", 0), ("timeout", 1)])
def test_delivery_errors_name_where_and_how_many_when_outputs_are_not_delivered(outcome, left):
    # The results topic's sink reports through the same DeliveryErrors as the dead letters.
    p, report = FakeProducer(outcome), kafka_source.DeliveryErrors()
    p.produce("ls.results", b"out", on_delivery=report)
    with pytest.raises(RuntimeError, match=rf"results topic ls\.results: {left} outputs not delivered within 30 s"):
        report.flush(p, "results topic ls.results", "outputs", "delivered")
    p.outcome = "ok"
    report.flush(p, "results topic ls.results", "outputs", "delivered")  # reported once, then clear
