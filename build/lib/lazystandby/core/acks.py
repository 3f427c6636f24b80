"""Level-0 and Level-1 acks (seed 000 Algorithms 3 and 4).

A Level-0 ack from Nd says "I hold every output up to oseq k". The primary turns it into a Level-1 ack
for Nu: the input position P such that every input at or below P produced only outputs <= k, and the count
C of outputs those inputs produced. (P, C) is a checkpoint of the operator's progress: Nu drops OQu
through P (Algorithm 4), and a standby that lacks inputs <= P can resume from it.

Acks must keep moving when the operator drops almost everything (a 1 % selection): when every output made
so far is acked, all processed inputs are covered, dropped ones included, so P is the last processed input.

Operators obey one rule for this to hold: at most one output per input, in input order (selection,
projection, map, filter).
"""

from __future__ import annotations

from dataclasses import dataclass

from .queues import KeyedQueue


@dataclass(frozen=True, slots=True, order=True)
class Checkpoint:
    """Inputs through `input_pos` produced `output_count` outputs, all of them held by Nd."""

    input_pos: int = 0
    output_count: int = 0


def level1_from_level0(delivered: int, processed: Checkpoint, oq: KeyedQueue) -> Checkpoint | None:
    """Algorithm 4's mapping: the Level-1 ack implied by Level-0 ack `delivered`.

    `processed` is the operator's progress (last input processed, outputs made); `oq` holds the outputs not
    yet trimmed, with the input position of each. None when the answer cannot be known (the output after
    `delivered` is no longer held), in which case the caller keeps its previous Level-1 ack.
    """
    if delivered >= processed.output_count:
        return processed
    src = oq.source_of(delivered + 1)
    if src is None:
        return None
    return Checkpoint(input_pos=src - 1, output_count=delivered)


class Level1Tracker:
    """The latest Level-1 ack, never moving backwards."""

    def __init__(self) -> None:
        self.current = Checkpoint()

    def update(self, candidate: Checkpoint | None) -> Checkpoint:
        if candidate is not None and candidate.input_pos > self.current.input_pos:
            self.current = candidate
        return self.current

    def reset(self, checkpoint: Checkpoint) -> None:
        self.current = checkpoint
