"""Nd's precise delivery: outputs are numbered 1, 2, ...; Nd keeps the last it delivered and drops repeats.

After a failover the new primary already sends only what Nd lacks (Precise recovery, seed 000 section 3.6);
the dedup is the second line of defence and counts anything it drops, so a test can see it stay at 0.
A gap is never filled by guessing: it is refused, and the sender resends from Nd's Level-0 ack.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import SequenceGap


@dataclass(frozen=True, slots=True)
class Admission:
    skip: int
    take: int


class DeliveryDedup:
    """The last output sequence number delivered to the sink (Nd's Level-0 ack)."""

    def __init__(self, node: str, delivered_through: int = 0) -> None:
        self.node = node
        self.delivered_through = delivered_through

    def admit(self, first: int, count: int) -> Admission:
        """Which part of outputs first..first+count-1 is new. Raises SequenceGap if they skip ahead."""
        if first > self.delivered_through + 1:
            raise SequenceGap(
                f"{self.node}: output seq {first} skips ahead; expected {self.delivered_through + 1}"
            )
        skip = min(count, self.delivered_through + 1 - first)
        return Admission(skip=skip, take=count - skip)

    def delivered(self, through: int) -> None:
        self.delivered_through = max(self.delivered_through, through)
