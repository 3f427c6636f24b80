"""Latency statistics a node keeps without importing Prometheus: fixed buckets (cumulative counts at export)
and a window of recent raw values (exact quantiles for status and benchmarks)."""

from __future__ import annotations

import bisect
from collections import deque


class Buckets:
    """Observations counted into upper-bounded buckets (seconds); `+Inf` is implied."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def quantile(self, q: float) -> float:
        """Upper bound of the bucket holding quantile q (coarse, as Prometheus' histogram_quantile is)."""
        target, seen = q * self.count, 0
        for bound, n in zip([*self.bounds, float("inf")], self.counts, strict=True):
            seen += n
            if seen >= target and n:
                return bound
        return 0.0

    def cumulative(self) -> list[tuple[str, int]]:
        out, total = [], 0
        for bound, n in zip([*map(str, self.bounds), "+Inf"], self.counts, strict=True):
            total += n
            out.append((bound, total))
        return out


class RecentWindow:
    """The last `size` observations, each with a weight (the tuples it stands for): a bucket's upper bound
    says only that p50 is under 50 ms, a benchmark wants the value."""

    def __init__(self, size: int = 4096) -> None:
        self._values: deque[tuple[float, int]] = deque(maxlen=size)

    def observe(self, value: float, weight: int = 1) -> None:
        if weight > 0:
            self._values.append((value, weight))

    def quantile(self, q: float) -> float:
        """The smallest value v with at least q of the window's weight at or below v (0.0 when empty)."""
        ordered = sorted(self._values)
        total = sum(w for _, w in ordered)
        seen = 0
        for value, weight in ordered:
            seen += weight
            if seen >= q * total:
                return value
        return 0.0


BATCH_BOUNDS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RECOVERY_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
LATENCY_BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
