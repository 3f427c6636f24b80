"""The operator node's outbound link to Nd: OQ delivered in frames of up to frame_max outputs, each answered
by Nd's Level-0 ack (the last output it holds), which the node turns into OQ's trim and the Level-1 ack it
gives Nu (`on_level0`). A primary asks Nd where it stands before sending anything (a resync): a restarted
one must not send again what Nd holds (Precise), and Nd's answer trims OQ. An idle primary still sends an
empty frame every idle_frame_s: it renews its lease at Nd, and a primary that was paused and replaced
learns at once that it is fenced.

A part of the primary's side (`node.primary_side.deliver`) holding the link's own state: the next output
to send, whether the next frame only asks where Nd stands, and the backoff after a failed call. What it
reads and calls of the side it delivers for is `Deliverer`: whether it hands over, whether its operator
has stalled, and what follows from Nd's answers (fenced, an epoch Nd does not know, the last frame taken).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..core import messages as m
from ..core.errors import PeerError, Status
from ..core.retry import fenced_by
from ..core.roles import Role
from ..core.tuples import TupleBatch
from ..transport.peer import Peer
from .common import IDLE_STANDBY_WAIT_S, Backoff

if TYPE_CHECKING:
    from .operator_base import OperatorBase


class Deliverer(Protocol):
    """What the deliver link reads and calls of the primary's side; all of it holding the node's lock, but
    `announce`, which makes a call."""

    @property
    def leaving(self) -> bool:
        """A planned handover is under way: the next frame is the last, and says so."""
    def stalled_s(self) -> float: ...
    def fence(self, why: str) -> None: ...
    def left(self, why: str) -> None: ...
    def delivered(self) -> None: ...
    def announce(self, peer: Peer, epoch: int) -> None: ...


class DeliverLink:
    """OQ -> Nd for the primary in force; its loop is the node's `output`."""

    def __init__(self, node: OperatorBase, side: Deliverer) -> None:
        self.n = node
        self.side = side
        self.next = 1  # the next output to send
        self.resync = True  # the next frame is empty: it asks where Nd stands
        self._backoff = Backoff()

    def resynced(self, delivered_through: int) -> None:
        """Holding the lock: Nd said where it stands (a takeover's step 3): frames go on after it."""
        self.next = delivered_through + 1
        self.resync = False

    def loop(self) -> None:
        """One frame: waits until one is due, sends it, and applies Nd's answer."""
        due = self._due()
        if due is None:
            return
        batch, epoch, peer, leaving = due
        frame = m.OutputFrame(epoch=epoch, sender=self.n.name, batch=batch, leaving=leaving)
        try:
            ack = peer.deliver(frame, self.n.cfg.rpc_timeout)
        except PeerError as e:
            self._failed(e, peer, epoch, leaving)
            return
        self.n.links.note("downstream", peer.address, None)
        with self.n.lock:
            self._backoff.reset()
            self.resync = False
            self.side.delivered()
            self.n.counters["output_bytes"] += ack.wire_bytes
            if batch is not None:
                self.n.counters["delivered_tuples"] += len(batch)
            self.n.on_level0(ack.received_through)
            self.next = ack.received_through + 1
            if leaving:
                self.side.left(f"Nd holds its outputs through {ack.received_through}")

    def _due(self) -> tuple[TupleBatch | None, int, Peer, bool] | None:
        """Waits, holding the lock, until a frame is due (outputs to send, a resync, the last frame of a
        handover, or idle_frame_s without one); the frame's batch (None: empty), epoch, Nd and whether it
        is the last. None when nothing is to be sent now."""
        n, idle = self.n, self.n.cfg.idle_frame_s
        with n.lock:
            deadline = n.clock() + idle
            while not n.stopped and (n.state.role is not Role.PRIMARY or
                                     (not self.side.leaving and not self.resync
                                      and n.oq.last < self.next and n.clock() < deadline)):
                if n.state.role is not Role.PRIMARY:
                    # Nothing to send until this node is primary: it says so (standby_wake), and the
                    # timeout only bounds what a wake missed would cost.
                    n.standby_wake.wait(IDLE_STANDBY_WAIT_S)
                    deadline = n.clock() + idle
                    continue
                # Up to the deadline, not a whole interval past a notify that came just before it, which
                # would space the empty frames up to twice ack_poll_ms apart.
                n.lock.wait(max(0.001, deadline - n.clock()))
            if n.stopped or n.downstream is None:
                return None
            leaving = self.side.leaving
            if not leaving and (self.resync or n.oq.last < self.next) and self.side.stalled_s():
                # An empty frame would renew this primary's lease at Nd, and its operator has stalled: the
                # standby's takeover must not be declined.
                n.counters["idle_frames_withheld"] += 1
                return None
            batch = None if self.resync else n.oq.read(self.next, n.cfg.frame_max)
            return batch, n.state.epoch, n.downstream, leaving

    def _failed(self, e: PeerError, peer: Peer, epoch: int, leaving: bool) -> None:
        self.n.links.note("downstream", peer.address, e)
        with self.n.lock:
            self.n.counters[f"deliver_error_{e.status.lower()}"] += 1
            if fenced_by(e.status):
                self.side.fence(f"Nd refused epoch {epoch}: {e.message}")
                return
            if leaving:
                # Tried once: the lease then ends by itself within takeover_lease, before the standby's
                # takeover is asked again (a declined one is, at its next heartbeat).
                self.side.left(f"its last frame failed ({e.status})")
                return
            self.resync = True
        if e.status is Status.FAILED_PRECONDITION:
            self.side.announce(peer, epoch)  # Nd does not know this epoch (it restarted): tell it
        self.n.sleep(self._backoff.next())
