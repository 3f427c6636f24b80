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

from dataclasses import dataclass

from .acks import Checkpoint


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


def resend_start(requested: int, checkpoint: Checkpoint) -> int:
    """Nu's side of step 5: it cannot resend what a Level-1 ack trimmed, and need not (Nd holds it)."""
    return max(requested, checkpoint.input_pos + 1)


def must_jump(expected: int, first: int, checkpoint: Checkpoint) -> bool:
    """A frame or batch may start past the next expected position only when the checkpoint it carries
    covers exactly the positions skipped; the receiver then resumes from that checkpoint."""
    return first > expected and checkpoint.input_pos == first - 1
