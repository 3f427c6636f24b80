"""What a sender does after a failed call, decided by the call's status (never by its message text).

Nu keeps every tuple until a Level-1 ack trims it, so no failure loses data; the policy only decides
whether the sender must first ask the receiver where it stands (resync) and how soon to try again.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import Status


@dataclass(frozen=True, slots=True)
class Retry:
    resync: bool  # ask the receiver where it stands before sending more
    delay: float  # seconds before the next attempt (a backoff may add to it)


def after_push_error(status: Status) -> Retry:
    """Nu -> primary. Backpressure keeps the cursor (the primary holds what it acked); anything else
    resyncs with an empty frame, whose reply says what the primary holds."""
    return Retry(resync=status is not Status.RESOURCE_EXHAUSTED, delay=0.0)


def after_backup_error(status: Status) -> Retry:
    """Nu -> standby. A live standby that answered where it stands (ahead of or behind the cut, or full)
    is asked again at once; only a peer that may be gone is given time."""
    resync = status not in (Status.RESOURCE_EXHAUSTED, Status.UNAVAILABLE)
    quick = status in (Status.RESOURCE_EXHAUSTED, Status.ALREADY_EXISTS, Status.OUT_OF_RANGE)
    return Retry(resync=resync, delay=0.01 if quick else 0.2)


def fenced_by(status: Status) -> bool:
    """The receiver refused the sender's epoch: a newer primary exists, and the sender must stop."""
    return status is Status.ABORTED


def declined_by(status: Status) -> bool:
    """Nd declined a takeover: its primary still delivers (core.recovery.PrimaryLease). The standby goes
    back to watching, in the epoch in force."""
    return status is Status.FAILED_PRECONDITION
