"""Records drawn from a table's schema: a bounded, deterministic load for a pipeline whose data has no
generator of its own (the Nexmark tables have the `nexmark` crate's, the ticks theirs).

Same seed, same records. Values come from small domains, so that a window query finds groups: an
integer from 0-99, a VARCHAR from a few words, a DOUBLE and a DECIMAL within their types, a nullable
column NULL one time in ten. The event-time column advances by 1-4 ms a record and one record in fifty
steps back by up to twice the watermark delay and half a second, so some records are out of order and a
few are late.
"""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np

from ..formats.by_name import record_format
from ..formats.schema import Schema

WORDS = ("alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "theta")
START_MS = 1_764_000_000_000


def draw_rows(schema: Schema, n: int, *, seed: int = 7, start_ms: int = START_MS, iso_times: bool = False,
              first: int = 0) -> list[dict]:
    """Rows `first` .. `first + n - 1` of the table's deterministic draw (values as `coerce` gives them;
    TIMESTAMPs as ms, or ISO-8601 text with `iso_times`)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    total = first + n
    steps = rng.integers(1, 5, total)
    back = np.where(rng.random(total) < 0.02, rng.integers(0, 2 * schema.watermark_delay_ms + 500, total), 0)
    times = start_ms + np.cumsum(steps) - back
    rows = []
    draws = {c.name: _column(rng, c, total) for c in schema.columns if c.name != schema.event_time}
    nulls = {c.name: rng.random(total) < 0.1 for c in schema.columns if c.nullable and c.name != schema.event_time}
    for i in range(first, total):
        row = {}
        for c in schema.columns:
            if c.name == schema.event_time:
                v = int(times[i])
            elif c.name in nulls and nulls[c.name][i]:
                v = None
            else:
                v = draws[c.name][i]
            if v is not None and c.type.kind == "TIMESTAMP" and iso_times:
                v = (dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=v)).isoformat(
                    timespec="milliseconds").replace("+00:00", "Z")
            row[c.name] = v
        rows.append(row)
    return rows


def _column(rng: np.random.Generator, col, n: int) -> list:
    kind = col.type.kind
    if kind in ("BIGINT", "INT"):
        return rng.integers(0, 100, n).tolist()
    if kind == "DOUBLE":
        return np.round(rng.uniform(-50, 50, n), 3).tolist()
    if kind == "DECIMAL":
        p, s = col.type.precision, col.type.scale
        hi = min(10 ** (p - s) * 10 ** s - 1, 10 ** 12)
        return [decimal.Decimal(int(v)).scaleb(-s) for v in rng.integers(0, hi + 1, n)]
    if kind == "BOOLEAN":
        return (rng.random(n) < 0.5).tolist()
    if kind == "TIMESTAMP":
        return (START_MS + rng.integers(0, 86_400_000, n)).tolist()
    words = [w[: col.type.length] if col.type.length else w for w in WORDS]
    return [words[k] for k in rng.integers(0, len(words), n)]


def draw_records(schema: Schema, n: int, *, seed: int = 7, iso_times: bool = False, first: int = 0) -> list[bytes]:
    """The records of `draw_rows`, in the table's format."""
    return record_format(schema).encode(draw_rows(schema, n, seed=seed, iso_times=iso_times, first=first))
