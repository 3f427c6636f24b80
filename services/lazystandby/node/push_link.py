"""The outbound link's push to the primary: every tuple of OQu pushed at once, in frames of up to frame_max
tuples flushed after linger_ms (an empty frame every ack_poll_ms when none is due, so that Level-1 acks keep
coming). Each reply says how far the primary has received (the next frame starts there) and carries its
Level-1 ack, which the link applies (`Pusher.level1`). A failed push is retried after a backoff, from where
the primary says it stands when the error leaves that in doubt; a takeover (`moved_to`) starts a new
generation, whose frames go to the new primary from the position its resend starts at, and no reply of the
old one counts.

What it reads of the outbound link it pushes for (node/outbound.py) is `Pusher`: its lock, OQu, checkpoint
and epoch.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Protocol

from ..config import NodeConfig
from ..core import messages as m
from ..core.acks import Checkpoint
from ..core.errors import PeerError, Status
from ..core.queues import KeyedQueue
from ..core.retry import after_push_error
from ..transport.peer import Peer
from .bsize_tuning import BsizeTuning
from .common import Backoff


class Pusher(Protocol):
    """What the push link reads and calls of the outbound link it pushes for; all of it holding `lock`, but `clock`
    and `stopped`."""

    name: str
    lock: threading.Condition
    counters: Counter
    oqu: KeyedQueue
    checkpoint: Checkpoint
    tuning: BsizeTuning

    @property
    def epoch(self) -> int: ...
    @property
    def stopped(self) -> bool: ...
    def clock(self) -> float: ...
    def params_at(self, pos: int) -> m.Params | None: ...
    def level1(self, epoch: int, ack: Checkpoint) -> None: ...
    def primary_link(self, address: str, error: PeerError | None) -> None: ...


class PushLink:
    """The push to the primary in force (`address`); its loop is the node's `primary`."""

    def __init__(self, cfg: NodeConfig, out: Pusher, peers: Callable[[str], Peer], log) -> None:
        self.cfg = cfg
        self.out = out
        self.peers = peers
        self.log = log
        self.address = cfg.primary
        self.peer: Peer = peers(cfg.primary)
        self.cursor = 1  # the next position to push
        self.generation = 0  # a takeover starts a new one: replies of an older one speak for a fenced primary
        self.received_by_primary = 0
        self.resync = False  # the next frame is empty: it asks where the primary stands
        self._last_send = out.clock()
        self._backoff = Backoff()

    def restored(self, address: str) -> None:
        """Holding the lock: a restarted Nu pushes to the primary it had, asking where it stands first."""
        if address and address != self.address:
            self.peer, self.address = self.peers(address), address
        self.resync = True

    def moved_to(self, address: str, start: int) -> None:
        """Holding the lock: a takeover; frames go to `address` from position `start` (the caller closes the
        old `peer` outside the lock)."""
        self.peer, self.address = self.peers(address), address
        self.generation += 1
        self.cursor = start
        self.resync = False

    def room(self) -> int:
        """Holding the lock: how many more tuples the source may admit before Nu holds more than
        primary_lag_max that the primary has not taken. Beyond that they would only wait in OQu, while the
        backup ships them to the standby at once: the standby then holds inputs that Nd's acks cannot cover
        within standby_defer, and processes them all (the second operator a lazy standby exists to avoid)."""
        lag = self.cfg.primary_lag_max
        if not lag:
            return 1 << 62
        return max(0, lag - (self.out.oqu.last - (self.cursor - 1)))

    def loop(self) -> None:
        """One frame: waits until one is due (full, lingered, a resync, or the ack poll), pushes it, and
        applies the reply."""
        out, cfg = self.out, self.cfg
        linger, poll = cfg.linger_ms / 1000, cfg.ack_poll_ms / 1000
        with out.lock:
            while not out.stopped:
                avail = out.oqu.last - max(self.cursor, out.oqu.first) + 1
                idle = out.clock() - self._last_send
                if self.resync or avail >= cfg.frame_max or (avail > 0 and idle >= linger):
                    break
                if idle >= poll:
                    break
                out.lock.wait(linger if avail > 0 else poll - idle)
            if out.stopped:
                return
            batch = None if self.resync else out.oqu.read(self.cursor, cfg.frame_max)
            gen, peer, epoch, ckpt = self.generation, self.peer, out.epoch, out.checkpoint
            self._last_send = out.clock()
        frame = m.Frame(epoch=epoch, sender=out.name, checkpoint=ckpt, batch=batch,
                        params=out.params_at(ckpt.input_pos))
        t0 = out.clock()
        try:
            ack = peer.push(frame, cfg.rpc_timeout)
        except PeerError as e:
            out.primary_link(peer.address, e)
            self._failed(e, gen)
            return
        out.primary_link(peer.address, None)
        with out.lock:
            out.counters["primary_bytes"] += ack.wire_bytes
            if gen != self.generation:
                return  # a takeover happened meanwhile: this reply speaks for a fenced primary
            self.resync = False
            self._backoff.reset()
            if batch is not None:
                out.counters["primary_tuples"] += len(batch)
                out.counters["primary_frames"] += 1
                out.tuning.push_cost.add(ack.wire_bytes, out.clock() - t0)
            self.received_by_primary = ack.received_through
            self.cursor = ack.received_through + 1
            out.level1(ack.epoch, ack.level1)
            out.lock.notify_all()

    def _failed(self, e: PeerError, gen: int) -> None:
        out = self.out
        with out.lock:
            if gen != self.generation:
                return
            out.counters[f"primary_error_{e.status.lower()}"] += 1
            # The receiver's received_through is the truth; an empty frame fetches it before resending.
            self.resync = after_push_error(e.status).resync
        if e.status is not Status.RESOURCE_EXHAUSTED:
            self.log.debug("%s: push failed: %s", out.name, e)
        delay = self._backoff.next()
        with out.lock:
            # A takeover (a new generation) ends the wait: while the standby detected the crash, the backoff
            # grew to tens of ms, and the new primary's resend waited it out (20-30 ms of data recovery).
            out.lock.wait_for(lambda: self.generation != gen or out.stopped, delay)
