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

A mixin over `operator_base.OperatorBase`, whose state it reads and changes under the node's lock.
"""

from __future__ import annotations

import threading

from ..core import messages as m
from ..core.errors import PeerError, WrongRole
from ..core.roles import Role
from ..core.snapshots import FULL, SnapshotChain, SnapshotPlan
from ..transport.peer import Peer

TAIL_WAIT_S = 1.0


class PassiveSide:
    """The snapshots of a Passive Standby pair: taken and sent by the primary, held and loaded by N'."""

    def _init_passive(self) -> None:
        self.passive = self.cfg.standby_state == "snapshot"
        self.snapshot_chain: SnapshotChain[m.SnapshotFrame] = SnapshotChain()  # a standby's full one and deltas
        self._snapshot_plan = SnapshotPlan()  # a primary's: full or delta next
        self._snapshot_loaded = True  # nothing held to load
        self._snapshot_received_at = 0.0
        self._snapshot_due_at = 0.0
        self._snapshot_waiting_since = -1.0  # the due time of a snapshot waiting for Nd's acks
        self._snapshot_job: tuple | None = None  # a primary's snapshot taken, waiting for the sender
        self._snapshot_wake = threading.Event()
        self._snapshot_peer: tuple[str, Peer] | None = None
        self.snapshot_encode_s = 0.0  # the last snapshot's encoding time (a primary's; a standby's, as told)
        # In force: the setting, or the interval its Passive Standby chose for recovery_target_ms, told in
        # the heartbeats (RecoveryForecast.tune).
        self.snapshot_interval = self.cfg.snapshot_interval
        self.recovery_load_s = 0.0  # a Passive Standby's snapshot load at its takeover

    # --- the primary's side --------------------------------------------------------------------------
    def _maybe_snapshot(self) -> None:
        """Holding the lock, at a call boundary (nothing in flight): when a snapshot is due and the standby's
        address is known (its heartbeats say it), the state's view, the checkpoint it stands at and the tail
        go to the sender; the view is cheap (shallow), its encoding is the sender's.

        A due snapshot waits, up to TAIL_WAIT_S (half an interval at most), for a call boundary where Nd has
        acknowledged every output: a window closing makes a burst of outputs that Nd acknowledges within
        tens of milliseconds, and a snapshot taken inside the burst would carry it all as its tail (at a
        million keys, most of the snapshot's bytes). The wait is short: what a takeover replays grows
        with the snapshot's age."""
        if not self.passive or self.state.role is not Role.PRIMARY or self.calls or not self._standby_at:
            return
        now = self.clock()
        due = self._snapshot_due_at
        if now < due or self._snapshot_job is not None:
            return  # a delta's view must reach the sender: the next is taken once it has the one before
        at = self.processed
        if at.output_count > self.level0 and now < due + min(TAIL_WAIT_S, self.snapshot_interval / 2):
            self.counters["snapshots_waited"] += due != self._snapshot_waiting_since  # once per snapshot
            self._snapshot_waiting_since = due
            return
        self._snapshot_due_at = now + self.snapshot_interval
        tail = self.oq.read(self.level0 + 1, at.output_count - self.level0) if at.output_count > self.level0 else None
        plan, address = self._snapshot_plan, self._standby_at
        view = self.operator.state_view(plan.next_full(address))
        full = self.operator.view_is_full(view)
        base = plan.taken(at.input_pos, full, address)
        self._snapshot_job = (view, at, tail, self.state.epoch, address, base)
        self._snapshot_wake.set()

    def _snapshot_loop(self) -> None:
        """The sender: the newest snapshot taken, encoded here (the operator's calls go on meanwhile) and
        sent; a failed send is counted and the next one, a snapshot_interval later, carries newer state."""
        if not self._snapshot_wake.wait(0.1):
            return
        self._snapshot_wake.clear()
        with self.lock:
            job, self._snapshot_job = self._snapshot_job, None
        if job is None:
            return
        view, at, tail, epoch, address, base = job
        t0 = self.clock()
        state = self.operator.encode_state(view)
        encode_s = self.clock() - t0
        frame = m.SnapshotFrame(epoch=epoch, sender=self.name, at=at, state=state, tail=tail, encode_s=encode_s,
                                base=base)
        try:
            ack = self._snapshot_peer_for(address).snapshot(frame, self.cfg.rpc_timeout)
        except PeerError as e:
            with self.lock:
                self._snapshot_plan.sent(at.input_pos, base == FULL, len(state), None)
                self.counters["snapshot_errors"] += 1
            self.links.note("standby", address, e)
            return
        with self.lock:
            self._snapshot_plan.sent(at.input_pos, base == FULL, len(state), ack.held_through)
            if ack.held_through != at.input_pos:
                self.counters["snapshots_refused"] += 1
            self.snapshot_encode_s = encode_s
            self.counters["snapshots_sent"] += 1
            self.counters["snapshot_deltas_sent"] += base != FULL
            self.counters["snapshot_bytes"] += ack.wire_bytes

    def _snapshot_peer_for(self, address: str) -> Peer:
        if self._snapshot_peer is None or self._snapshot_peer[0] != address:
            if self._snapshot_peer is not None:
                self._snapshot_peer[1].close()
            self._snapshot_peer = (address, self.peers(address))
        return self._snapshot_peer[1]

    # --- the standby's side --------------------------------------------------------------------------
    @property
    def snapshot_held(self) -> m.SnapshotFrame | None:
        """A standby's newest snapshot (full or delta), None when none is held."""
        frames = self.snapshot_chain.links
        return frames[-1][2] if frames else None

    def handle_snapshot(self, msg: m.SnapshotFrame) -> m.SnapshotAck:
        """Keep a newer full snapshot, or a delta on the newest held; the operator loop drops the backup they
        cover. The answer says how far what is held reaches: short of `msg`, the primary sends a full one."""
        with self.lock:
            if self.state.role is not Role.STANDBY:
                raise self._wrong("Snapshot")
            if not self.passive:
                raise WrongRole(f"{self.name}: Snapshot is for a standby with standby_state=snapshot; this one "
                                f"keeps its state warm")
            self._check_epoch(msg.epoch, msg.sender, "snapshot")
            chain = self.snapshot_chain
            if chain.offer(msg.at.input_pos, msg.base, msg):
                self._snapshot_loaded = False
                self._snapshot_received_at = self.clock()
                # Loading the chain decodes each of its snapshots: about what encoding them took.
                self.snapshot_encode_s = sum(f.encode_s for f in chain.frames())
                self.counters["snapshots"] += 1
                self.counters["snapshot_deltas"] += msg.base != FULL
                self.lock.notify_all()
                self.standby_wake.notify_all()
            else:
                self.counters["snapshots_refused"] += 1
            return m.SnapshotAck(held_through=chain.through or 0)

    def _snapshot_through(self) -> int | None:
        """Holding the lock: the input position the held snapshot covers (None: none held)."""
        return self.snapshot_chain.through if self.passive else None

    def _snapshot_due(self) -> bool:
        """Holding the lock: this node has taken over (or is taking over) and its snapshot is not loaded."""
        return (self.passive and self.snapshot_held is not None and not self._snapshot_loaded
                and self.state.role is not Role.STANDBY)

    def _load_snapshot(self) -> None:
        """In the operator's thread, nothing in flight: the held snapshot becomes the operator's state, the
        node stands at its checkpoint, and OQ' holds the tail past what it holds (Nd gets from it what it
        lacks; a passive standby made no outputs, so OQ' holds nothing else)."""
        self._collect(block=True)
        with self.lock:
            frames = self.snapshot_chain.frames()
            if not frames or self._snapshot_loaded:
                return
        snap = frames[-1]
        t0 = self.clock()
        self.operator.load_state(frames[0].state, [f.state for f in frames[1:]])
        with self.lock:
            self._snapshot_loaded = True
            self.counters["snapshot_loads"] += 1
            self._processed_to(snap.at)
            tail, count = snap.tail, snap.at.output_count
            if self.oq.last < count:
                if tail is not None and len(tail):
                    if self.oq.last < tail.first - 1:
                        self.oq.reset(tail.first - 1)
                    self.oq.append(tail.slice(self.oq.last + 1, tail.end), over=True)
                else:
                    self.oq.reset(count)
            self.recovery_load_s = self.clock() - t0
            self.lock.notify_all()

    def _forget_snapshot(self) -> None:
        """Holding the lock: the state is rebuilt from Nu instead; the snapshot is not to be loaded over it."""
        self.snapshot_chain.clear()
        self._snapshot_loaded = True

    def snapshot_status(self) -> dict | None:
        if not self.passive:
            return None
        frames = self.snapshot_chain.frames()
        c = self.counters
        out = {"sent": c.get("snapshots_sent", 0), "bytes_sent": c.get("snapshot_bytes", 0),
               "deltas_sent": c.get("snapshot_deltas_sent", 0), "encode_s": round(self.snapshot_encode_s, 4)}
        if frames:
            out.update(held_through=frames[-1].at.input_pos, held_bytes=sum(len(f.state) for f in frames),
                       held_deltas=len(frames) - 1, held_age_s=round(self.clock() - self._snapshot_received_at, 3),
                       loaded=self._snapshot_loaded)
        return out
