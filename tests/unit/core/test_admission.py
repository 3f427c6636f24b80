"""What a receiver does with a run of positions: accept, or jump to a checkpoint that covers the gap."""

from lazystandby.core.acks import Checkpoint
from lazystandby.core.admission import must_jump


def test_jump_only_when_the_checkpoint_covers_the_gap_exactly():
    assert must_jump(expected=1, first=401, checkpoint=Checkpoint(400, 120))
    assert not must_jump(expected=1, first=402, checkpoint=Checkpoint(400, 120))
    assert not must_jump(expected=401, first=401, checkpoint=Checkpoint(400, 120))
