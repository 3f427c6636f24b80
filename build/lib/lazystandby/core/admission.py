"""What a receiver does with a run of input positions: accept it, refuse a duplicate or a gap, or jump.

N and N' hold every input position through `received_through`. A frame (or a frame's worth of backup
batches) must start at the next position. It may start further on only when the checkpoint it carries
covers exactly the positions skipped: every input through that checkpoint produced only outputs that Nd
already holds, so the receiver resumes from the checkpoint instead (seed 000 §3.6, made Precise).
"""

from __future__ import annotations

from collections.abc import Sequence

from .acks import Checkpoint
from .seq import DuplicateSequence, SequenceGap


def must_jump(expected: int, first: int, checkpoint: Checkpoint) -> bool:
    """A frame or batch may start past the next expected position only when the checkpoint it carries
    covers exactly the positions skipped; the receiver then resumes from that checkpoint."""
    return first > expected and checkpoint.input_pos == first - 1


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
