"""Incremental snapshots of a Passive Standby (seed 001's differential snapshots): the rules on both sides.

A snapshot is either full (the whole state after input P) or a delta: what the inputs after the previous
snapshot's position (its `base`) through P added to the state. The standby holds a chain, one full
snapshot and the deltas after it, each based on the one before; the state after the chain's last
position is the full one with every delta added. A delta that does not continue the chain is refused,
and the primary, told so by the standby's answer (or by a failed send), sends a full one next.

A full snapshot also comes once the deltas since the last full one weigh as much as it did: the chain a
standby holds, and the work of loading it at a takeover, stay within twice a full snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

FULL = 0  # a snapshot's `base` when it is full

F = TypeVar("F")


@dataclass(slots=True)
class SnapshotPlan:
    """The primary's side: whether the next snapshot is full, from what became of those sent."""

    need_full: bool = True  # nothing sent yet, a send failed or was refused, or the standby changed
    last_at: int = 0  # the position of the last snapshot taken (a delta's base)
    full_bytes: int = 0  # the last full snapshot's size
    delta_bytes: int = 0  # the deltas' sizes since it
    standby: str = ""  # where the last one went

    def next_full(self, standby: str) -> bool:
        """Whether the snapshot taken now, for `standby`, is full."""
        return self.need_full or standby != self.standby or self.delta_bytes >= max(1, self.full_bytes)

    def taken(self, at: int, full: bool, standby: str) -> int:
        """A snapshot was taken at input `at`; returns its base (FULL or the previous position). Taking a
        delta resets what the operator tracks, so every one taken must be sent or followed by a full one."""
        base = FULL if full else self.last_at
        self.last_at, self.standby = at, standby
        if full:
            self.need_full = False
        return base

    def sent(self, at: int, full: bool, size: int, held_through: int | None) -> None:
        """What the send of the snapshot at `at` came to: the standby's held position, None if it failed.
        Anything but holding it breaks the chain: the next one is full."""
        if held_through != at:
            self.need_full = True
            return
        if full:
            self.full_bytes, self.delta_bytes = size, 0
        else:
            self.delta_bytes += size


@dataclass(slots=True)
class SnapshotChain(Generic[F]):
    """The standby's side: the full snapshot held and the deltas after it, as (position, base, frame)."""

    links: list[tuple[int, int, F]] = field(default_factory=list)

    @property
    def through(self) -> int | None:
        """The input position the chain's state stands after (None: nothing held)."""
        return self.links[-1][0] if self.links else None

    def offer(self, at: int, base: int, frame: F) -> bool:
        """Take a snapshot after input `at` built on `base` (FULL: none). A full one newer than the chain
        replaces it; a delta is taken only on the chain's last position. Returns whether it was taken."""
        if base == FULL:
            if self.links and at <= self.links[-1][0]:
                return False
            self.links = [(at, base, frame)]
            return True
        if not self.links or base != self.links[-1][0] or at <= base:
            return False
        self.links.append((at, base, frame))
        return True

    def frames(self) -> list[F]:
        """The full snapshot, then the deltas, in order."""
        return [f for _, _, f in self.links]

    def clear(self) -> None:
        self.links = []
