"""The inbound side of an operator node: what arrives from Nu (the primary's pushes, the standby's backup),
checked and queued in IQ (IQ' on a standby) in link order.

A part of the node holding only its own state: the input queue, the last position held, the per-stream
sequence check, the stream ids this deployment knows, and when inputs arrived (a standby defers only while
covering them takes less than standby_defer). Its caller holds the node's lock.

Contract (`admit`): a frame is checked whole, positions, sequence numbers and room, before anything
changes, so a refused frame leaves the node as it was; the positions held only grow, except at a jump.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from ..config import NodeConfig
from ..core import messages as m
from ..core.acks import Checkpoint
from ..core.admission import admit_runs
from ..core.errors import OversizedMessage, QueueFull
from ..core.held import Sealed
from ..core.queues import InputQueue
from ..core.seq import PerStreamSequence, StreamRegistry
from ..core.tuples import TupleBatch
from .runs import Jump

ARRIVALS_KEPT = 4096  # (last position, when) of the latest frames, for the time covering them took


class Inbound:
    """IQ and what this node holds of the link order."""

    def __init__(self, cfg: NodeConfig, clock: Callable[[], float]) -> None:
        self.name = cfg.name
        self._clock = clock
        self._max_tuple_bytes = cfg.max_tuple_bytes
        self.registry = StreamRegistry(cfg.stream_names)
        self.seqcheck = PerStreamSequence(cfg.name)
        self.iq = InputQueue(f"{cfg.name} IQ", capacity=cfg.input_queue_capacity)
        self.received_through = 0  # the last input position held
        self.arrived: deque[tuple[int, float]] = deque(maxlen=ARRIVALS_KEPT)  # (last position, when), oldest first
        # How long the latest covered input took to be covered after it arrived (None until one was).
        self.cover_latency: float | None = None

    def check_tuples(self, batch: TupleBatch, what: str) -> TupleBatch:
        """What this deployment allows in a run of tuples: known stream ids, tuples within the size limit."""
        self.registry.check_ids(batch.streams, batch.seqs, node=self.name)
        biggest = batch.max_payload_bytes()
        if biggest > self._max_tuple_bytes:
            raise OversizedMessage(f"{self.name}: {what} holds a {biggest}-byte tuple; "
                                   f"the limit is {self._max_tuple_bytes}")
        return batch

    def admit(self, batches: list, ckpt: Checkpoint, params: m.Params | None, *, stateful: bool,
              timed: bool) -> bool:
        """Queue `batches` (TupleBatch, or Sealed runs of a lazy standby) if they follow on from what this
        node holds, or jump to `ckpt` first when they start past it; True when they jumped. Sealed runs are
        checked for their positions here and for their tuples when decoded (their per-stream seqs are those
        the primary checks as Nu pushes the same positions to it). A stateful node that skips ahead
        rebuilds its state from the first position, which the checkpoint must cover up to: a jump to just
        before it. `timed`: the arrival is kept for the covering time (a standby's)."""
        first = batches[0].first
        rebuild = stateful and first > self.received_through + 1 and ckpt.input_pos >= first - 1
        jump = admit_runs(self.name, self.received_through, [(b.first, b.end) for b in batches],
                          Checkpoint(first - 1, ckpt.output_count) if rebuild else ckpt)
        sealed = isinstance(batches[0], Sealed)
        items = batches if sealed else [TupleBatch.concat(batches)]
        count = sum(map(len, items))
        pending = None if sealed else self.seqcheck.check(items[0].streams, items[0].seqs, fresh=jump,
                                                          skip=StreamRegistry.CONTROL)
        if len(self.iq) and len(self.iq) + count > self.iq.capacity:
            raise QueueFull(f"{self.name}: IQ full ({len(self.iq)} of {self.iq.capacity} tuples)")
        # Checked; now change state.
        if jump:
            self.jump(ckpt, params, rebuild_from=first if stateful else None)
        if pending is None:
            self.seqcheck.reset()  # what follows an eager frame is checked from there
        else:
            self.seqcheck.commit(pending)
        now = self._clock()
        for it in items:
            self.iq.offer(it, now)  # type: ignore[arg-type]
        if timed:
            self.arrived.append((items[-1].last, now))
        self.received_through = items[-1].last
        return bool(jump)

    def jump(self, ckpt: Checkpoint, params: m.Params | None = None, *, rebuild_from: int | None = None) -> None:
        """Skip to a checkpoint: every input through it produced only outputs Nd already holds. `params`,
        the control record in force at the checkpoint, switches the operator as if it had seen it.
        `rebuild_from` (a stateful operator): the inputs from there on follow, and the state is rebuilt from
        them; the checkpoint may lie inside them."""
        self.iq.offer(Jump(ckpt, params, rebuild_from), self._clock())  # type: ignore[arg-type]
        self.received_through = ckpt.input_pos if rebuild_from is None else rebuild_from - 1
        self.seqcheck.reset()  # the per-stream history restarts after the skipped positions

    def covered_through(self, pos: int) -> None:
        """Every input through `pos` is covered by Nd's output: how long that took since it arrived."""
        arrived = self.arrived
        when = None
        while arrived and arrived[0][0] <= pos:
            when = arrived.popleft()[1]
        if arrived and when is None:
            when = arrived[0][1]  # covered part of the oldest run still listed
        if when is not None:
            self.cover_latency = self._clock() - when
