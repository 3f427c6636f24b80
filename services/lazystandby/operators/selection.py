"""The selection operator of seed 000's experiment, in Python."""

from __future__ import annotations

from ..core.messages import Params
from ..core.seq import MalformedRecord, StreamRegistry
from ..core.tuples import TupleBatch
from ..formats import control
from ..formats.predicate import compile_predicate
from .base import Operator


class Selection(Operator):
    """Selects the ticks for which the predicate holds; control tuples switch the predicate in-band.

    A payload that does not parse is not selected and is counted: deterministic on N and N' alike.
    (Nu's source validation should have sent it to the dead letters already.)
    """

    name = "python"

    def __init__(self, predicate: str) -> None:
        self.predicate = predicate
        self._fn = compile_predicate(predicate)
        self.unparseable = 0
        self.switches: list[tuple[int, str]] = []

    def _switch(self, pos: int, payload: bytes) -> None:
        try:
            text = control.decode(payload)
        except MalformedRecord:  # a bad control record is ignored identically on N and N'
            self.unparseable += 1
            return
        fn = compile_predicate(text)
        self.predicate, self._fn = text, fn
        self.switches.append((pos, text))

    def restore(self, position: int, params: Params | None = None) -> None:
        if params is not None and (not self.switches or self.switches[-1][0] < params.pos):
            self._switch(params.pos, params.payload)

    def process(self, batch: TupleBatch) -> list[int]:
        fn = self._fn
        out: list[int] = []
        control = StreamRegistry.CONTROL
        for i, (sid, payload) in enumerate(zip(batch.streams, batch.payloads, strict=True)):
            if sid == control:
                self._switch(batch.first + i, payload)
                fn = self._fn
                continue
            try:
                if fn(payload.decode().split(",")):
                    out.append(i)
            except (ValueError, IndexError, UnicodeDecodeError):
                self.unparseable += 1
        return out
