"""Heartbeat failure detector: the standby pings its primary every `interval` seconds and suspects it
after `allowed_misses` consecutive heartbeats went unanswered (or no answer came for that long).

A refused connection is stronger evidence than a late answer: the primary's host says that nothing listens
on its port, so its process is gone (a slow or paused one would still hold the port, and a full accept queue
drops connections rather than refusing them). Refusals that go on for one whole interval (the standby asks
again every quarter interval meanwhile) are a failure without waiting out `allowed_misses` intervals.

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
        self.refused_since: float | None = None  # first refusal of the current run of them

    @property
    def timeout(self) -> float:
        return self.interval * self.allowed_misses

    def ok(self, now: float, rtt: float) -> None:
        self.last_ok = now
        self.last_rtt = rtt
        self.misses = 0
        self.refused_since = None

    def missed(self, now: float, refused: bool = False) -> None:
        """A heartbeat went unanswered; `refused`: the connection itself was refused."""
        self.misses += 1
        self.total_misses += 1
        if not refused:
            self.refused_since = None
        elif self.refused_since is None:
            self.refused_since = now

    def next_beat_in(self) -> float:
        """Seconds from one heartbeat to the next: a quarter interval while connections are refused."""
        return self.interval / 4 if self.refused_since is not None else self.interval

    def suspects(self, now: float) -> bool:
        failed = (self.misses >= self.allowed_misses or now - self.last_ok > self.timeout + self.interval
                  or (self.refused_since is not None and now - self.refused_since >= self.interval))
        if failed and self.suspected_at is None:
            self.suspected_at = now
        return failed
