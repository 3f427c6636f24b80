"""The operator contract that N and N' run, whatever engine is behind it (Python, Spark)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np
import pyarrow as pa

from ..core.errors import LazyStandbyException
from ..core.messages import Params
from ..core.tuples import TupleBatch


class Outputs:
    """What a call made when outputs are new tuples rather than inputs passed on (a window result): for
    each output, the index (into the batch) of the input it is mapped to, non-decreasing, and its payload.
    Several outputs may map to one input (every result a watermark record makes final); the node numbers
    them on in that order, and the Level-1 point never falls between two outputs of one input."""

    __slots__ = ("at", "payloads")

    def __init__(self, at: np.ndarray, payloads: pa.Array) -> None:
        if len(at) != len(payloads):
            raise ValueError(f"{len(at)} output positions for {len(payloads)} payloads")
        self.at = np.asarray(at, np.int64)
        self.payloads = payloads

    def __len__(self) -> int:
        return len(self.at)

    @staticmethod
    def none() -> Outputs:
        return Outputs(np.empty(0, np.int64), pa.array([], pa.binary()))


class Operator(ABC):
    """A deterministic operator over one link-ordered input.

    Contract (the Lazy Standby protocol depends on each point):
    - `process(batch)` returns the indices (into the batch) of the tuples that produce an output, in
      increasing order, as an int64 numpy array (a list of ints is accepted too): at most one output
      per input, in input order, so that Level-1 acks can map an output back to the input that made it.
      A `stateful` operator returns `Outputs` instead: new tuples, each mapped to an input, several to
      one input where it must (Level-1 acks then stop before that input until Nd holds all of them).
    - The result depends only on the tuples seen so far, in link order: N and N' fed the same positions
      make the same outputs with the same sequence numbers. Parameters change only through control tuples
      (stream id 0) in the link order, so both switch at the same position (seed 003).
    - `process` and `submit` are called from one thread, batches in increasing position order, none
      skipped except through `restore`, which resets to a checkpoint taken at `position`.

    Pipelining: the node calls `submit(batch)`, which returns a future of what `process` would return, and
    collects the futures in submission order; up to `in_flight_max` tuples may be submitted and not yet
    collected (backpressure beyond that goes into IQ). An engine with a latency per call (Spark's
    micro-batches) answers several calls at once that way. `restore` is called only with nothing in flight.
    The default `submit` runs `process` at once: an operator without latency needs nothing else.
    """

    name = "operator"
    # An operator whose outputs depend on more inputs than the one each is mapped to (a window): a standby
    # then applies every input to its state (it skips none that Nd's output covers), and a node that
    # resumes at a checkpoint rebuilds its state from the inputs Nu still holds.
    stateful = False
    in_flight_max = 0  # tuples submitted and not yet collected, at most (0: one call at a time)
    # At takeover, hand the operator what the standby held together with what Nu resends, in one call,
    # instead of starting on the held inputs while the links are rebuilt: right for an engine whose every
    # call costs a fixed time far above the wait (a Spark micro-batch, 0.25-0.5 s, against the 10-60 ms
    # until Nu's resend is in), where starting early means a second call for the resend.
    takeover_gather = False
    # The operator holds a standby's input back itself (lazy()), in larger runs than a node's calls: a
    # stateful standby then hands it every input on arrival instead of deferring it in IQ' (it skips none,
    # so waiting for Nd's acks saves nothing, and what waits sealed in IQ' a takeover must still decode).
    paces_standby = False
    # probe_copy gives a copy (node/operator_probe.py): the node then builds its probe without making one.
    probeable = False
    # Set by an operator that can answer nothing more (its engine is gone: a Spark JVM that was killed),
    # found out between calls: the node then ends its operator loop with it, as it would on a failed call.
    # A lazy standby may make no call for a long time, and must not stay registered on a dead engine.
    failure: BaseException | None = None

    def input_fault(self, error: BaseException) -> bool:
        """Whether `error`, raised by a call, may follow from the call's inputs (a value the operator cannot
        compute with) rather than from the engine (memory, a dead JVM, a timeout). The node then narrows
        the call down to the inputs that fail alone and quarantines them (OperatorBase._bisect); any other
        error fails the node. A call that raises must leave the operator as it was before it."""
        return isinstance(error, (ValueError, ArithmeticError, TypeError, KeyError, IndexError)) and not isinstance(
            error, LazyStandbyException)

    @abstractmethod
    def process(self, batch: TupleBatch) -> np.ndarray | list[int]:
        """Indices of the tuples of `batch` that are selected."""

    def submit(self, batch: TupleBatch) -> Future:
        """A future of `process(batch)`; done already unless the operator pipelines."""
        fut: Future = Future()
        try:
            fut.set_result(self.process(batch))
        except Exception as e:  # delivered where the node collects the result, as a pipelined failure is
            fut.set_exception(e)
        return fut

    def probe_copy(self) -> Operator | None:
        """A new operator of the same query as this one was built with, holding no state, for timing a call
        apart from the live one (node/operator_probe.py), where `probeable`; None (the default) where a copy
        is not cheap or not private (an engine's: a Spark query, its session and its state store)."""
        return None

    def lazy(self, on: bool) -> None:  # noqa: B027 - an operator without a cost per call has nothing to save
        """The node is a standby (`on`) or now needs every answer as soon as it can be had (off: a takeover
        began). While on, an engine with a cost per call may answer later, in fewer and larger calls, by at
        most a bound it documents; once off, everything submitted is answered without that delay."""

    def restore(self, position: int, params: Params | None = None) -> None:  # noqa: B027 - stateless: nothing
        """Resume after a jump to a checkpoint at input `position`. `params` is the control record in force
        there (the latest at or before `position`, None when there was none): an operator that has not
        applied it yet switches to it, at its own position, exactly as if it had seen it in the link order
        (the control record may lie inside the positions the jump skipped)."""

    # An operator whose state can be shipped (Passive Standby, standby_state=snapshot): `state_view` takes
    # it at a call boundary, cheaply (under the node's lock); `encode_state` makes bytes of that view
    # elsewhere, while calls go on; `load_state` puts such bytes back in place of whatever is held. A
    # delta view (core/snapshots.py) holds what the inputs since the previous view added, and only that.
    snapshots = False

    def state_view(self, full: bool = True) -> object:
        """The state as it is now (`full`), or what changed since the previous view, in a form later calls
        do not change (immutable parts, copied shallowly). Every view starts a new delta. An operator that
        cannot tell a delta (it tracked none since) gives a full view: `view_is_full` says which."""
        raise NotImplementedError(f"{self.name} keeps no state to ship")

    def view_is_full(self, view: object) -> bool:
        return True

    def encode_state(self, view: object) -> bytes:
        raise NotImplementedError(f"{self.name} keeps no state to ship")

    def load_state(self, data: bytes, deltas: Sequence[bytes] = ()) -> None:
        """Replace the state with the one a full view's `encode_state` made, then add each delta's, in
        order; only with nothing in flight."""
        raise NotImplementedError(f"{self.name} keeps no state to ship")

    def live_keys(self) -> int:
        """Groups of state held (a window's open (window, key) groups); 0 for a stateless operator."""
        return 0

    def state_bytes(self) -> int:
        """Bytes of state held; 0 for a stateless operator."""
        return 0

    def close(self) -> None:  # noqa: B027
        """Release engine resources."""
