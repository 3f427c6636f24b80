"""Failover planning (seed 000 section 3.6), made Precise.

The standby runs these steps when its detector suspects the primary (node/operator_node.py calls them in
this order, numbered the same):

  1. detect     the heartbeat detector suspects the primary
  2. fence      take epoch e+1; Nd and Nu refuse epoch e from now on
  3. connect Nd Takeover(e+1) at Nd returns k, the last output Nd holds
  4. plan       `plan_takeover`: replay OQ' outputs k+1.. ; ask Nu for positions after what we received
  5. connect Nu Takeover(e+1, resend_from) at Nu: it stops the old primary's link, stops the backup, and
                resends every position from max(resend_from, trim + 1) - what it never batched
  6. replay     send Nd the OQ' outputs it lacks; outputs numbered <= k are never sent (Precise)
  7. resume     process the resent inputs; live once the position Nu held at takeover is processed

Rollback recovery would send all of OQ' and let Nd drop repeats; asking Nd first makes it Precise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .acks import Checkpoint
from .errors import PrimaryAlive, PrimaryHeard, StaleEpoch
from .roles import EpochFence


@dataclass(frozen=True, slots=True)
class TakeoverPlan:
    """What a promoting standby sends, and what it asks for."""

    epoch: int
    delivered_through: int
    replay_from: int
    replay_count: int
    resend_from: int


def plan_takeover(
    *, epoch: int, delivered_through: int, received_through: int, oq_first: int, oq_last: int
) -> TakeoverPlan:
    """Step 4. `received_through` is the last input position the standby holds (processed or queued);
    OQ' holds outputs oq_first..oq_last (oq_last < oq_first when empty)."""
    replay_from = max(delivered_through + 1, oq_first)
    return TakeoverPlan(
        epoch=epoch,
        delivered_through=delivered_through,
        replay_from=replay_from,
        replay_count=max(0, oq_last - replay_from + 1),
        resend_from=received_through + 1,
    )


def resend_start(requested: int, checkpoint: Checkpoint, *, rebuild_from: int | None = None) -> int:
    """Nu's side of step 5: it cannot resend what a Level-1 ack trimmed, and need not (Nd holds it).
    `rebuild_from` (a window query: Nu's trim point + 1, at or before the checkpoint's next position): a
    stateful node that lacks inputs from there rebuilds the windows open at the checkpoint from them."""
    if rebuild_from is not None:
        return max(requested, rebuild_from)
    return max(requested, checkpoint.input_pos + 1)


@dataclass(slots=True)
class TakeoverRecord:
    """One takeover a node accepted: who, in which epoch, when (the node's clock), and what it answered."""

    epoch: int
    node: str
    at: float
    reply: object = None
    facts: dict = field(default_factory=dict)

    def as_status(self) -> dict:
        return {"epoch": self.epoch, "node": self.node, "at": self.at, **self.facts}


class TakeoverLog:
    """The takeovers Nu or Nd accepted, and the rule for a new one (steps 3 and 5, the receiver's side).

    A takeover must bring an epoch newer than any seen, or it could not fence the primary it replaces;
    the same takeover retried (same node, same epoch: its reply was lost) is recognised, not refused."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.records: list[TakeoverRecord] = []

    @property
    def last(self) -> TakeoverRecord | None:
        return self.records[-1] if self.records else None

    def retry_of(self, epoch: int, node: str) -> TakeoverRecord | None:
        last = self.last
        return last if last is not None and last.epoch == epoch and last.node == node else None

    def won_by_other(self, epoch: int, node: str) -> bool:
        """A takeover into `epoch` was accepted here from a node other than `node`."""
        return any(r.epoch == epoch and r.node != node for r in self.records)

    def check(self, fence: EpochFence, epoch: int, node: str) -> TakeoverRecord | None:
        """The earlier record when this is a retry; None for a new takeover; StaleEpoch otherwise."""
        retry = self.retry_of(epoch, node)
        if retry is None and epoch <= fence.epoch:
            raise StaleEpoch(f"{self.node}: takeover by {node} with epoch {epoch}; current epoch is {fence.epoch}")
        return retry

    def add(self, record: TakeoverRecord) -> TakeoverRecord:
        self.records.append(record)
        return record

    def as_status(self) -> list[dict]:
        return [r.as_status() for r in self.records]


class PrimaryLease:
    """Nd's guard against deposing a primary that works (step 3, the receiver's side).

    Each delivery the primary in force makes renews its lease for `duration` seconds, and Nd declines a
    takeover by another node while the lease holds: a standby that stopped hearing its primary (cut off
    from it, or from everyone and then back) has lost its primary, not the pipeline, and a takeover would
    only cost a recovery. Raft's pre-vote and leader leases serve the same end. An idle primary renews it
    with the empty frame it sends every ack_poll_ms. A crashed primary's lease may still hold when its
    standby first asks (refused heartbeats, every quarter interval, reach the allowed misses about half an
    interval after the crash): the standby withdraws, suspects again about half an interval later, and by
    then the lease has run out, at the cost of about one heartbeat interval (`takeovers_declined` in
    failover-check's summary). 0 = no lease: every newer epoch is taken, as seed 000 does. Clocks are
    injected, as everywhere in core.

    The lease alone must outlast every silence of a working primary, and on two busy cores those reach
    several hundred ms in containers (`primary_longest_silence_ms`), past a 150 ms lease. So the standby
    also says how long it has surely not heard its primary (`unheard`: since its last good heartbeat, less
    one heartbeat interval), and Nd declines while the primary's last frame reached it well inside that
    time: Nd heard the primary after the standby lost it, so the standby is cut off from a primary that
    lives. A crashed primary sent
    its last frame no later than its last heartbeat answer, at most an interval after the standby's last
    good one, so Nd got that frame at least `unheard` ago, less its transit, which the lease's length
    covers as a margin: this rule never declines a crash the lease would take. A standby that suspects by
    refusals (one interval) says almost nothing (unheard near 0); one whose heartbeats timed out (the
    detector's timeout, a second for the Spark settings) covers silences up to that, less an interval
    and the lease. Whatever a standby says, Nd weighs at most `unheard_max` of it (the detector's timeout),
    so a primary silent at Nd for longer than that, less the lease, is never protected. That bounds the
    cases where the argument above does not hold: a standby's word counts from its last decline too (its
    detector watches again from then), so one cut off from N when N then dies may be declined once more
    on its word, one more timeout; and should Nd itself stand still with a dead primary's last frame, the
    frame's arrival is late, but it only ages."""

    def __init__(self, duration: float, unheard_max: float = float("inf")) -> None:
        if duration < 0 or unheard_max < 0:
            raise ValueError("a lease lasts >= 0 s, and a standby's word counts for >= 0 s")
        self.duration = duration
        self.unheard_max = unheard_max
        self.renewed_at: float | None = None
        # When the primary's last frame reached Nd (its arrival, not Nd's answer): what a standby's `unheard`
        # is weighed against. None until the term's primary has sent one.
        self.arrived_at: float | None = None
        # The primary's longest silence at Nd (from one renewal to the next, within one primary's term):
        # what a lease must outlast for a working primary never to be deposed.
        self.longest_gap = 0.0
        # The term's primary said its last frame (a planned handover): nothing of its is weighed any more,
        # until the next term.
        self.released = False

    def renew(self, at: float) -> None:
        """The primary in force reached Nd at `at` (taken before the node lock: a frame waiting for the lock
        was sent no later than that), or Nd answered it then."""
        if self.renewed_at is None or at > self.renewed_at:
            if self.renewed_at is not None:
                self.longest_gap = max(self.longest_gap, at - self.renewed_at)
            self.renewed_at = at

    def arrived(self, at: float) -> None:
        """A frame of the primary in force reached Nd at `at`: its lease is renewed, and its arrival noted."""
        self.renew(at)
        if self.arrived_at is None or at > self.arrived_at:
            self.arrived_at = at

    def grant(self, at: float) -> None:
        """A new primary took over at `at`: its lease starts, and the silence before it was its predecessor's."""
        self.renewed_at = at
        self.arrived_at = None
        self.released = False

    def release(self) -> None:
        """The primary in force sent its last frame (it hands over, asked to stop): a takeover is no longer
        declined on its behalf, neither by the lease nor by its last frame. For the rest of the term: a
        leaving primary delivers nothing after that frame."""
        self.released = True

    def holds(self, now: float) -> bool:
        return (self.duration > 0 and not self.released and self.renewed_at is not None
                and now - self.renewed_at < self.duration)

    def check(self, now: float, *, node: str, primary: str, receiver: str, unheard: float = 0.0) -> None:
        """PrimaryAlive when `node`, not the primary, would take over while the lease holds, or while the
        primary's last frame reached Nd well after `node` last heard the primary (`unheard` seconds ago at
        least; 0: it does not say)."""
        if node == primary:
            return
        if self.holds(now):
            assert self.renewed_at is not None
            raise PrimaryAlive(f"{receiver}: takeover by {node} declined; {primary} delivered "
                               f"{(now - self.renewed_at) * 1000:.0f} ms ago (lease {self.duration * 1000:.0f} ms)")
        if self.heard_since_lost(now, unheard):
            assert self.arrived_at is not None
            raise PrimaryHeard(f"{receiver}: takeover by {node} declined; {primary}'s last frame came "
                               f"{(now - self.arrived_at) * 1000:.0f} ms ago, and {node} has not heard it for "
                               f"{unheard * 1000:.0f} ms: cut off from a primary that lives")

    def heard_since_lost(self, now: float, unheard: float) -> bool:
        """The primary's last frame reached Nd more than the lease's length inside the `unheard` seconds in
        which a standby surely did not hear it (with the lease on)."""
        return (self.duration > 0 and not self.released and unheard > 0 and self.arrived_at is not None
                and now - self.arrived_at + self.duration < min(unheard, self.unheard_max))


class OperatorWatch:
    """The primary's own evidence that its operator stopped (step 1, from the primary's side).

    A primary whose operator no longer answers (a Spark JVM stopped or deadlocked, a query waiting on
    an executor that never comes back) still answers heartbeats and still sends Nd its empty frames: the
    detector and the lease both take it for a working primary, and the pipeline stalls for good while a
    standby waits. So the primary times its own calls: once the oldest call it made to the operator has
    gone unanswered for more than `limit` seconds, it says so in its heartbeat replies (the standby counts
    each such reply as a miss) and sends Nd no more empty frames (its lease runs out). It does not fence
    itself: with no standby to take over, a slow operator that answers at last is better than a pipeline
    that stops. Kafka's consumer group does the same with max.poll.interval.ms: a member that stops
    polling is taken out of the group, though it still sends heartbeats. An operator that failed (a call
    answered with an error: its JVM is gone) will answer nothing more, so it is stalled from then on,
    without waiting out `limit` (`fail`). limit 0 = never stalled by time alone. Clocks are injected, as
    everywhere in core."""

    def __init__(self, limit: float) -> None:
        if limit < 0:
            raise ValueError("operator_stall_max must be >= 0")
        self.limit = limit
        self.stalled = False  # as of the last `update`
        self.failed = ""  # why the operator failed, once it has (`fail`)

    def fail(self, why: str) -> None:
        """The operator failed: stalled from now on, whatever the calls' times."""
        self.failed = self.failed or why

    def stalled_for(self, oldest_call: float | None, now: float) -> float:
        """Seconds the oldest unanswered call (made at `oldest_call`; None: none) has waited, when that is
        more than `limit` or the operator failed (then at least a millisecond); else 0."""
        waited = 0.0 if oldest_call is None else now - oldest_call
        if self.failed:
            return max(waited, 0.001)
        return waited if self.limit and waited > self.limit else 0.0

    def update(self, oldest_call: float | None, now: float) -> bool:
        """`stalled_for` > 0, remembered in `stalled`; True only when a stall begins (the caller says and
        counts it once: the node's `operator_stalls`)."""
        stalled = self.stalled_for(oldest_call, now) > 0
        began = stalled and not self.stalled
        self.stalled = stalled
        return began


@dataclass(slots=True)
class RecoveryTimes:
    """The clock readings of one failover at the standby, and the phases seed 000 splits recovery into:
    detection (last good heartbeat -> suspicion), reconnection (suspicion -> Nd and Nu answered), data
    recovery (answered -> every input Nu held at takeover processed and its outputs in Nd)."""

    last_ok: float
    detected: float
    connected: float | None = None
    live: float | None = None
    noticed: float | None = None  # the transport's notice of the lost connection, when one came first

    @property
    def detection(self) -> float:
        return self.detected - self.last_ok

    @property
    def reconnection(self) -> float:
        assert self.connected is not None
        return self.connected - self.detected

    @property
    def data_recovery(self) -> float:
        assert self.connected is not None and self.live is not None
        return self.live - self.connected

    def phases(self) -> dict[str, float]:
        """Seconds per phase, for the histograms (complete recoveries only)."""
        return {"detection": self.detection, "reconnection": self.reconnection, "data_recovery": self.data_recovery}
