"""Passive Standby for a window query (standby_state=snapshot; seed 000's comparison, seed 001's snapshots).

The standby does no operator work. Every `snapshot_interval` the primary takes its operator's state at a
call boundary (after input P, which made C outputs) with the outputs Nd had not acknowledged then (the
tail), and ships them; the standby keeps the newest state and the backup after it, dropping the backup
up to P as each snapshot comes. At a takeover it loads that state, puts the tail in OQ' (for Nd to get
what it lacks of it), and processes what it holds after P and what Nu resends: the operator is
deterministic over the link order, so it makes the outputs C+1, ... the primary made or would have made.

Snapshots are incremental (core/snapshots.py): after a full one, each is a delta of what the inputs since
the one before added, until the deltas weigh as much as the full one did; the standby holds the chain
and loads all of it at a takeover. A chain that breaks (a failed send, a refused delta, a new standby)
makes the next snapshot full.

Invariants: a standby's operator never runs (it takes from IQ' only up to P, and drops it); the snapshot is
loaded, in the operator's own thread, before any input after P is processed; a takeover that rebuilds
from Nu instead (Nu's resend starts past what this node holds) forgets the snapshot.

A part of an operator node (`node.snapshots`), holding the snapshots' state as its own; it reads the node
it is part of and changes it only through what the node defines (OQ, `processed`, the counters), under the
node's lock.
"""

from __future__ import annotations

import threading

from ..core import messages as m
from ..core.errors import PeerError, WrongRole
from ..core.roles import Role
from ..core.snapshots import FULL, SnapshotChain, SnapshotPlan
from ..transport.peer import Peer

TAIL_WAIT_S = 1.0


class PassiveStandby:
    """The snapshots of a Passive Standby pair: taken and sent by the primary, held and loaded by N'."""

    def __init__(self, node) -> None:
        self.node = node
        self.chain: SnapshotChain[m.SnapshotFrame] = SnapshotChain()  # a standby's full one and deltas
        self._plan = SnapshotPlan()  # a primary's: full or delta next
        self.loaded = True  # nothing held to load
        self._received_at = 0.0
        self.due_at = 0.0
        self._waiting_since = -1.0  # the due time of a snapshot waiting for Nd's acks
        self.job: tuple | None = None  # a primary's snapshot taken, waiting for the sender
        self._wake = threading.Event()
        self._peer: tuple[str, Peer] | None = None
        self.encode_s = 0.0  # the last snapshot's encoding time (a primary's; a standby's, as told)
        # In force: the setting, or the interval its Passive Standby chose for recovery_target_ms, told in
        # the heartbeats (RecoveryForecast.tune).
        self.interval = node.cfg.snapshot_interval
        self.load_s = 0.0  # a Passive Standby's snapshot load at its takeover

    # --- the primary's side --------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        """Whether the node is of a Passive Standby pair (its `passive`, from standby_state)."""
        return self.node.passive

    def maybe_take(self) -> None:
        """Holding the lock, at a call boundary (nothing in flight): when a snapshot is due and the standby's
        address is known (its heartbeats say it), the state's view, the checkpoint it stands at and the tail
        go to the sender; the view is cheap (shallow), its encoding is the sender's.

        A due snapshot waits, up to TAIL_WAIT_S (half an interval at most), for a call boundary where Nd has
        acknowledged every output: a window closing makes a burst of outputs that Nd acknowledges within
        tens of milliseconds, and a snapshot taken inside the burst would carry it all as its tail (at a
        million keys, most of the snapshot's bytes). The wait is short: what a takeover replays grows
        with the snapshot's age."""
        n = self.node
        if not self.enabled or n.state.role is not Role.PRIMARY or n.calls or not n.primary_side.standby_at:
            return
        now = n.clock()
        due = self.due_at
        if now < due or self.job is not None:
            return  # a delta's view must reach the sender: the next is taken once it has the one before
        at = n.processed
        if at.output_count > n.level0 and now < due + min(TAIL_WAIT_S, self.interval / 2):
            n.counters["snapshots_waited"] += due != self._waiting_since  # once per snapshot
            self._waiting_since = due
            return
        self.due_at = now + self.interval
        tail = n.oq.read(n.level0 + 1, at.output_count - n.level0) if at.output_count > n.level0 else None
        plan, address = self._plan, n.primary_side.standby_at
        view = n.operator.state_view(plan.next_full(address))
        full = n.operator.view_is_full(view)
        base = plan.taken(at.input_pos, full, address)
        self.job = (view, at, tail, n.state.epoch, address, base)
        self._wake.set()

    def send_loop(self) -> None:
        """The sender: the newest snapshot taken, encoded here (the operator's calls go on meanwhile) and
        sent; a failed send is counted and the next one, a snapshot_interval later, carries newer state."""
        n = self.node
        if not self._wake.wait(0.1):
            return
        self._wake.clear()
        with n.lock:
            job, self.job = self.job, None
        if job is None:
            return
        view, at, tail, epoch, address, base = job
        t0 = n.clock()
        state = n.operator.encode_state(view)
        encode_s = n.clock() - t0
        frame = m.SnapshotFrame(epoch=epoch, sender=n.name, at=at, state=state, tail=tail, encode_s=encode_s,
                                base=base)
        try:
            ack = self._peer_for(address).snapshot(frame, n.cfg.rpc_timeout)
        except PeerError as e:
            with n.lock:
                self._plan.sent(at.input_pos, base == FULL, len(state), None)
                n.counters["snapshot_errors"] += 1
            n.links.note("standby", address, e)
            return
        with n.lock:
            self._plan.sent(at.input_pos, base == FULL, len(state), ack.held_through)
            if ack.held_through != at.input_pos:
                n.counters["snapshots_refused"] += 1
            self.encode_s = encode_s
            n.counters["snapshots_sent"] += 1
            n.counters["snapshot_deltas_sent"] += base != FULL
            n.counters["snapshot_bytes"] += ack.wire_bytes

    def _peer_for(self, address: str) -> Peer:
        n = self.node
        if self._peer is None or self._peer[0] != address:
            if self._peer is not None:
                self._peer[1].close()
            self._peer = (address, n.peers(address))
        return self._peer[1]

    # --- the standby's side --------------------------------------------------------------------------
    @property
    def held(self) -> m.SnapshotFrame | None:
        """A standby's newest snapshot (full or delta), None when none is held."""
        frames = self.chain.links
        return frames[-1][2] if frames else None

    def handle(self, msg: m.SnapshotFrame) -> m.SnapshotAck:
        """Keep a newer full snapshot, or a delta on the newest held; the operator loop drops the backup they
        cover. The answer says how far what is held reaches: short of `msg`, the primary sends a full one."""
        n = self.node
        with n.lock:
            if n.state.role is not Role.STANDBY:
                raise n.wrong_role("Snapshot")
            if not self.enabled:
                raise WrongRole(f"{n.name}: Snapshot is for a standby with standby_state=snapshot; this one "
                                f"keeps its state warm")
            n.check_epoch(msg.epoch, msg.sender, "snapshot")
            chain = self.chain
            if chain.offer(msg.at.input_pos, msg.base, msg):
                self.loaded = False
                self._received_at = n.clock()
                # Loading the chain decodes each of its snapshots: about what encoding them took.
                self.encode_s = sum(f.encode_s for f in chain.frames())
                n.counters["snapshots"] += 1
                n.counters["snapshot_deltas"] += msg.base != FULL
                n.lock.notify_all()
                n.standby_wake.notify_all()
            else:
                n.counters["snapshots_refused"] += 1
            return m.SnapshotAck(held_through=chain.through or 0)

    def through(self) -> int | None:
        """Holding the lock: the input position the held snapshot covers (None: none held)."""
        return self.chain.through if self.enabled else None

    def due(self) -> bool:
        """Holding the lock: this node has taken over (or is taking over) and its snapshot is not loaded."""
        n = self.node
        return (self.enabled and self.held is not None and not self.loaded
                and n.state.role is not Role.STANDBY)

    def load(self) -> None:
        """In the operator's thread, nothing in flight: the held snapshot becomes the operator's state, the
        node stands at its checkpoint, and OQ' holds the tail past what it holds (Nd gets from it what it
        lacks; a passive standby made no outputs, so OQ' holds nothing else)."""
        n = self.node
        n.collect(block=True)
        with n.lock:
            frames = self.chain.frames()
            if not frames or self.loaded:
                return
        snap = frames[-1]
        t0 = n.clock()
        n.operator.load_state(frames[0].state, [f.state for f in frames[1:]])
        with n.lock:
            self.loaded = True
            n.counters["snapshot_loads"] += 1
            n.processed_to(snap.at)
            tail, count = snap.tail, snap.at.output_count
            if n.oq.last < count:
                if tail is not None and len(tail):
                    if n.oq.last < tail.first - 1:
                        n.oq.reset(tail.first - 1)
                    n.oq.append(tail.slice(n.oq.last + 1, tail.end), over=True)
                else:
                    n.oq.reset(count)
            self.load_s = n.clock() - t0
            n.lock.notify_all()

    def forget(self) -> None:
        """Holding the lock: the state is rebuilt from Nu instead; the snapshot is not to be loaded over it."""
        self.chain.clear()
        self.loaded = True

    def status(self) -> dict | None:
        n = self.node
        if not self.enabled:
            return None
        frames = self.chain.frames()
        c = n.counters
        out = {"sent": c.get("snapshots_sent", 0), "bytes_sent": c.get("snapshot_bytes", 0),
               "deltas_sent": c.get("snapshot_deltas_sent", 0), "encode_s": round(self.encode_s, 4)}
        if frames:
            out.update(held_through=frames[-1].at.input_pos, held_bytes=sum(len(f.state) for f in frames),
                       held_deltas=len(frames) - 1, held_age_s=round(n.clock() - self._received_at, 3),
                       loaded=self.loaded)
        return out
