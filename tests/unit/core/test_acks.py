"""Algorithm 4: Level-0 acks mapped to Level-1 checkpoints that never move back."""

from lazystandby.core.acks import Checkpoint, Level1Tracker, level1_from_level0
from lazystandby.core.queues import KeyedQueue
from tests.unit.core.queued import run


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
