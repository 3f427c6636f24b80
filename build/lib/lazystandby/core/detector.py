"""Heartbeat failure detector: the standby pings its primary every `interval` seconds and suspects it
after `allowed_misses` consecutive heartbeats went unanswered (or no answer came for that long).

Clocks are injected (`now` arguments) so the detector is tested without sleeping.
"""

from __future__ import annotations


class FailureDetector:
    """Counts consecutive missed heartbeats; a paused primary misses them just like a dead one."""

    def __init__(self, interval: float, allowed_misses: int, now: float) -> None:
        if interval <= 0 or allowed_misses < 1:
            raise ValueError("heartbeat interval must be > 0 and allowed misses >= 1")
        self.interval = interval
        self.allowed_misses = allowed_misses
        self.last_ok = now
        self.misses = 0
        self.last_rtt = 0.0
        self.total_misses = 0
        self.suspected_at: float | None = None

    @property
    def timeout(self) -> float:
        return self.interval * self.allowed_misses

    def ok(self, now: float, rtt: float) -> None:
        self.last_ok = now
        self.last_rtt = rtt
        self.misses = 0

    def missed(self, now: float) -> None:
        self.misses += 1
        self.total_misses += 1

    def suspects(self, now: float) -> bool:
        failed = self.misses >= self.allowed_misses or now - self.last_ok > self.timeout + self.interval
        if failed and self.suspected_at is None:
            self.suspected_at = now
        return failed
