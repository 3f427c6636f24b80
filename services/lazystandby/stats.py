"""A histogram a node keeps without importing Prometheus: fixed buckets, cumulative counts at export."""

from __future__ import annotations

import bisect


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


BATCH_BOUNDS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RECOVERY_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
LATENCY_BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
