"""The operator contract that N and N' run, whatever engine is behind it (Python, Spark)."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from ..core.messages import Params
from ..core.tuples import TupleBatch


class Operator(ABC):
    """A deterministic operator over one link-ordered input.

    Contract (the Lazy Standby protocol depends on each point):
    - `process(batch)` returns the indices (into the batch) of the tuples that produce an output, in
      increasing order, as an int64 numpy array (a list of ints is accepted too): at most one output
      per input, in input order, so that Level-1 acks can map an output back to the input that made it.
    - The result depends only on the tuples seen so far, in link order: N and N' fed the same positions
      make the same outputs with the same sequence numbers. Parameters change only through control tuples
      (stream id 0) in the link order, so both switch at the same position (seed 003).
    - `process` is called from one thread, batches in increasing position order, none skipped except
      through `restore`, which resets to a checkpoint taken at `position`.
    """

    name = "operator"

    @abstractmethod
    def process(self, batch: TupleBatch) -> np.ndarray | list[int]:
        """Indices of the tuples of `batch` that are selected."""

    def restore(self, position: int, params: Params | None = None) -> None:  # noqa: B027 - stateless: nothing
        """Resume after a jump to a checkpoint at input `position`. `params` is the control record in force
        there (the latest at or before `position`, None when there was none): an operator that has not
        applied it yet switches to it, at its own position, exactly as if it had seen it in the link order
        (the control record may lie inside the positions the jump skipped)."""

    def close(self) -> None:  # noqa: B027
        """Release engine resources."""
