"""Poison inputs: the inputs an operator call fails on because of what they hold, found by bisecting the
call, left without output, and sent to the dead letters with the error.

Invariant (what keeps a failover exact): the inputs quarantined are exactly those on which the operator
fails when called with that input alone, whatever batches the node happened to cut. N and N' cut their
batches differently (arrival, backlog, takeover), yet quarantine the same positions and number the same
outputs. It holds for an operator whose failure follows single inputs (a value it cannot compute with):
a call fails if and only if it holds such an input (Operator.input_fault, and a failed call leaves the
operator as it was). A failure that follows no input (every piece succeeds alone) yields no quarantine: the
call's answer is then the pieces' answers, which is what the call would have answered.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from ..core.tuples import TupleBatch
from ..operators.base import Operator
from ..sources.base import DeadLetters, Record


@dataclass(frozen=True, slots=True)
class Quarantined:
    pos: int  # the input's position in the link order
    stream: int
    seq: int
    payload: bytes
    error: str  # the operator's error on that input alone

    def as_dict(self, names: dict[int, str]) -> dict:
        return {"pos": self.pos, "stream": names.get(self.stream, str(self.stream)), "seq": self.seq,
                "error": self.error}


def bisect(operator: Operator, batch: TupleBatch, error: BaseException) -> tuple[np.ndarray, list[Quarantined]]:
    """What `operator` selects of `batch` (indices into it), given that the call on `batch` raised `error`
    (an input fault), and the inputs quarantined. Raises what a piece raises that is no input fault."""
    if len(batch) == 1:
        return np.empty(0, np.int64), [Quarantined(batch.first, int(batch.streams[0]), int(batch.seqs[0]),
                                                   batch.payload(0), _why(error))]
    mid = batch.first + len(batch) // 2
    selected: list[np.ndarray] = []
    found: list[Quarantined] = []
    for piece in (batch.slice(batch.first, mid), batch.slice(mid, batch.end)):
        try:
            got = np.asarray(operator.process(piece), np.int64)
        except Exception as e:
            if not operator.input_fault(e):
                raise
            got, more = bisect(operator, piece, e)
            found += more
        selected.append(got + (piece.first - batch.first))
    return np.concatenate(selected), found


def _why(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:500]


class Quarantine:
    """A node's quarantined inputs: the latest KEPT listed for status, and those not yet written to the
    dead letters. Nd's output must never cover a poison input whose dead letter is not written, so a
    primary writes them before the call's outputs enter OQ; a standby keeps its own until a covering
    checkpoint passes them (the primary wrote those) or it takes over and writes the rest, before it
    replays OQ' (its outputs past them may be all that is left to deliver). A takeover Nd then declines
    leaves a letter the primary writes too: dead letters are at least once, keyed by stream and seq.
    Its caller holds the node's lock, except in `write`."""

    KEPT = 1000  # quarantined inputs listed in status (all are counted)

    def __init__(self, dead_letters: DeadLetters) -> None:
        self.dead_letters = dead_letters  # the Kafka dead-letter topic when there is one
        self.listed: deque[dict] = deque(maxlen=self.KEPT)
        self.unwritten: list[Quarantined] = []

    def found(self, found: list[Quarantined], names: dict[int, str]) -> None:
        """Inputs a call failed on alone: listed, and to be written."""
        self.listed.extend(q.as_dict(names) for q in found)
        self.unwritten.extend(found)

    def due(self, writes: bool, covered: int) -> list[Quarantined]:
        """What is to be written now: every input not yet written when this node `writes` (a primary, or a
        standby taking over), taken; else none, and those a covering checkpoint passed (through `covered`)
        are dropped."""
        if not writes:
            self.unwritten = [q for q in self.unwritten if q.pos > covered]
            return []
        todo, self.unwritten = self.unwritten, []
        return todo

    def write(self, todo: list[Quarantined], names: dict[int, str], node: str) -> None:
        """Without the node's lock: `todo` written to the dead letters, waiting for them."""
        if not todo:
            return
        for q in todo:
            self.dead_letters.put(f"quarantined by {node} at input {q.pos}: {q.error}",
                                  Record(names.get(q.stream, str(q.stream)), q.seq, q.payload))
        self.dead_letters.flush()
