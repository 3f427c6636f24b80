"""Level-0 and Level-1 acks (seed 000 Algorithms 3 and 4).

A Level-0 ack from Nd says "I hold every output up to oseq k". The primary turns it into a Level-1 ack
for Nu: the input position P such that every input at or below P produced only outputs <= k, and the count
C of outputs those inputs produced. (P, C) is a checkpoint of the operator's progress: Nu drops OQu
through P (Algorithm 4), and a standby that lacks inputs <= P can resume from it.

Acks must keep moving when the operator drops almost everything (a 1 % selection): when every output made
so far is acked, all processed inputs are covered, dropped ones included, so P is the last processed input.

Operators obey one rule for this to hold: outputs in input order, each mapped to one input. A selection
(projection, map, filter) makes at most one output per input. A window makes several for one input (every
result a watermark record makes final is mapped to that record): then P never falls between two outputs of
one input, since Nd holding some of them does not cover the input (`grouped`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .queues import KeyedQueue


@dataclass(frozen=True, slots=True, order=True)
class Checkpoint:
    """Inputs through `input_pos` produced `output_count` outputs, all of them held by Nd."""

    input_pos: int = 0
    output_count: int = 0


def level1_from_level0(delivered: int, processed: Checkpoint, oq: KeyedQueue, *,
                       grouped: bool = False) -> Checkpoint | None:
    """Algorithm 4's mapping: the Level-1 ack implied by Level-0 ack `delivered`.

    `processed` is the operator's progress (last input processed, outputs made); `oq` holds the outputs not
    yet trimmed, with the input position of each. None when the answer cannot be known (the output after
    `delivered` is no longer held), in which case the caller keeps its previous Level-1 ack.
    `grouped`: an input may have several outputs; when output `delivered` and the one after it share their
    input, or the input of output `delivered` is not known, None as well (the next ack moves it on).
    """
    if delivered >= processed.output_count:
        return processed
    src = oq.source_of(delivered + 1)
    if src is None:
        return None
    if grouped and delivered:
        before = oq.source_of(delivered)
        if before is None and oq.trimmed_through == delivered:
            before = oq.trimmed_source
        if before is None or before == src:
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
