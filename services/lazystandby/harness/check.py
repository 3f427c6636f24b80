"""The truth-table check: rebuild the expected output from the source, compare it with what Nd holds.

Precise recovery means Nd's output equals the no-failure output tuple for tuple; this reports what is
lost, duplicated or out of order per stream, with a readable diff of the first difference.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from ..core.seq import StreamRegistry, partition_streams
from ..core.tuples import TupleBatch
from ..formats import control
from ..operators.selection import Selection
from ..sources.generator import interleave


def expected_outputs(streams: list[str], *, seed: int, total: int, predicate: str,
                     switch: tuple[int, str] | None = None, poison: bytes = b"",
                     keys: int = 0) -> list[tuple[str, int]]:
    """(stream, seq) of every tuple the selection keeps, in per-stream order. `switch` = (pos, predicate):
    a control tuple at link position `pos` (after the first pos - 1 data tuples), as Nu's inject_control
    places one, switches the selection there, as it does on N and N'. A tuple holding `poison`
    (chaos_poison) is quarantined, and has no output."""
    sel = Selection(predicate)
    reg = StreamRegistry(streams)
    recs = [(s, q, p, reg.id_of(s)) for s, q, p in interleave(streams, total, seed, keys=keys)]
    if switch is not None:
        pos, after = switch
        recs.insert(pos - 1, ("_control", 0, control.encode(after), StreamRegistry.CONTROL))
    batch = TupleBatch(first=1, streams=[i for _, _, _, i in recs], seqs=[q for _, q, _, _ in recs],
                       payloads=[p for _, _, p, _ in recs])
    return [(recs[i][0], recs[i][1]) for i in sel.process(batch).tolist() if not (poison and poison in recs[i][2])]


@dataclass
class CheckResult:
    expected: int
    got: int
    lost: int
    duplicated: int
    out_of_order: int
    oseq_gaps: int
    unexpected: int = 0
    same_order: bool = True  # the whole output in the no-failure order, across streams too
    diff: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.same_order and not (
            self.lost or self.duplicated or self.unexpected or self.out_of_order or self.oseq_gaps)

    def as_dict(self) -> dict:
        return asdict(self)


def compare(expected: list[tuple[str, int]], got: list[tuple[int, str, int]], *,
            per_stream_only: bool = False) -> CheckResult:
    """`got` rows are (oseq, stream, seq) in the order Nd stored them. With `per_stream_only` the order
    across streams is not compared (when the expectation does not fix it, as with Kafka arrival order)."""
    exp_c = Counter(expected)
    got_keys = [(s, q) for _, s, q in got]
    got_c = Counter(got_keys)
    lost = sum((exp_c - got_c).values())
    duplicated = sum(n - exp_c[k] for k, n in got_c.items() if k in exp_c and n > exp_c[k])
    unexpected = sum(n for k, n in got_c.items() if k not in exp_c)
    last: dict[str, int] = {}
    out_of_order = 0
    for s, q in got_keys:
        if q <= last.get(s, 0):
            out_of_order += 1
        last[s] = max(q, last.get(s, 0))
    gaps = sum(1 for i, (o, _, _) in enumerate(got) if o != i + 1)
    diff: list[str] = []
    per_stream_exp: dict[str, list[int]] = {}
    per_stream_got: dict[str, list[int]] = {}
    for s, q in expected:
        per_stream_exp.setdefault(s, []).append(q)
    for s, q in got_keys:
        per_stream_got.setdefault(s, []).append(q)
    for s in sorted(set(per_stream_exp) | set(per_stream_got)):
        e, g = per_stream_exp.get(s, []), per_stream_got.get(s, [])
        if e != g:
            i = next((i for i, (a, b) in enumerate(zip(e, g, strict=False)) if a != b), min(len(e), len(g)))
            diff.append(f"stream {s}: first difference at output #{i}: expected seqs {e[max(0, i-2):i+3]} "
                        f"got {g[max(0, i-2):i+3]} (expected {len(e)}, got {len(g)})")
    return CheckResult(expected=len(expected), got=len(got), lost=lost, duplicated=duplicated,
                       unexpected=unexpected, out_of_order=out_of_order, oseq_gaps=gaps,
                       same_order=(not diff) if per_stream_only else got_keys == list(expected), diff=diff[:10])


def kafka_expected(bootstrap: str, streams: list[str], predicate: str, *, prefix: str = "ls.",
                   max_tuple_bytes: int = 65536, partitions: int = 1,
                   poison: bytes = b"") -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """Expected output rebuilt from the source topics themselves: every valid record, selected by the
    predicate in force at its position. Parameter changes come from the link log's control entries
    (each says after which seq of every stream it took effect). Returns (expected, malformed), each a list
    of (stream, seq): the malformed records are the dead letters Nu must have written, and with them those
    holding `poison` (chaos_poison), which the operator nodes quarantine to the dead letters."""
    from ..core.errors import MalformedRecord
    from ..formats import control
    from ..formats.predicate import compile_predicate
    from ..formats.ticks import validate
    from ..sources.kafka_source import CONTROL, Topics, read_linklog, read_partition

    topics = Topics(prefix)
    history: list[tuple[dict[str, int], str]] = []
    last: dict[str, int] = {}
    for _, entry in read_linklog(bootstrap, topics):
        for run in entry["runs"]:
            if run[0] == CONTROL:
                if control.watermark_of(run[3]) is None:  # a window query's watermark switches nothing
                    history.append((dict(last), control.decode(run[3])))
            else:
                last[run[0]] = run[1] + run[2] - 1
    fns = {p: compile_predicate(p) for p in {predicate, *(h[1] for h in history)}}
    expected: list[tuple[str, int]] = []
    malformed: list[tuple[str, int]] = []
    links = [(source, part, stream) for source in streams
             for part, stream in enumerate(partition_streams([source], partitions))]
    for source, part, stream in links:
        for r in read_partition(bootstrap, topics.source(source), partition=part):
            seq = r.offset + 1
            try:
                validate(r.value or b"", max_bytes=max_tuple_bytes)
            except MalformedRecord:
                malformed.append((stream, seq))
                continue
            if poison and poison in r.value:
                malformed.append((stream, seq))
                continue
            in_force = predicate
            for thresholds, p in history:
                if seq > thresholds.get(stream, 0):
                    in_force = p
            if fns[in_force](r.value.decode().split(",")):
                expected.append((stream, seq))
    return expected, malformed


def kafka_window_expected(bootstrap: str, streams: list[str], query, *, every: int, idle: int = 0,
                          per_stream: bool = True, prefix: str = "ls.", max_tuple_bytes: int = 65536,
                          partitions: int = 1) -> tuple[list[bytes], list[tuple[str, int]], list[tuple[str, int]]]:
    """The window results for ticks that came through Kafka: the ticks in the order Nu admitted them (its
    link log's data runs; a late tick has no position and changes no watermark, so leaving those out changes
    nothing), then `window_expected`. Returns (results, late, malformed): late, the (stream, seq) of every
    valid source record the link log does not hold (the late ticks Nu must have dropped); malformed, those of
    the records `validate` refuses (the dead letters Nu must have written)."""
    from ..core.errors import MalformedRecord
    from ..formats.ticks import validate
    from ..sources.kafka_source import Topics, read_partition

    topics = Topics(prefix)
    payloads: dict[tuple[str, int], bytes] = {}
    malformed: list[tuple[str, int]] = []
    links = [(source, part, stream) for source in streams
             for part, stream in enumerate(partition_streams([source], partitions))]
    for source, part, stream in links:
        for r in read_partition(bootstrap, topics.source(source), partition=part):
            try:
                validate(r.value or b"", max_bytes=max_tuple_bytes)
            except MalformedRecord:
                malformed.append((stream, r.offset + 1))
                continue
            payloads[(stream, r.offset + 1)] = r.value
    order = link_order(bootstrap, topics)
    seen = set(order)
    known = tuple(partition_streams(streams, partitions))
    results, late = window_expected([payloads[k] for k in order], query, every=every, idle=idle,
                                    streams=[st for st, _ in order] if per_stream else None, known=known)
    if late:
        raise ValueError(f"{len(late)} ticks in Nu's link log are late by the truth table's rules")
    return results, sorted(set(payloads) - seen), malformed


def link_order(bootstrap: str, topics) -> list[tuple[str, int]]:
    """The (stream, seq) of every data tuple in Nu's link log, in link order, once each (a restarted Nu
    logs again what it replays)."""
    from ..sources.kafka_source import CONTROL, read_linklog

    order: list[tuple[str, int]] = []
    seen: set[tuple[str, int]] = set()
    for _, entry in read_linklog(bootstrap, topics):
        for run in entry["runs"]:
            if run[0] == CONTROL:
                continue
            for q in range(run[1], run[1] + run[2]):
                if (run[0], q) not in seen:
                    seen.add((run[0], q))
                    order.append((run[0], q))
    return order


def nu_read_all(status: dict) -> bool:
    """From Nu's status: its consumer stands at the end of every source topic (a window query's Kafka truth
    table follows Nu's link log, and is short until then)."""
    lag = status.get("source_lag") or {}
    return bool(lag) and not any(lag.values())


def dead_letter_keys(bootstrap: str, prefix: str = "ls.", *, late: bool = False) -> list[tuple[str, int]]:
    """The (stream, seq) of every record in the dead-letter topic, in its order (a restarted Nu may write
    one again: the dead letters are at least once, keyed by stream:seq)."""
    from ..sources.kafka_source import Topics, read_partition

    out = []
    topics = Topics(prefix)
    for r in read_partition(bootstrap, topics.late if late else topics.deadletters):
        stream, _, seq = (r.key or b"").decode().rpartition(":")
        out.append((stream, int(seq)))
    return out


def window_expected(payloads: list[bytes], query, *, every: int, first: int = 1, streams: list | None = None,
                    known: tuple = ("I1", "I2"), idle: int = 0) -> tuple[list[bytes], list[int]]:
    """The window results Nd must hold, rebuilt without the operator or Nu's placer: ticks in admission
    order (`payloads`, from link position `first`, on `streams`: each tick's stream, None for one stream),
    watermark records at every position that is a multiple of `every` carrying the least over the streams
    (`known` from the start, the others once heard from; none past `idle` positions without a tick) of
    each one's largest event time before them, ticks whose every window is final at the watermark in force
    dropped as late, then a plain pandas group-by per (window, keys) with exact arithmetic (Python integers
    and decimals). Returns (results in emission order, indices of late ticks). Each result is the text the
    operator emits (operators/window.py)."""
    from ..formats.ticks import FIELD_INDEX
    from .placement import place

    split = [p.decode().split(",") for p in payloads]
    placed = place([int(f[FIELD_INDEX["ts"]]) for f in split], size=query.size_ms, slide=query.slide_ms,
                   lateness=query.lateness_ms, every=every, streams=streams, known=known, idle=idle, first=first)
    rows = _open_window_rows(split, placed, query)
    if not rows:
        return [], placed.late
    return [_window_text(r, query) for r in _final_groups(rows, placed.marks, query)], placed.late


def _open_window_rows(split: list[list[str]], placed, query) -> list[tuple[int, list[str]]]:
    """(window start, fields) of every tick kept and selected, once per window still open at it."""
    from ..formats.predicate import compile_predicate
    from ..formats.ticks import FIELD_INDEX

    size, slide, lateness = query.size_ms, query.slide_ms, query.lateness_ms
    where = compile_predicate(query.where) if query.where else None
    rows: list[tuple[int, list[str]]] = []
    for i, watermark in zip(placed.kept, placed.in_force, strict=True):
        fields = split[i]
        if where is not None and not where(fields):
            continue
        ts = int(fields[FIELD_INDEX["ts"]])
        latest = ts - ts % slide
        for k in range(size // slide):
            start = latest - k * slide
            if watermark is None or start + size + lateness > watermark:
                rows.append((start, fields))
    return rows


def _final_groups(rows: list[tuple[int, list[str]]], marks: list[int], query) -> list[dict]:
    """Per (window, keys): the count and each column's exact sum, min and max, for the groups some
    watermark record makes final, in emission order (by that record, then by window and keys)."""
    import numpy as np
    import pandas as pd

    from ..formats.ticks import FIELD_INDEX, FIELD_TYPE

    columns = sorted({a.column for a in query.aggregates if a.column})
    df = pd.DataFrame({"start": np.array([s for s, _ in rows], np.int64),
                       **{k: [f[FIELD_INDEX[k]] for _, f in rows] for k in query.keys}})
    for c in columns:
        # Exact: integers, a price in millionths. int64 sums where no group can leave int64 (the largest
        # value times the rows), Python integers (object columns, summed exactly by pandas) otherwise.
        vals = [_micro(f[FIELD_INDEX[c]]) if FIELD_TYPE[c] is float else int(f[FIELD_INDEX[c]]) for _, f in rows]
        big = max(abs(v) for v in vals) * len(vals) >= 1 << 62
        df[c] = pd.Series(vals, dtype=object if big else np.int64)
    spec = {"_n": ("start", "size")}
    for c in columns:
        spec |= {f"{c}_sum": (c, "sum"), f"{c}_min": (c, "min"), f"{c}_max": (c, "max")}
    agg = df.groupby(["start", *query.keys], sort=True).agg(**spec).reset_index()
    at = np.searchsorted(np.array(marks, np.int64), agg["start"].to_numpy() + query.size_ms + query.lateness_ms,
                         side="left")
    agg["_at"] = at
    return agg[agg["_at"] < len(marks)].sort_values("_at", kind="stable").to_dict("records")


def _window_text(r: dict, query) -> bytes:
    """A final group as the text the operator emits (operators/window.py)."""
    import decimal

    from ..formats.ticks import FIELD_TYPE
    from ..operators.window import average, format_value

    def value(column: str, v) -> decimal.Decimal | int:
        return decimal.Decimal(int(v)).scaleb(-6) if FIELD_TYPE[column] is float else int(v)

    n = int(r["_n"])
    text = [str(r["start"]), str(r["start"] + query.size_ms), *(str(r[k]) for k in query.keys)]
    for a_ in query.aggregates:
        if a_.fn == "count":
            text.append(str(n))
        elif a_.fn == "avg":
            text.append(format_value(average(value(a_.column, r[f"{a_.column}_sum"]), n), True))
        else:
            text.append(format_value(value(a_.column, r[f"{a_.column}_{a_.fn}"]), FIELD_TYPE[a_.column] is float))
    return ",".join(text).encode()


def _micro(text: str) -> int:
    """A decimal text of at most 6 places as an integer number of millionths, exactly."""
    whole, _, frac = text.partition(".")
    sign = -1 if whole.startswith("-") else 1
    return sign * (abs(int(whole)) * 1_000_000 + int((frac + "000000")[:6]))


def compare_results(expected: list[bytes], got: list[tuple[int, bytes]], *, aggregates: int) -> dict:
    """Window results Nd holds (`got`: (oseq, payload) in Nd's order) against the truth table. A result
    is named by its window and keys (its fields before the last `aggregates`): `wrong` when it is expected
    but its aggregates differ, `lost` when it is missing, `duplicated` when held more than once,
    `unexpected` when no such window and keys are expected; `same_order` when Nd holds exactly the
    expected results in the expected order."""
    exp = {p.rsplit(b",", aggregates)[0]: p for p in expected}
    names = [p.rsplit(b",", aggregates)[0] for _, p in got]
    seen: Counter = Counter()
    wrong = unexpected = 0
    for name, (_, p) in zip(names, got, strict=True):
        seen[name] += 1
        if name not in exp:
            unexpected += 1
        elif seen[name] == 1 and exp[name] != p:
            wrong += 1
    rank = {name: i for i, name in enumerate(exp)}
    ranks = [rank[name] for name in names if name in rank]
    out_of_order = sum(1 for a, b in zip(ranks, ranks[1:], strict=False) if b < a)
    lost = sum(1 for n in exp if not seen[n])
    duplicated = sum(c - 1 for n, c in seen.items() if c > 1)
    gaps = sum(1 for i, (o, _) in enumerate(got) if o != i + 1)
    same = [p for _, p in got] == expected
    return {"expected": len(expected), "got": len(got), "lost": lost, "duplicated": duplicated, "wrong": wrong,
            "unexpected": unexpected, "out_of_order": out_of_order, "oseq_gaps": gaps, "same_order": same,
            "ok": same and not (lost or duplicated or wrong or unexpected or gaps)}
