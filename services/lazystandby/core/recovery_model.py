"""The predicted recovery: how long a takeover would take if the primary crashed now.

Seed 000 splits a recovery into detection, reconnection and data recovery; seed 002 predicts the last from
what must be replayed and the rate it is replayed at. Here the failover (the primary's crash to the new
primary live) is predicted as the sum of

    detection       the detector's time to suspect a crashed primary (its settings, and how late the
                    standby's heartbeats start and how long they take: `crash_detection_s`)
  + reconnection    the takeover's two calls, to Nd and to Nu (the standby's measured round trips)
  + resend          what Nu would send the new primary again, at the link's measured cost (`CallCost`)
  + replay          what the new primary must process before it is live (Nu's resend and its own backlog),
                    in operator calls of the measured cost (`CallCost` again, per tuple)
  + restore         loading a snapshot (0 for a warm or lazy standby: it holds its state)

Each term is measured where it is known: Nu times its own calls to the primary and knows what it holds
beyond what the standby acknowledged; the standby knows its detector, its round trips and its backlog; the
operator's cost per call and per tuple comes from the calls of whichever operator node has made enough
of them. All of it is
plain arithmetic on injected numbers, tested without a clock.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections import deque
from dataclasses import asdict, dataclass

# Samples kept by the estimators: enough for a fit that a burst does not swing, few enough that a link or
# a rate that changes shows within seconds (a frame every few ms at load).
WINDOW = 256
GROUP_MIN = 3  # ordinary calls of about one size (a power of two) that count in a call cost's fit
KEPT = 8  # probes kept in a call cost's fit beside the WINDOW latest calls


def crash_detection_s(interval: float, allowed_misses: int, late_s: float = 0.0, call_s: float = 0.0,
                      notice_hold_s: float | None = None) -> float:
    """Expected seconds from a primary's crash to its standby's suspicion (core.detector).

    Where the transport tells of a lost connection (`notice_hold_s` given: the detector's hold after the
    notice): the notice comes about a round trip after the crash, and the beat that suspects starts
    `notice_hold_s` after it (as late as any beat) and comes back refused in a call, whatever the
    heartbeat's phase was at the crash.

    Otherwise the next heartbeat fails on the refused port (on average half a period away, the period
    being the interval and the lateness `late_s` with which the standby's heartbeats start); from then the
    standby asks every quarter interval (each ask as late, and no sooner than the call before it came back:
    `call_s`) and suspects at `allowed_misses` misses or after one interval of refusals, whichever comes
    first, once the last call came back. With no lateness and instant calls: half an interval plus the
    polls."""
    if notice_hold_s is not None:
        return call_s + notice_hold_s + late_s + call_s
    step = max(interval / 4, call_s) + late_s
    polls = min(allowed_misses - 1, math.ceil(interval / step - 1e-9))
    return (interval + late_s) / 2 + polls * step + call_s


def calls_seconds(total: float, per_call_max: float, per_call_s: float, per_unit_s: float) -> float:
    """Seconds for `total` units in calls of at most `per_call_max`, one at a time, each costing `per_call_s`
    and `per_unit_s` a unit (0 for nothing)."""
    if total <= 0:
        return 0.0
    return math.ceil(total / max(1.0, per_call_max)) * per_call_s + total * per_unit_s


# Nu asks on every turn of its source loop while standby_replay_max_ms is set, and the arguments change only
# with a standby's new view (a backup answer): the answer of the last few is kept.
@functools.lru_cache(maxsize=32)
def units_within(seconds: float, per_call_max: float, per_call_s: float, per_unit_s: float) -> int | None:
    """The most units `calls_seconds` finishes within `seconds` (its inverse): full calls first, then what a
    last call's fixed cost leaves room for. None when units cost (next to) nothing: no bound."""
    take = max(1, int(per_call_max))
    full = per_call_s + take * per_unit_s
    if full <= 0:
        return None
    if seconds <= 0:
        return 0
    if seconds / full * take >= 1 << 50:
        return None  # beyond any backlog, and beyond what a float's sum can tell one unit apart in
    calls = int(seconds // full)
    left = seconds - calls * full
    extra = 0 if left < per_call_s or per_unit_s <= 0 else min(take - 1, int((left - per_call_s) / per_unit_s))
    guess = calls * take + extra
    # Floating point may put the guess off at a boundary, by up to a call's worth where units cost nothing:
    # the answer is settled against calls_seconds itself, which never falls as units grow, by bisection
    # between a count that fits (lo) and one that does not (hi).
    lo, hi = max(0, guess - 2 * take - 2), guess + 2 * take + 2
    while lo > 0 and calls_seconds(lo, take, per_call_s, per_unit_s) > seconds:
        lo //= 2
    while calls_seconds(hi, take, per_call_s, per_unit_s) <= seconds:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if calls_seconds(mid, take, per_call_s, per_unit_s) <= seconds:
            lo = mid
        else:
            hi = mid
    return lo


def replay_room(bound_s: float, view: StandbyView, unconfirmed: int, bsize: int) -> int | None:
    """How many more tuples may reach a standby before a takeover would find more than `bound_s` of
    operator work waiting: its backlog (`view`) and the `unconfirmed` tuples it would be resent, at the
    view's cost (`units_within`). At least a batch (`bsize`) may wait, so that a bound below a batch's
    cost slows a source and never stops it: fewer tuples than a batch are never cut, and would never be
    confirmed. None: no bound (tuples that cost nothing)."""
    most = units_within(bound_s, view.take, view.call_s, view.tuple_s)
    if most is None:
        return None
    return max(0, max(most, bsize) - view.backlog - unconfirmed)


def _cells(calls) -> list[tuple[float, float, int]]:
    """(mean size, median seconds, count) of the calls of each power-of-two size."""
    groups: dict[int, list[tuple[float, float]]] = {}
    for b, s in calls:
        groups.setdefault(int(b).bit_length(), []).append((b, s))
    return [(sum(b for b, _ in g) / len(g), statistics.median(s for _, s in g), len(g)) for g in groups.values()]


class CallCost:
    """The cost of a call against its size, fitted from the calls made: seconds = per_call + size *
    per_unit, least squares over the last WINDOW calls. On a link the size is bytes, `per_unit` the link's
    inverse rate and `per_call` its round trip and the receiver's work; in an operator the size is tuples,
    and `per_call` what a call costs however few it takes (a replay in large calls runs far faster than
    the rate of small steady-state calls would say).

    Calls of one size cannot tell the two apart: then the whole cost is put on the call, `per_unit` 0,
    which understates a transfer in much larger calls; a negative slope (noise on a fast link) is read
    the same way. None until `min_samples` calls were timed."""

    def __init__(self, window: int = WINDOW, min_samples: int = 8, kept: int = KEPT) -> None:
        self.samples: deque[tuple[float, float]] = deque(maxlen=window)
        self.kept: deque[tuple[float, float]] = deque(maxlen=kept)
        self.min_samples = min_samples

    def add(self, size: float, seconds: float, *, keep: bool = False) -> None:
        """One call timed. `keep`: a probe, kept apart from the WINDOW latest calls (the last KEPT probes
        stay in the fit however many ordinary calls follow: a link's rate shows only in calls larger than
        its token bucket's burst, and steady-state calls are far smaller)."""
        if size >= 0 and seconds >= 0:
            (self.kept if keep else self.samples).append((float(size), float(seconds)))

    def fit(self) -> tuple[float, float] | None:
        """(per_call_s, per_unit_s), or None before `min_samples` calls.

        The calls are grouped by the power of two of their size, and each group counts as its calls' mean
        size at their median seconds, weighted by how many there are; a group of fewer than GROUP_MIN
        ordinary calls is left out, and the probes are grouped apart (one counts alone, several at their
        median). One call that a collector's pause, a cold start or a busy core held up tenfold would
        otherwise tilt the line through hundreds of ordinary ones, most of all when it alone is larger
        than the rest; a probe is larger than the rest by design, so one held up should not set the
        slope either when others of its size were timed."""
        pts = [*self.samples, *self.kept]
        if len(pts) < self.min_samples:
            return None
        cells = [c for c in _cells(self.samples) if c[2] >= GROUP_MIN] + _cells(self.kept)
        if not cells:
            return statistics.median(s for _, s in pts), 0.0
        n = sum(w for *_, w in cells)
        mx = sum(b * w for b, _, w in cells) / n
        my = sum(s * w for _, s, w in cells) / n
        sxx = sum(w * (b - mx) ** 2 for b, _, w in cells)
        if sxx <= 0 or max(b for b, *_ in cells) < 2 * min(b for b, *_ in cells):
            return my, 0.0
        slope = sum(w * (b - mx) * (s - my) for b, s, w in cells) / sxx
        if slope <= 0:
            return my, 0.0
        return max(0.0, my - slope * mx), slope

    def seconds_for(self, total: float, per_call_max: float) -> float | None:
        """Seconds for `total` units in calls of at most `per_call_max`, one at a time; None before the
        fit."""
        f = self.fit()
        return None if f is None else calls_seconds(total, per_call_max, *f)


@dataclass(frozen=True)
class RecoveryTerms:
    """The terms of one prediction, in seconds (see the module's docstring). `replay_tuples` shows where
    the replay term comes from; `complete` is False when a term could not be known yet (no operator calls
    timed: the replay is left out, and the prediction is low)."""

    detection_s: float
    reconnection_s: float
    resend_s: float
    replay_s: float
    replay_tuples: int
    restore_s: float = 0.0
    complete: bool = True

    @property
    def seconds(self) -> float:
        return self.detection_s + self.reconnection_s + self.resend_s + self.replay_s + self.restore_s

    def as_dict(self) -> dict:
        d = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}
        d["seconds"] = round(self.seconds, 6)
        return d


# Seconds between two choices of a setting for recovery_target_ms (Nu's Bsize; the standby's standby_defer
# or snapshot_interval). Nu takes a larger Bsize (less backup) only when two choices in a row agree on it.
TUNE_EVERY_S = 1.0

# The Bsizes Nu chooses among for a recovery target, cheapest last: seed 000's sweep.
BSIZE_LADDER: tuple[int | None, ...] = (1, 10, 100, 1_000, 10_000, 100_000, None)
# The share of the target a chosen Bsize's prediction may take: the rest absorbs the model's error and a
# crash at the worst moment of a batch.
TARGET_MARGIN = 0.8


@dataclass(frozen=True)
class StandbyView:
    """What a standby tells Nu with each backup answer, for Nu to predict a recovery at any Bsize: its
    fixed terms (detection and reconnection), its operator's cost per call and per tuple and the most a
    call takes, and the inputs it holds unprocessed (its backlog at a takeover)."""

    fixed_s: float
    call_s: float
    tuple_s: float
    take: int
    backlog: int


@dataclass(frozen=True)
class Choice:
    """A setting chosen for a recovery target (a Bsize, a standby_defer, a snapshot_interval): the
    prediction at each candidate (seconds), the one chosen, and whether its prediction met the target
    (when none does, the ladder's first, the fastest recovery, and `met` False)."""

    value: int | float | None
    predicted_s: float
    met: bool
    candidates: dict[str, float]


def resend_at(bsize: int | None, *, unbounded: int, rate: float, linger_s: float) -> int:
    """Tuples Nu would resend after a crash at the worst moment with Bsize `bsize`: a batch not yet cut
    (up to Bsize) and what arrives while a backup call gathers (`rate` x `linger_s`); with Bsize inf
    everything since the resend floor (`unbounded`: Nu's head less its floor, now)."""
    if bsize is None:
        return unbounded
    return bsize + math.ceil(rate * linger_s)


# A warm standby's standby_defer and a Passive Standby's snapshot_interval, fastest recovery first: a longer
# one leaves more to process at a takeover, for less work (a warm standby's) or fewer bytes (snapshots).
DEFER_LADDER: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0)
INTERVAL_LADDER: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0)


def choose_cheapest(target_s: float, predict, ladder: tuple = BSIZE_LADDER, margin: float = TARGET_MARGIN) -> Choice:
    """The last setting of `ladder` (ordered fastest recovery first, cheapest last) whose predicted
    recovery, `predict(setting)` in seconds, is within `margin` of `target_s`; the first and `met` False
    when none is."""
    candidates = {}
    chosen = None
    for b in ladder:
        s = predict(b)
        candidates["inf" if b is None else str(b)] = round(s, 6)
        if s <= margin * target_s:
            chosen = (b, s)
    if chosen is None:
        first = ladder[0]
        return Choice(first, candidates["inf" if first is None else str(first)], False, candidates)
    return Choice(chosen[0], chosen[1], True, candidates)
