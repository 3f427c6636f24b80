"""What an operator node's input queue holds and its operator loop takes: runs of consecutive batches
(decoded or sealed), called as one, and jumps to a checkpoint."""

from __future__ import annotations

from dataclasses import dataclass

from ..core import messages as m
from ..core.acks import Checkpoint
from ..core.held import Sealed
from ..core.tuples import TupleBatch
from ..operators.base import Outputs


@dataclass(frozen=True, slots=True)
class Jump:
    """An IQ marker: resume from a checkpoint (the positions before it are covered by Nd's output)."""

    checkpoint: Checkpoint
    params: m.Params | None = None  # the control record in force there (its position may be inside the skip)
    # A stateful operator's jump: its state is rebuilt from this position on (empty before it), and its
    # outputs through the checkpoint are dropped (Nd holds them); numbering resumes after the checkpoint's.
    rebuild_from: int | None = None

    def __len__(self) -> int:
        return 0


class Run:
    """Consecutive batches read as one run of positions first .. end-1, joined only where sliced: the
    operator is called once per run, not once per frame (a Spark micro-batch costs the same for 4,096 tuples
    as for 32,768), and a standby that skips a covered stretch copies none of it (joining every run it
    took cost it more CPU than decoding the backup)."""

    __slots__ = ("parts", "first", "end")

    def __init__(self, parts: list) -> None:
        self.parts, self.first, self.end = parts, parts[0].first, parts[-1].end

    def __len__(self) -> int:
        return self.end - self.first

    def slice(self, start: int, stop: int) -> TupleBatch:
        """The tuples at positions [start, stop) of the run, as one batch (decoding sealed parts: raises
        Unreadable)."""
        pieces = [p.slice(start, stop) for p in self.parts if p.end > start and p.first < stop]
        if not pieces:
            return TupleBatch(max(start, self.first))
        return TupleBatch.concat([p.tuples() if isinstance(p, Sealed) else p for p in pieces])


def _join_runs(items: list) -> list:
    """Consecutive batches (decoded or sealed) as one Run each; Jumps stay where they are."""
    out: list = []
    run: list = []
    for it in items:
        if isinstance(it, TupleBatch | Sealed) and (not run or it.first == run[-1].end):
            run.append(it)
            continue
        if run:
            out.append(Run(run))
            run = []
        if isinstance(it, TupleBatch | Sealed):
            run.append(it)
        else:
            out.append(it)
    if run:
        out.append(Run(run))
    return out


def outputs_of(batch: TupleBatch, selected, first: int) -> TupleBatch:
    """The outputs of a call, numbered from `first`: the selected inputs, or a stateful operator's new
    tuples (Outputs), each with the stream and seq of the input it is mapped to."""
    if not isinstance(selected, Outputs):
        return batch.select(selected, first=first)
    at = selected.at
    return TupleBatch.of_columns(first, batch.streams[at], batch.seqs[at], selected.payloads, at + batch.first)
