"""The operator timed at the size of a replay, apart from the live one.

The recovery model prices a takeover's replay (thousands of inputs in a call) at the operator's cost per
call and per tuple, fitted from the calls a node made (core.recovery_model.CallCost). A primary's steady
calls hold a few dozen inputs at moderate rates: the cost of a call hides that of its tuples, and the fit
can only extrapolate (a 12,500-input replay priced at 2-40 ms took 81 in one call, 6.5 us an input: the
window query at 4,000 ticks/s on bench-links' 100mbit link, Bsize inf). So a primary runs a copy of
its operator (the same query, no state: `Operator.probe_copy`) over its latest PROBE_TUPLES inputs, on a
thread of its own, and adds that call to its cost as a kept probe: PROBES_AT_ONCE of them as soon as
each has PROBE_MIN new inputs, then one every PROBE_EVERY_S. The fit takes the probes of each size at
their median (core.recovery_model.CallCost): a probe that a busy core held up does not set the slope.

What it costs: PROBE_TUPLES inputs' work every PROBE_EVERY_S (at 6.5 us an input, 27 ms of a core every
5 s: about half a percent), and the latest inputs kept referenced until the next probe. The copy starts
empty as a standby rebuilding from Nu does; a warm standby's replay also merges into the state it holds,
which this leaves out. An operator without a cheap copy (an engine: Spark) is not probed, and its fit
stays on its calls.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from ..core.errors import ProbeFailed
from ..core.tuples import TupleBatch
from ..operators.base import Operator

PROBE_TUPLES = 4_096  # inputs in a probe's call: a few times a steady call, a third of a large replay
PROBE_MIN = 1_024  # fewer inputs seen since the last probe: none (an idle primary's cost has not moved)
PROBE_EVERY_S = 5.0
PROBES_AT_ONCE = 4  # the first ones, each as soon as PROBE_MIN new inputs came
PROBE_POLL_S = 0.25  # how often a primary looks whether a probe is due (and has its inputs)


class OperatorProbe:
    """The latest inputs of a primary's calls (`note`), and the probe over them (`run`).

    Thread-safe: `note` comes from the operator loop, `run` from the probe's own thread; the batches
    are immutable, so a probe reads them outside the lock. The node adds what `run` timed to its cost
    under its own lock (the fit reads it there)."""

    def __init__(self, operator: Operator, clock: Callable[[], float], tuples: int = PROBE_TUPLES,
                 least: int = PROBE_MIN) -> None:
        self.operator = operator
        self.clock = clock
        self.tuples = tuples
        self.least = least
        self._lock = threading.Lock()
        self._latest: deque[TupleBatch] = deque()
        self._held = 0  # tuples in _latest
        self._new = 0  # tuples noted since the last probe
        self.probes = 0

    def note(self, batch: TupleBatch) -> None:
        """The inputs of a call just made: the latest `tuples` of them are kept for the next probe."""
        with self._lock:
            self._latest.append(batch)
            self._held += len(batch)
            self._new += len(batch)
            while self._latest and self._held - len(self._latest[0]) >= self.tuples:
                self._held -= len(self._latest.popleft())

    def batch(self) -> TupleBatch | None:
        """The probe's input, at most `tuples` of the latest (None: fewer than `least` new since the last)."""
        with self._lock:
            if self._new < self.least or not self._latest:
                return None
            batches, self._new = list(self._latest), 0
        streams = np.concatenate([b.streams for b in batches])[-self.tuples:]
        seqs = np.concatenate([b.seqs for b in batches])[-self.tuples:]
        payloads = pa.concat_arrays([b.payloads for b in batches])
        payloads = payloads.slice(max(0, len(payloads) - self.tuples))
        return TupleBatch(1, streams, seqs, payloads)

    def run(self) -> tuple[int, float] | None:
        """One probe: a copy of the operator times a call on the latest inputs; (tuples, seconds), or None
        when there was nothing new to probe. Raises ProbeFailed when the copy failed (it is closed)."""
        batch = self.batch()
        if batch is None:
            return None
        copy = self.operator.probe_copy()
        t0 = self.clock()
        try:
            copy.process(batch)
        except Exception as e:  # whatever the copy raised: a measurement that failed, not the node's error
            raise ProbeFailed(f"{type(e).__name__}: {e}"[:200]) from e
        finally:
            copy.close()
        self.probes += 1
        return len(batch), self.clock() - t0
