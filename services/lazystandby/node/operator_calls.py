"""The operator calls of an operator node: their size, those in flight, how long each took, the stall
watch over them, and the measured cost a predicted replay is made of.

A part of the node's operator loop, holding only this state. The node submits and collects; this object
keeps the books: what is in flight in submission order (an operator may pipeline calls, and answers are
taken in that order so outputs stay numbered in input order), the oldest call not yet answered, and the
cost per call and per tuple (core.recovery_model.CallCost). Its caller holds the node's lock, except for
`begin`, which marks a call inside a synchronous operator's `submit` before the lock is taken again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

from ..config import NodeConfig
from ..core.recovery import OperatorWatch
from ..core.recovery_model import CallCost
from ..core.tuples import TupleBatch
from ..operators.base import Operator
from ..stats import BATCH_BOUNDS, Buckets
from .operator_probe import OperatorProbe

# Tuples per call when operator_batch is 0: a Spark micro-batch costs nearly the same for four times the
# tuples, so at saturation bigger calls mean more throughput there.
DEFAULT_TAKE = {"python": 32_768, "spark": 131_072}


class OperatorCalls:
    """Calls submitted and not yet answered, oldest first, and what their answers measured."""

    def __init__(self, cfg: NodeConfig, operator: Operator, clock: Callable[[], float]) -> None:
        self.operator = operator
        self._clock = clock
        self.take = cfg.operator_batch or DEFAULT_TAKE[cfg.operator]  # most tuples per call
        self.in_flight: deque[tuple[TupleBatch, Future, float]] = deque()  # (batch, future, submitted at)
        self.in_flight_tuples = 0
        self.calling_since: float | None = None  # a call inside `operator.submit` (a synchronous operator)
        self.watch = OperatorWatch(cfg.operator_stall_max)
        # A standby's calls wait by design (a lazy Spark feed holds them): a promoted one is timed from then.
        self.primary_since = clock()
        self.slowest_s = 0.0  # the longest a call took to be answered (for operator_stall_max)
        self.seconds = Buckets(BATCH_BOUNDS)
        # This operator's cost per call and per tuple: a standby's predicted replay when its primary's is
        # unknown, and the primary's figure told in its heartbeats.
        self.cost = CallCost()
        # A primary times a copy of its operator at a replay's size now and then (node/operator_probe.py).
        self.probe = OperatorProbe(operator, clock) if operator.probeable else None
        self.probe_due = 0.0

    def __bool__(self) -> bool:
        return bool(self.in_flight)

    def begin(self) -> float:
        """A call is about to be made: timed from now, so that an operator that computes inside `submit`
        (and may hang there) is timed as one whose future answers later is."""
        self.calling_since = t0 = self._clock()
        return t0

    def made(self, batch: TupleBatch, fut: Future, t0: float) -> None:
        """The call begun at `t0` for `batch` returned its future."""
        self.calling_since = None
        self.in_flight.append((batch, fut, t0))
        self.in_flight_tuples += len(batch)

    def head_done(self) -> bool:
        """Whether the oldest call in flight is answered (its answer is the next to collect)."""
        return bool(self.in_flight) and self.in_flight[0][1].done()

    def answered(self, primary: bool) -> tuple[TupleBatch, float]:
        """The oldest call's answer taken: its batch and how long it took, added to the measurements (and,
        on a primary, the probe's latest inputs)."""
        batch, _, t0 = self.in_flight.popleft()
        self.in_flight_tuples -= len(batch)
        took = self._clock() - t0
        self.seconds.observe(took)
        self.cost.add(len(batch), took)
        if self.probe is not None and primary:
            self.probe.note(batch)
        self.slowest_s = max(self.slowest_s, took)
        return batch, took

    def room(self, oq_room: int) -> int:
        """How many more inputs may be in flight: at most one output per input, so never more than OQ has
        room for once what is in flight is answered, and never more than the operator takes at once (a
        pipelined operator's bound holds for its first call too)."""
        room = oq_room - self.in_flight_tuples
        cap = self.operator.in_flight_max
        if cap or self.in_flight:
            room = min(room, cap - self.in_flight_tuples)
        return room

    def oldest(self) -> float | None:
        """When the oldest call not yet answered was made (None: there is none)."""
        made = [t for t in (self.calling_since, self.in_flight[0][2] if self.in_flight else None) if t is not None]
        return min(made, default=None)

    def stalled(self, primary: bool) -> tuple[float, str]:
        """For how long a primary's operator has left a call unanswered, once that is past
        operator_stall_max (0 when it has not, or on any other role: a standby's calls wait by design, and
        a fenced node's do not matter), and what changed: "began" or "ended" once each, else ""."""
        oldest, now = self.oldest(), self._clock()
        was = self.watch.stalled
        if not primary:
            self.watch.update(None, now)
            return 0.0, ""
        if oldest is not None:
            oldest = max(oldest, self.primary_since)
        began = self.watch.update(oldest, now)
        changed = "began" if began else ("ended" if was and not self.watch.stalled else "")
        return self.watch.stalled_for(oldest, now), changed
