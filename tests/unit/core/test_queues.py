"""The output queue trimmed by acks and the bounded input queue."""

import pytest

from lazystandby.core.errors import DuplicateSequence, QueueFull, SequenceGap
from lazystandby.core.queues import InputQueue, KeyedQueue
from tests.unit.core.queued import filled, run


def test_keyed_queue_appends_only_the_next_key():
    q = filled(10)
    with pytest.raises(SequenceGap):
        q.append(run(12, 1))
    with pytest.raises(DuplicateSequence):
        q.append(run(10, 1))
    assert len(q) == 10 and q.last == 10


def test_trim_drops_through_the_ack_across_chunk_boundaries():
    q = filled(30)
    assert q.trim(10) == 10
    assert q.first == 11 and len(q) == 20
    assert q.read(1, 100).first == 11  # what was trimmed cannot be read
    assert q.trim(5) == 0  # acks never move backwards
    assert q.trim(30) == 20 and len(q) == 0 and q.payload_bytes == 0


def test_read_joins_chunks_and_respects_max():
    q = filled(30)
    b = q.read(5, 10)
    assert (b.first, len(b)) == (5, 10)
    assert b.seqs.tolist() == list(range(5, 15))
    assert q.read(31, 10) is None


def test_capacity_pushes_back_instead_of_growing():
    q = KeyedQueue("OQu", capacity=10)
    q.append(run(1, 8))
    with pytest.raises(QueueFull):
        q.append(run(9, 3))
    q.trim(5)
    q.append(run(9, 3))
    assert len(q) == 6


def test_input_queue_is_bounded_and_fifo():
    iq = InputQueue("IQ", capacity=10)
    iq.offer(run(1, 6))
    with pytest.raises(QueueFull):
        iq.offer(run(7, 6))
    iq.offer(run(7, 4))
    got = iq.take_all(100)
    assert [b.first for b in got] == [1, 7] and len(iq) == 0 and iq.empty()


def test_input_queue_drops_from_a_position_and_keeps_what_comes_before():
    iq = InputQueue("IQ", capacity=100)
    for b in (run(1, 6), run(7, 6), run(13, 6)):
        iq.offer(b)
    assert iq.drop_from(10) == 9 and len(iq) == 9
    got = iq.take_all(100)
    assert [(b.first, b.end) for b in got] == [(1, 7), (7, 10)]
    assert iq.drop_from(1) == 0 and iq.empty()
