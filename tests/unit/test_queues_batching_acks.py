import pytest

from lazystandby.core.acks import Checkpoint, Level1Tracker, level1_from_level0
from lazystandby.core.batching import BackupBatcher, parse_bsize
from lazystandby.core.errors import DuplicateSequence, QueueFull, SequenceGap
from lazystandby.core.queues import InputQueue, KeyedQueue
from lazystandby.core.tuples import TupleBatch


def run(first: int, n: int, sources: list[int] | None = None) -> TupleBatch:
    return TupleBatch(first=first, streams=[1] * n, seqs=list(range(first, first + n)),
                      payloads=[b"x%d" % i for i in range(first, first + n)], sources=sources)


def filled(n: int, chunk: int = 7) -> KeyedQueue:
    q = KeyedQueue("OQu")
    for start in range(1, n + 1, chunk):
        q.append(run(start, min(chunk, n - start + 1)))
    return q


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


@pytest.mark.parametrize("text,value", [("1", 1), ("10", 10), ("inf", None), (None, None)])
def test_parse_bsize(text, value):
    assert parse_bsize(text) == value


def test_parse_bsize_refuses_zero():
    with pytest.raises(ValueError):
        parse_bsize("0")


@pytest.mark.parametrize("bsize,expected", [(1, 25), (10, 2), (None, 0)])
def test_algorithm_1_cuts_full_batches_only(bsize, expected):
    q = filled(25)
    b = BackupBatcher(bsize)
    batches = b.due(q, max_batches=1000)
    assert len(batches) == expected
    assert all(len(x) == bsize for x in batches)
    assert b.unbatched(q) == 25 - sum(map(len, batches))


def test_batcher_skips_what_level1_trimmed_and_rewinds_on_failure():
    q = filled(40)
    b = BackupBatcher(10)
    assert [x.first for x in b.due(q, 1)] == [1]
    b.confirm(10)
    q.trim(25)  # Nd holds the outputs of 1..25: no standby needs them
    assert [x.first for x in b.due(q, 10)] == [26]
    b.rewind()  # that batch was never acknowledged: cut again
    assert b.batched_through == 25
    assert [x.first for x in b.due(q, 10)] == [26]


def outputs_from(sources: list[int], first: int = 1) -> KeyedQueue:
    oq = KeyedQueue("OQ", start=first - 1)
    oq.append(run(first, len(sources), sources))
    return oq


def test_level1_maps_level0_to_the_input_before_the_first_unacked_output():
    # outputs 1..4 came from inputs 3, 8, 9, 20; 25 inputs processed
    oq = outputs_from([3, 8, 9, 20])
    processed = Checkpoint(25, 4)
    assert level1_from_level0(0, processed, oq) == Checkpoint(2, 0)
    oq.trim(2)
    assert level1_from_level0(2, processed, oq) == Checkpoint(8, 2)


def test_level1_covers_dropped_inputs_when_everything_is_acked():
    """A 1 % selection: trimming must still move, so all processed inputs are covered."""
    oq = outputs_from([3])
    oq.trim(1)
    assert level1_from_level0(1, Checkpoint(10_000, 1), oq) == Checkpoint(10_000, 1)


def test_level1_tracker_never_moves_back():
    t = Level1Tracker()
    t.update(Checkpoint(10, 3))
    t.update(Checkpoint(5, 1))
    t.update(None)
    assert t.current == Checkpoint(10, 3)


def test_the_operator_gets_consecutive_frames_as_one_run_and_jumps_in_place():
    from lazystandby.node.operator_node import Jump, Run, _join_runs

    def b(first, n):
        return TupleBatch(first=first, streams=[1] * n, seqs=list(range(first, first + n)), payloads=[b"x"] * n)

    jump = Jump(Checkpoint(20, 3))
    out = _join_runs([b(1, 4), b(5, 3), jump, b(21, 2), b(23, 2), b(40, 1)])
    assert [(x.first, len(x)) if isinstance(x, Run) else "jump" for x in out] == [
        (1, 7), "jump", (21, 4), (40, 1)]
    assert out[0].slice(1, 8).seqs.tolist() == list(range(1, 8))
    assert _join_runs([]) == []


def test_a_run_joins_only_the_stretch_it_is_sliced_at():
    from lazystandby.node.operator_node import Run

    def b(first, n):
        return TupleBatch(first=first, streams=[1] * n, seqs=list(range(first, first + n)), payloads=[b"x"] * n)

    parts = [b(1, 4), b(5, 3), b(8, 5)]
    run = Run(parts)
    assert (run.first, run.end, len(run)) == (1, 13, 12)
    assert run.slice(1, 13) == TupleBatch.concat(parts)
    assert run.slice(3, 10) == TupleBatch.concat(parts).slice(3, 10)
    one = run.slice(5, 8)
    assert one.first == 5 and one.seqs.tolist() == [5, 6, 7]
    assert run.slice(0, 100) == TupleBatch.concat(parts)  # clamped to the run
    empty = run.slice(20, 30)
    assert len(empty) == 0 and empty.first == 20
