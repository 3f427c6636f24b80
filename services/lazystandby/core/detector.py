"""Heartbeat failure detector: the standby pings its primary every `interval` seconds and suspects it
after `allowed_misses` consecutive heartbeats went unanswered (or no answer came for that long).

A refused connection is stronger evidence than a late answer: the primary's host says that nothing listens
on its port, so its process is gone (a slow or paused one would still hold the port, and a full accept queue
drops connections rather than refusing them; the transport reports a name that resolves to nothing, a
removed container, the same way). Refusals that go on for one whole interval (the standby asks
again every quarter interval meanwhile) are a failure without waiting out `allowed_misses` intervals.

A primary the standby has not heard from yet (since it started, or came back to standby) gets `grace`
seconds before late answers count: on two busy cores a primary that has just started (its first frames,
its operator warming up) can leave its first heartbeats unanswered for longer than the timeout, and
without the grace the standby would take over from a live primary. A refusing port is still suspected
after one interval: that is a dead process, not a slow one.

Time in which the standby itself stood still (paused with SIGSTOP or `docker pause`, or starved of CPU)
does not count against the primary: a heartbeat whose call took longer than `stall_after` (twice the
timeout, and at least a second: a live node on two busy cores stands still for a few hundred ms), or
that went out that long after the one before, says more about this node than about the primary. The
detector then watches again from that moment (`stalls` counts them), as it does when asked for a verdict
that long after the last heartbeat came back (paused right after an answer). Otherwise a standby paused
for seconds under a healthy primary would find, on resuming, its in-flight heartbeat past its deadline
and seconds since the last answer, and take over.

A transport that sees connections can say when the one to the primary dropped (`lost`): a killed process's
kernel closes its sockets, and the notice comes within milliseconds of a SIGKILL on loopback, where the
next heartbeat would find the port refused anywhere up to an interval later. From the notice the standby
asks every quarter interval, and a refusal suspects the primary `notice_hold` after the notice (or the
first refusal, if earlier): no sooner, because the dead primary's lease at Nd (core.recovery.PrimaryLease)
runs until at most about that long after its last frame, which it sent before either, and a takeover
asked earlier is declined and costs a whole round of detection. A crash then takes the same time to
detect whatever the heartbeat's phase was, which is what makes the failover predictable. A notice proves
nothing by itself: a primary that answers clears it, and a host that vanishes (no FIN, no RST) or a
partition sends none, leaving the heartbeats to find it.

Clocks are injected (`now` arguments) so the detector is tested without sleeping.
"""

from __future__ import annotations

STALL_MIN_S = 1.0


class FailureDetector:
    """Counts consecutive missed heartbeats; a paused primary misses them just like a dead one."""

    def __init__(self, interval: float, allowed_misses: int, now: float, grace: float = 0.0,
                 notice_hold: float = 0.0) -> None:
        if interval <= 0 or allowed_misses < 1 or grace < 0 or not 0 <= notice_hold <= interval:
            raise ValueError("heartbeat interval must be > 0, allowed misses >= 1, grace >= 0 and the notice's "
                             "hold within [0, interval]")
        self.interval = interval
        self.allowed_misses = allowed_misses
        self.grace = grace
        self.notice_hold = notice_hold
        self.lost_at: float | None = None  # the transport's notice that the connection dropped (`lost`)
        self.heard = False  # a primary has answered since this detector started
        self.last_ok = now
        self.misses = 0
        self.last_rtt = 0.0
        self.total_misses = 0
        self.suspected_at: float | None = None
        self.refused_since: float | None = None  # first refusal of the current run of them
        self.stalls = 0  # times this node itself stood still for longer than `stall_after`
        self._last_beat: float | None = None  # when the last heartbeat came back (answered or not)

    @property
    def timeout(self) -> float:
        return self.interval * self.allowed_misses

    @property
    def stall_after(self) -> float:
        return max(2 * self.timeout, STALL_MIN_S)

    def waiting(self, now: float) -> None:
        """Nothing to watch yet (not registered: no primary known): time does not count against one."""
        self.last_ok = now
        self.misses = 0
        self.refused_since = None
        self.lost_at = None

    def restart(self, now: float) -> None:
        """Watch again from `now` (a takeover that was refused): what was heard before still counts, so the
        grace is not given twice."""
        self.waiting(now)
        self.suspected_at = None

    def beat(self, now: float) -> None:
        """A heartbeat goes out now. One more than `stall_after` after the last one came back: this node
        stood still meanwhile, and it watches again from now."""
        self._stood_still(now)

    def _stood_still(self, now: float) -> bool:
        """Whether more than `stall_after` passed since the last heartbeat came back: this node stood still
        meanwhile, and it watches again from now."""
        if self._last_beat is not None and now - self._last_beat > self.stall_after:
            self._stalled(now)
            return True
        return False

    def _stalled(self, now: float) -> None:
        self.stalls += 1
        self._last_beat = now  # the stall is counted once, not again by the next heartbeat
        self.waiting(now)

    def ok(self, now: float, rtt: float) -> None:
        """The primary answered."""
        self._last_beat = now
        self.heard = True
        self.last_ok = now
        self.last_rtt = rtt
        self.misses = 0
        self.refused_since = None
        self.lost_at = None

    def missed(self, now: float, refused: bool = False, started: float | None = None) -> None:
        """A heartbeat went unanswered; `refused`: the connection itself was refused. One that went out at
        `started` and took longer than `stall_after` to fail (its own deadline is one interval) is not
        counted: this node stood still meanwhile, and it watches again from now."""
        self._last_beat = now
        if started is not None and now - started > self.stall_after:
            self._stalled(now)
            return
        self.misses += 1
        self.total_misses += 1
        if not refused:
            self.refused_since = None
        elif self.refused_since is None:
            self.refused_since = now

    def lost(self, now: float) -> None:
        """The transport says the connection to the primary dropped at `now` (the first notice of a run
        counts): ask now, and let refusals from here on suspect it `notice_hold` after the notice."""
        if self.lost_at is None:
            self.lost_at = now

    def _dead_since(self) -> float | None:
        """With a notice and a run of refusals (in either order): the earlier of the two, no sooner than the
        primary's death; None without both."""
        if self.lost_at is None or self.refused_since is None:
            return None
        return min(self.lost_at, self.refused_since)

    def next_beat_in(self, now: float | None = None) -> float:
        """Seconds from one heartbeat (the one that went out at `now`) to the next: a quarter interval while connections
        are refused or since a notice (a call in flight when the connection dropped fails otherwise, reset),
        and no later than the hold's end (the beat that can suspect)."""
        if self.refused_since is None and self.lost_at is None:
            return self.interval
        step = self.interval / 4
        dead = self._dead_since()
        if now is not None and dead is not None and 0 < dead + self.notice_hold - now < step:
            return dead + self.notice_hold - now
        return step

    def suspects_after_beat(self, now: float) -> bool:
        """`suspects`, asked right after a heartbeat came back (`ok` or `missed`). Asked more than
        `stall_after` after that, this node stood still in between (paused after the answer), and it
        watches again from now instead of counting its own pause as the primary's silence."""
        return not self._stood_still(now) and self.suspects(now)

    def suspects(self, now: float) -> bool:
        dead = self._dead_since()
        if dead is not None:
            failed = now - dead >= self.notice_hold
            if failed and self.suspected_at is None:
                self.suspected_at = now
            return failed
        refusing = self.refused_since is not None and now - self.refused_since >= self.interval
        late = self.misses >= self.allowed_misses or now - self.last_ok > self.timeout + self.interval
        if late and not self.heard:
            late = now - self.last_ok > self.grace
        failed = refusing or late
        if failed and self.suspected_at is None:
            self.suspected_at = now
        return failed
