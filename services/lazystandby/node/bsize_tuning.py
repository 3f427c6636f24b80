"""Nu's Bsize for a recovery target, and what it knows of the links a takeover's resend crosses.

With `recovery_target_ms` set, Nu chooses, every TUNE_EVERY_S, the Bsize whose predicted recovery meets the
target with the least backup (core.recovery_model.choose_cheapest). A prediction at each Bsize is made of
the standby's own view (its fixed terms, operator cost and backlog, with each backup answer), the cost of
a call on the link a resend would cross, Nu's source rate and the peak of what it held beyond its resend
floor. The link's cost comes from Nu's pushes to the primary, timed, until probes of the standby's link
(alternately small and large, sent while the backup link is idle) give a fit of their own. The same
figures make Nu's part of the standby's predicted recovery (`hint`).

Holds no lock of its own: Nu calls it holding its lock.
"""

from __future__ import annotations

import os
from collections import deque

from ..config import NodeConfig
from ..core import messages as m
from ..core.batching import format_bsize
from ..core.recovery_model import TUNE_EVERY_S, CallCost, Choice, StandbyView, calls_seconds, choose_cheapest, resend_at

# The probes of the standby's link: alternately small and large, the first PROBES_AT_ONCE back to back, then
# one every PROBE_EVERY_S. The large one takes about PROBE_TRANSFER_S to cross at the rate measured so far
# (from PROBE_BYTES' large, above the token bucket's burst of the shaped links, up to PROBE_MAX_BYTES): a
# call's own time varies by a millisecond or two, as much as a 32 KB probe takes to cross 100 Mbit/s
# (2.6 ms), so only a probe that takes far longer than that jitter gives a rate to trust. The link then
# carries PROBE_TRANSFER_S of probe every PROBE_EVERY_S (1 %).
PROBE_BYTES = (1_024, 32_768)
PROBE_MAX_BYTES = 1 << 20
PROBE_TRANSFER_S = 0.02
PROBES_AT_ONCE = 4
PROBE_EVERY_S = 2.0

# Choices over which the most Nu held beyond its resend floor is kept: what Bsize inf would resend is
# predicted from its peak over about half a minute (a window query's grows with each window, then falls).
UNBOUNDED_KEPT = 15


def probe_bytes(n: int, per_byte_s: float | None) -> int:
    """The size of Nu's `n`-th probe of a link whose fitted cost per byte is `per_byte_s` (None: not fitted
    yet; 0: too fast to tell): small, then large, in turn."""
    small, large = PROBE_BYTES
    if n % 2 == 0:
        return small
    if per_byte_s is None:
        return large
    if per_byte_s <= 0:
        return PROBE_MAX_BYTES
    return max(large, min(PROBE_MAX_BYTES, int(PROBE_TRANSFER_S / per_byte_s)))


def cost_status(cost: CallCost) -> dict | None:
    """What Nu measures of a link: the cost of a call, the rate its bytes go at (None when calls of one
    size cannot tell), and the calls the fit is over; None before enough."""
    fit = cost.fit()
    if fit is None:
        return None
    return {"per_call_ms": round(fit[0] * 1000, 3), "bytes_per_s": round(1 / fit[1]) if fit[1] else None,
            "calls": len(cost.samples) + len(cost.kept)}


class BsizeTuning:
    """The links' costs, the standby's view and the latest choice of Bsize."""

    def __init__(self, cfg: NodeConfig) -> None:
        self.cfg = cfg
        self.push_cost = CallCost()  # Nu's calls to the primary, timed
        # Probes of the standby's link, timed: the cost of the resend a takeover by it would get.
        self.standby_cost = CallCost(min_samples=PROBES_AT_ONCE)
        self.standby_view: StandbyView | None = None  # with the standby's backup answers
        self.choice: Choice | None = None
        self._probe_at = 0.0
        self._padding = os.urandom(PROBE_MAX_BYTES)  # incompressible, whatever a transport does
        self._tune_at = 0.0
        self._rate_mark: tuple[float, int] | None = None  # (when, head) the source rate is measured from
        self._unbounded: deque[int] = deque(maxlen=UNBOUNDED_KEPT)
        self._pending: tuple[int | None] | None = None  # (Bsize,) waiting for the next choice to agree

    def new_standby(self) -> None:
        """Another standby, another link: timed afresh, and its view comes with its first answer."""
        self.standby_cost, self._probe_at, self.standby_view = CallCost(min_samples=PROBES_AT_ONCE), 0.0, None

    def resend_cost(self) -> CallCost:
        """The cost of a call on the link a resend would cross: the standby's, from the probes, once there
        are enough; the primary's link (the pushes) until then."""
        return self.standby_cost if self.standby_cost.fit() is not None else self.push_cost

    def next_probe(self, now: float, sent: int) -> bytes | None:
        """The padding of the probe due at `now` after `sent` probes, None when none is due."""
        if now < self._probe_at:
            return None
        fit = self.standby_cost.fit()
        size = probe_bytes(sent, None if fit is None else fit[1])
        self._probe_at = now + (0.0 if len(self.standby_cost.kept) + 1 < PROBES_AT_ONCE else PROBE_EVERY_S)
        return self._padding[:size]

    def choose(self, now: float, *, head: int, resend_floor: int, tuple_bytes: float, bsize: int | None,
               changed_before: bool) -> Choice | None:
        """Every TUNE_EVERY_S with a target: the choice to apply now (its `value` the new Bsize, None for
        inf), or None to keep `bsize`. Nothing is chosen before the standby's view and a link's fit are in.
        The first change is taken at once (the configured Bsize was nobody's prediction); a later larger
        one only when the next choice agrees (`changed_before`: a change was made already)."""
        target = self.cfg.recovery_target_ms / 1000
        if not target or now < self._tune_at:
            return None
        self._tune_at = now + TUNE_EVERY_S
        mark, self._rate_mark = self._rate_mark, (now, head)
        self._unbounded.append(max(0, head - resend_floor + 1))
        cost = self.resend_cost()
        view, fit = self.standby_view, cost.fit()
        if view is None or fit is None or mark is None or now <= mark[0]:
            return None
        rate = max(0.0, (head - mark[1]) / (now - mark[0]))
        unbounded, linger, frame = max(self._unbounded), self.cfg.backup_linger_s, self.cfg.frame_max

        def predict(b: int | None) -> float:
            resend = resend_at(b, unbounded=unbounded, rate=rate, linger_s=linger)
            send = cost.seconds_for(resend * tuple_bytes, frame * tuple_bytes) or 0.0
            return view.fixed_s + send + calls_seconds(resend + view.backlog, view.take, view.call_s, view.tuple_s)

        self.choice = choice = choose_cheapest(target, predict)
        if choice.value == bsize:
            self._pending = None
            return None
        larger = bsize is not None and (choice.value is None or choice.value > bsize)
        if larger and changed_before and self._pending != (choice.value,):
            self._pending = (choice.value,)  # taken if the next choice agrees
            return None
        self._pending = None
        return choice

    def hint(self, *, head: int, resend_floor: int, tuple_bytes: float) -> m.RecoveryHint | None:
        """Nu's part of its standby's predicted recovery: its head, the first position it would resend
        whatever the standby asks, and the cost of a call on the link a resend crosses; None before enough
        calls were timed."""
        fit = self.resend_cost().fit()
        if fit is None:
            return None
        return m.RecoveryHint(head_pos=head, resend_floor=resend_floor, per_call_s=fit[0], per_byte_s=fit[1],
                              tuple_bytes=tuple_bytes, frame_max=self.cfg.frame_max)

    def status(self, bsize: int | None) -> dict:
        """The recovery target and the latest choice for it (None without a target), and the links' costs."""
        ch, target = self.choice, None
        if self.cfg.recovery_target_ms:
            target = {"target_ms": self.cfg.recovery_target_ms, "bsize": format_bsize(bsize),
                      "predicted_ms": round(ch.predicted_s * 1000, 1) if ch else None, "met": ch.met if ch else None,
                      "candidates_ms": {b: round(v * 1000, 1) for b, v in ch.candidates.items()} if ch else {}}
        return {"recovery_target": target, "push_cost": cost_status(self.push_cost),
                "standby_link_cost": cost_status(self.standby_cost)}
