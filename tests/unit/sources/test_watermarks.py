"""`watermarks`: a leaderless partition's offsets query is asked again; any other error is raised."""
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from lazystandby.sources.kafka_source import watermarks


class Answers:
    """A consumer whose offsets query gives each of `answers` in turn (an exception is raised)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked = 0

    def get_watermark_offsets(self, tp, timeout):
        assert timeout > 0
        self.asked += 1
        a = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(a, Exception):
            raise a
        return a


def leaderless():
    return KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))


TP = TopicPartition("t", 0)


def test_a_partition_without_a_leader_is_asked_again():
    c = Answers(leaderless(), KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE)), (3, 9))
    assert watermarks(c, TP, time.monotonic() + 10, pause=0.01) == (3, 9)
    assert c.asked == 3


def test_another_error_is_raised_at_once():
    c = Answers(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)), (0, 1))
    with pytest.raises(KafkaException) as e:
        watermarks(c, TP, time.monotonic() + 10, pause=0.01)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert c.asked == 1


def test_a_partition_that_stays_leaderless_fails_at_the_deadline():
    c = Answers(leaderless())
    t0 = time.monotonic()
    with pytest.raises(KafkaException) as e:
        watermarks(c, TP, t0 + 0.3, pause=0.05)
    assert e.value.args[0].code() == KafkaError.NOT_LEADER_FOR_PARTITION
    assert 0.2 <= time.monotonic() - t0 < 2 and c.asked >= 3
