"""What a receiver does with a run of input positions: accept it, refuse a duplicate or a gap, or jump.

N and N' hold every input position through `received_through`. A frame (or a frame's worth of backup
batches) must start at the next position. It may start further on only when the checkpoint it carries
covers exactly the positions skipped: every input through that checkpoint produced only outputs that Nd
already holds, so the receiver resumes from the checkpoint instead (seed 000 §3.6, made Precise).
"""

from __future__ import annotations

from collections.abc import Sequence

from .acks import Checkpoint
from .errors import DuplicateSequence, SequenceGap


def must_jump(expected: int, first: int, checkpoint: Checkpoint) -> bool:
    """A frame or batch may start past the next expected position only when the checkpoint it carries
    covers exactly the positions skipped; the receiver then resumes from that checkpoint."""
    return first > expected and checkpoint.input_pos == first - 1


def covered_head(received_through: int, first: int, checkpoint: Checkpoint) -> int:
    """How many leading positions of a run that starts at `first` a receiver holding through
    `received_through` drops as covered: when the run skips ahead of what is held and the checkpoint covers
    the skipped positions and the run's own first ones too. (Nu re-cuts its backup from its trim point,
    which lags its checkpoint: after a standby registers, or after a call in flight was lost. Refusing such a
    run as a gap made Nu re-cut from the same point until its trim caught up, sometimes for 0.3 s, while
    nothing reached the standby.) The receiver then jumps to the checkpoint and takes the rest of the run;
    0 means the run is taken or refused as it is."""
    if first > received_through + 1 and checkpoint.input_pos >= first:
        return checkpoint.input_pos - first + 1
    return 0


def admit_runs(node: str, received_through: int, runs: Sequence[tuple[int, int]], checkpoint: Checkpoint) -> bool:
    """Decide on consecutive runs `(first, end)` arriving together; True when the first one jumps to
    `checkpoint`. Raises DuplicateSequence for a run that repeats what is held and SequenceGap for one that
    skips ahead without a checkpoint covering the skip. Changes nothing: the caller applies the decision."""
    expected = received_through + 1
    jump = bool(runs) and must_jump(expected, runs[0][0], checkpoint)
    for i, (first, end) in enumerate(runs):
        if first < expected:
            raise DuplicateSequence(
                f"{node}: positions {first}..{end - 1} repeat what is held; expected {expected}")
        if first > expected and not (jump and i == 0):
            raise SequenceGap(f"{node}: position {first} skips ahead; expected {expected} "
                              f"(checkpoint covers through {checkpoint.input_pos})")
        expected = end
    return jump
