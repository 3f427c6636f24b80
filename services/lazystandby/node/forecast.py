"""A standby's forecast of its own takeover (core.recovery_model): what it measures of its primary and of
Nu's link, the recovery it predicts with each heartbeat, its part of Nu's predictions (the view sent with
each backup answer), and, with recovery_target_ms, the standby_defer or snapshot_interval it chooses.

An object of the standby's side (StandbySide.forecast), holding only its own state. It reads the node
only through the `Backlog` the node hands it, taken under the node's lock, so that what a prediction
depends on is named in one place and a prediction can be made from values alone.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass

from ..config import NodeConfig
from ..core import messages as m
from ..core.recovery_model import (
    DEFER_LADDER,
    INTERVAL_LADDER,
    TUNE_EVERY_S,
    Choice,
    RecoveryTerms,
    StandbyView,
    calls_seconds,
    choose_cheapest,
    crash_detection_s,
)

SAMPLES_KEPT = 32  # heartbeat round trips and late starts the medians are taken over


@dataclass(frozen=True)
class Backlog:
    """Where a takeover by this standby would start, as the node holds it now."""

    held: int  # received through (the backup in IQ' and held runs)
    done: int  # processed through
    primary_received: int  # the primary's received_through, from its heartbeats
    take: int  # most tuples per operator call
    own_cost: tuple[float, float] | None  # this node's operator cost per call and per tuple (None: untimed)
    restore_s: float  # loading a Passive Standby's snapshot first (0 for a warm standby)
    notice_hold_s: float | None  # the detector's hold on a lost connection's notice (None: no notices)
    paced: bool  # a warm window standby whose operator paces it: it defers nothing, so nothing to choose


class RecoveryForecast:
    """The standby's measured terms, its latest prediction and view, and what it chose for its target."""

    def __init__(self, cfg: NodeConfig, passive: bool) -> None:
        self.cfg = cfg
        self.passive = passive
        self.rtts: deque[float] = deque(maxlen=SAMPLES_KEPT)
        self.beat_late: deque[float] = deque(maxlen=SAMPLES_KEPT)  # seconds each heartbeat started after it was due
        self.hint: m.RecoveryHint | None = None  # Nu's part, sent with its backup
        self.primary_cost = (0.0, 0.0)  # the primary's operator cost per call and per tuple, from its heartbeats
        self.predicted: RecoveryTerms | None = None  # the latest prediction, made with each heartbeat
        self.view: StandbyView | None = None  # its part of Nu's predictions, sent with each backup answer
        # In force: standby_defer, or what `tune` chose for recovery_target_ms (a Passive Standby's interval
        # is its primary's to keep, told in the heartbeats: `choice`).
        self.defer = cfg.standby_defer
        self.choice: Choice | None = None
        self._tune_at = 0.0
        self._rate_mark: tuple[float, int] | None = None

    def heard(self, rtt: float, call_s: float, tuple_s: float) -> None:
        """A primary answered a heartbeat after `rtt` seconds, saying its operator's cost."""
        self.rtts.append(rtt)
        self.primary_cost = (call_s, tuple_s)

    def refresh(self, now: float, b: Backlog, watching: bool) -> RecoveryTerms | None:
        """With each heartbeat: the prediction (None unless `watching`: a standby watching a primary), the
        view for Nu, and, with a target, the choice it meets."""
        self.predicted = self.predict(b) if watching else None
        self.view = self.standby_view(b)
        self.tune(now, b)
        return self.predicted

    def predict(self, b: Backlog) -> RecoveryTerms:
        """How long a takeover by this standby would take if its primary crashed now.

        Nu resends from what this node lacks (from what it received, or from Nu's floor when that is later:
        then a stateful node rebuilds from there and drops what it held) through Nu's head (the newer of
        Nu's hint and the primary's heartbeat); the new primary processes that and its own backlog in
        calls of up to `take` tuples, at the primary's measured cost per call and per tuple when the primary
        says it (a standby's calls wait by design, which its own timings would count), else its own."""
        resend, resend_s, rebuild = self.resend(b)
        replay = resend + (0 if rebuild else max(0, b.held - b.done))
        cost = self.cost(b)
        rtt = statistics.median(self.rtts) if self.rtts else 0.0
        late = statistics.median(self.beat_late) if self.beat_late else 0.0
        # A refused heartbeat is taken to come back in about a round trip (a connection refused at once).
        detection_s = crash_detection_s(self.cfg.heartbeat_interval, self.cfg.heartbeat_misses, late, rtt,
                                        notice_hold_s=b.notice_hold_s)
        return RecoveryTerms(detection_s=detection_s, reconnection_s=2 * rtt, resend_s=resend_s,
                             replay_s=replay_s(replay, cost, b.take), replay_tuples=replay, restore_s=b.restore_s,
                             complete=(self.hint is not None or not resend) and (cost is not None or not replay))

    def resend(self, b: Backlog) -> tuple[int, float, bool]:
        """What Nu would resend at a takeover now, the seconds its link takes for it, and whether it starts
        past what this node holds (a rebuild from Nu)."""
        hint = self.hint
        head = max(b.primary_received, hint.head_pos if hint else 0)
        start = max(b.held + 1, hint.resend_floor if hint else 0)
        resend = max(0, head - start + 1)
        resend_s = 0.0
        if hint is not None and resend:
            resend_s = calls_seconds(resend, hint.frame_max, hint.per_call_s, hint.tuple_bytes * hint.per_byte_s)
        return resend, resend_s, start != b.held + 1

    def cost(self, b: Backlog) -> tuple[float, float] | None:
        """The operator's cost per call and per tuple: the primary's when it says it, else this node's own;
        None when neither is known. A paced standby's own calls wait for nothing and carry its backlog, the
        size a replay's calls have, where a primary that keeps up makes small ones whose fit says little of
        a tuple's cost: each term is then the larger of the two."""
        own, primary = b.own_cost, self.primary_cost
        if not any(primary):
            return own
        if b.paced and own is not None:
            return max(primary[0], own[0]), max(primary[1], own[1])
        return primary

    def tune(self, now: float, b: Backlog) -> None:
        """With recovery_target_ms, every TUNE_EVERY_S, the cheapest standby_defer (a warm standby) or
        snapshot_interval (a Passive Standby: its primary takes it from the heartbeats) whose predicted
        recovery meets the target (core.recovery_model.choose_cheapest): what waits for the takeover grows
        with it, by the primary's input rate."""
        target = self.cfg.recovery_target_ms / 1000
        if not target or now < self._tune_at or (b.paced and not self.passive):
            return
        self._tune_at = now + TUNE_EVERY_S
        mark, self._rate_mark = self._rate_mark, (now, b.primary_received)
        p, cost = self.predicted, self.cost(b)
        if p is None or cost is None or mark is None or now <= mark[0]:
            return
        rate = max(0.0, (b.primary_received - mark[1]) / (now - mark[0]))
        resend, resend_s, _ = self.resend(b)
        fixed = p.detection_s + p.reconnection_s + p.restore_s + resend_s

        def predict(x: float) -> float:
            return fixed + replay_s(resend + math.ceil(rate * x), cost, b.take)

        self.choice = choose_cheapest(target, predict, INTERVAL_LADDER if self.passive else DEFER_LADDER)
        if not self.passive:
            self.defer = self.choice.value

    def standby_view(self, b: Backlog) -> StandbyView | None:
        """This standby's part of a predicted recovery, for Nu to choose Bsize with (StandbyView); None
        before its first prediction or an operator call timed."""
        p, cost = self.predicted, self.cost(b)
        if p is None or cost is None:
            return None
        return StandbyView(fixed_s=p.detection_s + p.reconnection_s, call_s=cost[0], tuple_s=cost[1], take=b.take,
                           backlog=max(0, b.held - b.done))

    def target_status(self) -> dict | None:
        """The recovery target and the latest choice for it (None without a target or a choice)."""
        ch = self.choice
        if not self.cfg.recovery_target_ms or ch is None:
            return None
        name = "snapshot_interval" if self.passive else "standby_defer"
        return {"target_ms": self.cfg.recovery_target_ms, name: ch.value,
                "predicted_ms": round(ch.predicted_s * 1000, 1), "met": ch.met,
                "candidates_ms": {k: round(v * 1000, 1) for k, v in ch.candidates.items()}}


def replay_s(tuples: int, cost: tuple[float, float] | None, take: int) -> float:
    """Seconds an operator takes for `tuples` in calls of up to `take` (0 without a cost)."""
    return 0.0 if cost is None else calls_seconds(tuples, take, *cost)
