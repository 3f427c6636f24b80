"""The selection operator of seed 000's experiment, in Python over Arrow columns."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from ..core.errors import MalformedRecord
from ..core.messages import Params
from ..core.seq import StreamRegistry
from ..core.tuples import TupleBatch
from ..formats import control
from ..formats.predicate import compile_columnar
from ..formats.ticks import parse_columns
from .base import Operator


class Selection(Operator):
    """Selects the ticks for which the predicate holds; control tuples switch the predicate in-band.

    Each run of data tuples between control tuples is parsed once into the columns the predicate reads and
    filtered with Arrow compute: no Python per tuple. A payload that does not parse is not selected and is
    counted: deterministic on N and N' alike. (Nu's source validation should have sent it to the dead
    letters already.)
    """

    name = "python"
    probeable = True

    def __init__(self, predicate: str, *, poison: bytes = b"") -> None:
        self.predicate = predicate
        # chaos_poison: a call holding an input with this text fails, as a call on a value the operator
        # cannot compute with does (the node then quarantines those inputs).
        self.poison = poison
        self._fn, self._fields = compile_columnar(predicate)
        self.unparseable = 0
        self.switches: list[tuple[int, str]] = []

    def probe_copy(self) -> Selection:
        return Selection(self.predicate)  # the predicate in force; no chaos poison: a probe times, it never fails

    def _switch(self, pos: int, payload: bytes) -> None:
        if control.watermark_of(payload) is not None:
            return  # event time means nothing to a selection
        try:
            text = control.decode(payload)
        except MalformedRecord:  # a bad control record is ignored identically on N and N'
            self.unparseable += 1
            return
        fn, fields = compile_columnar(text)
        self.predicate, self._fn, self._fields = text, fn, fields
        if not self.switches or self.switches[-1] != (pos, text):  # a call retried on part of its batch
            self.switches.append((pos, text))

    def restore(self, position: int, params: Params | None = None) -> None:
        if params is not None and (not self.switches or self.switches[-1][0] < params.pos):
            self._switch(params.pos, params.payload)

    def _select(self, batch: TupleBatch, lo: int, hi: int) -> np.ndarray:
        """Indices in [lo, hi) (all data tuples) that the current predicate selects."""
        payloads = batch.payloads.slice(lo, hi - lo)
        if self.poison and pc.any(pc.match_substring(payloads, self.poison)).as_py():
            raise ValueError(f"cannot compute with an input holding {self.poison.decode(errors='replace')!r} "
                             f"(chaos_poison)")
        ok, cols = parse_columns(payloads, self._fields, admitted=True)
        if ok is not None:
            self.unparseable += len(payloads) - pc.sum(ok).as_py()
        mask = pc.fill_null(self._fn(cols, hi - lo), False)
        return np.flatnonzero(mask.to_numpy(zero_copy_only=False)) + lo

    def process(self, batch: TupleBatch) -> np.ndarray:
        controls = np.flatnonzero(batch.streams == StreamRegistry.CONTROL)
        if not len(controls):
            return self._select(batch, 0, len(batch)) if len(batch) else np.empty(0, np.int64)
        out, lo = [], 0
        for c in controls.tolist():
            if c > lo:
                out.append(self._select(batch, lo, c))
            self._switch(batch.first + c, batch.payload(c))
            lo = c + 1
        if lo < len(batch):
            out.append(self._select(batch, lo, len(batch)))
        return np.concatenate(out) if out else np.empty(0, np.int64)
