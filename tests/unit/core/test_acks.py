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


def test_grouped_outputs_never_split_an_input():
    """A window record at input 10 made outputs 2, 3 and 4: Nd holding 2 or 3 of them covers no more than
    input 9 with the one output before them; holding all, input 19 with the next at 20."""
    oq = outputs_from([5, 10, 10, 10, 20])
    processed = Checkpoint(25, 5)
    assert level1_from_level0(1, processed, oq, grouped=True) == Checkpoint(9, 1)
    assert level1_from_level0(2, processed, oq, grouped=True) is None  # inside the record's outputs
    oq.trim(3)
    assert oq.trimmed_source == 10
    assert level1_from_level0(3, processed, oq, grouped=True) is None  # known from the trim
    assert level1_from_level0(4, processed, oq, grouped=True) == Checkpoint(19, 4)
    # Ungrouped (a selection) the same queue maps as before.
    assert level1_from_level0(3, processed, oq) == Checkpoint(9, 3)


def test_grouped_outputs_with_an_unknown_source_give_no_level1():
    oq = outputs_from([5, 10])
    oq.reset(1)  # forgot everything: the source of output 1 is not known
    oq.append(run(2, 1, [10]))
    assert level1_from_level0(1, Checkpoint(12, 2), oq, grouped=True) is None
