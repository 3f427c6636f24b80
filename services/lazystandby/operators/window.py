"""The keyed event-time window aggregation, in Python over Arrow (`Query.kind == "window"`).

Results are emitted at watermark records (formats/control.py) and nowhere else: at each, every window
the watermark makes final, ordered by window start and then by key, one output per (window, key), each
mapped to the record's position. The result depends only on the link order, never on how the inputs were
cut into calls, so N and N' emit the same results with the same output numbers, and a node that rebuilt
its state from any position emits the same ones for every window whose inputs it holds.

Exactness: sums are taken in decimal128(38, s) (a price has at most 6 decimals, a volume is an
integer), counts in int64, min and max of the exact values; an average is the exact sum over the count,
rounded half-even to 6 decimals. No float is ever summed, so the order in which partial results are
merged changes nothing.

State: per open window, the tables of partial aggregates of the calls that fell into it; a record merges
(one group-by) only the windows it makes final, so a record costs what it emits, however large the open
state. `watermark_every` (Nu's record period) trades the records' fixed cost against how long a final
window waits for them.
"""

from __future__ import annotations

import decimal
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.messages import Params
from ..core.seq import StreamRegistry
from ..core.tuples import TupleBatch
from ..core.windows import WindowSpec
from ..formats import control
from ..formats.predicate import compile_columnar
from ..formats.query import Query
from ..formats.ticks import FIELD_TYPE, parse_columns
from .base import Operator, Outputs

# The exact types a column is aggregated in.
_DECIMAL = {float: pa.decimal128(38, 6), int: pa.decimal128(38, 0)}
WINDOW = "_window"  # the column of a window's start (ms), in partials and in Spark's rows
_WIN = WINDOW


def result_columns(query: Query) -> list[str]:
    """The fields of a window result, in its text: window start and end (ms), the keys, the aggregates."""
    return ["window_start", "window_end", *query.keys, *(a.name for a in query.aggregates)]


def partials(query: Query) -> list[tuple[str, str, str]]:
    """The partial aggregates kept per (window, keys), each (stored name, raw column, function): a count
    (`_n`) and, per column, its sum, min and max as the aggregates need them. The Spark operator's query
    yields the same columns, so one formatting (`result_texts`) serves both."""
    out = [("_n", "_n", "sum")]
    for c in sorted({a.column for a in query.aggregates if a.column}):
        fns = {a.fn for a in query.aggregates if a.column == c}
        for fn in ("sum", "min", "max"):
            if fn in fns or (fn == "sum" and "avg" in fns):
                out.append((f"{c}__{fn}", c, fn))
    return out


def result_texts(query: Query, size_ms: int, done: pa.Table) -> pa.Array:
    """One result text per row of `done` (window start `_window`, the keys, the partials): `window_start,
    window_end,keys...,aggregates...`."""
    cols = done.to_pydict()
    n = done.num_rows
    fields: list[list[str]] = [[str(s) for s in cols[_WIN]], [str(s + size_ms) for s in cols[_WIN]]]
    for k in query.keys:
        fields.append([str(v) for v in cols[k]])
    for a in query.aggregates:
        if a.fn == "count":
            fields.append([str(v) for v in cols["_n"]])
        elif a.fn == "avg":
            fields.append([format_value(average(s, c), True)
                           for s, c in zip(cols[f"{a.column}__sum"], cols["_n"], strict=True)])
        else:
            exact = FIELD_TYPE[a.column] is float
            fields.append([format_value(v, exact) for v in cols[f"{a.column}__{a.fn}"]])
    return pa.array([",".join(f[i] for f in fields).encode() for i in range(n)], pa.binary())


def format_value(value, decimals: bool) -> str:
    """A result field as text, the same way for the operator and the truth table: an integer column's sum,
    min and max as integers, a decimal column's and every average with 6 places (half-even)."""
    if decimals:
        return f"{decimal.Decimal(value).quantize(decimal.Decimal('0.000001'), rounding=decimal.ROUND_HALF_EVEN):f}"
    return str(int(value))


def average(total: decimal.Decimal | int, count: int) -> decimal.Decimal:
    """The exact mean, rounded half-even to 6 decimals."""
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        return (decimal.Decimal(total) / count).quantize(decimal.Decimal("0.000001"), rounding=decimal.ROUND_HALF_EVEN)


class WindowAggregate(Operator):
    """Per key and event-time window, the aggregates of the ticks `query.where` selects."""

    name = "python-window"
    stateful = True
    probeable = True

    def __init__(self, query: Query) -> None:
        if not query.stateful:
            raise ValueError(f"{query.text()!r} is not a window query")
        self.query = query
        self.spec = WindowSpec(query.size_ms, query.slide_ms, query.lateness_ms)
        self._where, fields = compile_columnar(query.where) if query.where else (None, set())
        self._columns = {a.column for a in query.aggregates if a.column}
        self._fields = set(fields) | set(query.keys) | self._columns | {"ts"}
        self._group = [_WIN, *query.keys]
        self._aggs = partials(query)
        # The open windows' partial aggregates, by window start: tables grouped by keys already, oldest
        # first. A record merges only the windows it makes final, so its cost follows what it emits, not
        # the whole state. Between records a window's tables are merged by size (`_tiered`): a call's
        # table merges with the newest ones while they are no more than twice its size, so a group is
        # merged again about log2(window's groups / a call's groups) times, whatever the state's size.
        self._by_window: dict[int, list[pa.Table]] = {}
        # Rows and bytes held, kept as the tables come and go: status reads them from another thread while
        # a call changes `_by_window`, which it must not walk.
        self._rows = 0
        self._bytes = 0
        self.watermark: int | None = None
        self.unparseable = 0
        self.results = 0
        # What the calls added since the last state view (each call's partials, before tiering): the next
        # delta snapshot. None: not tracked (no view taken yet, or more rows than the state itself: a
        # delta that large is worth no more than a full view, and nobody took one for a while).
        self._delta: list[pa.Table] | None = None
        self._delta_rows = 0

    def probe_copy(self) -> WindowAggregate:
        return WindowAggregate(self.query)

    # --- state --------------------------------------------------------------------------------------
    COMPACT_AT = 16  # most tables a window holds: past it the newest are merged whatever their sizes

    def live_keys(self) -> int:
        """Partial (window, key) groups held: a group appears once per table of its window it is in, so
        this is at most the tables held (COMPACT_AT at most) times the distinct groups, and in practice
        below twice them (`_tiered`)."""
        return self._rows

    def state_bytes(self) -> int:
        return self._bytes

    def _hold(self, start: int, tables: list[pa.Table]) -> None:
        old = self._by_window.get(start, [])
        self._rows += sum(t.num_rows for t in tables) - sum(t.num_rows for t in old)
        self._bytes += sum(t.nbytes for t in tables) - sum(t.nbytes for t in old)
        if tables:
            self._by_window[start] = tables
        else:
            self._by_window.pop(start, None)

    def restore(self, position: int, params: Params | None = None) -> None:
        """A node resuming at `position` without the state before it starts empty, with the watermark in
        force there; it holds every input of every window not delivered yet (Nu trims OQu no further)."""
        self._by_window, self._rows, self._bytes = {}, 0, 0
        self._delta, self._delta_rows = None, 0
        wm = control.watermark_of(params.payload) if params is not None else None
        self.watermark = wm

    snapshots = True

    def state_view(self, full: bool = True) -> tuple:
        """A full view: the open windows' tables (immutable Arrow tables, the lists copied); a delta: the
        partials the calls made since the previous view. Both with the watermark and the counters."""
        delta, self._delta, self._delta_rows = self._delta, [], 0
        if full or delta is None:
            return True, {w: list(ts) for w, ts in self._by_window.items()}, self.watermark, self.unparseable, \
                self.results
        return False, delta, self.watermark, self.unparseable, self.results

    def view_is_full(self, view: tuple) -> bool:
        return view[0]

    def encode_state(self, view: tuple) -> bytes:
        """One Arrow IPC stream (zstd-compressed buffers), the watermark and counters in its schema's
        metadata. Full: every open window's partials merged into one table per window (so a snapshot holds
        each (window, key) group once), concatenated. Delta: the calls' partials merged into one table,
        less the windows final at the watermark (nobody needs them again)."""
        full, tables, watermark, unparseable, results = view
        if full:
            merged = [self._merge(pa.concat_tables(ts)) if len(ts) > 1 else ts[0] for ts in tables.values() if ts]
        else:
            merged = [self._merge(pa.concat_tables(tables))] if tables else []
            if merged and watermark is not None:
                starts = merged[0][_WIN].to_numpy()
                merged = [merged[0].filter(pa.array(self.spec.final_at(starts) > watermark))]
        meta = {b"watermark": b"" if watermark is None else str(watermark).encode(),
                b"unparseable": str(unparseable).encode(), b"results": str(results).encode(),
                b"kind": b"full" if full else b"delta"}
        sink = pa.BufferOutputStream()
        schema = (merged[0].schema if merged else self._empty_partials().schema).with_metadata(meta)
        with pa.ipc.new_stream(sink, schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
            for t in merged:
                w.write_table(t.replace_schema_metadata(meta))
        return sink.getvalue().to_pybytes()

    def load_state(self, data: bytes, deltas: Sequence[bytes] = ()) -> None:
        """The state a full view's `encode_state` made, in place of what is held, with each delta's added
        in order: a window's partials from all of them merged once, then the windows final at the last
        watermark dropped (their results were made before the last snapshot)."""
        by_window: dict[int, list[pa.Table]] = {}
        meta: dict = {}
        for i, blob in enumerate([data, *deltas]):
            reader = pa.ipc.open_stream(pa.py_buffer(blob))
            table = reader.read_all()
            meta = reader.schema.metadata or {}
            if (meta.get(b"kind", b"full") == b"full") != (i == 0):
                raise ValueError(f"snapshot {i} of a chain is {meta.get(b'kind', b'full').decode()}: "
                                 f"a chain is one full snapshot, then deltas")
            if table.num_rows:
                wins = table[_WIN].to_numpy()
                for start in np.unique(wins).tolist():
                    by_window.setdefault(start, []).append(table.filter(pa.array(wins == start)))
        wm = meta.get(b"watermark", b"")
        self.watermark = int(wm) if wm else None
        self.unparseable = int(meta.get(b"unparseable", b"0"))
        self.results = int(meta.get(b"results", b"0"))
        self._by_window, self._rows, self._bytes = {}, 0, 0
        self._delta, self._delta_rows = None, 0
        for start, tables in by_window.items():
            if self.watermark is not None and self.spec.final_at(start) <= self.watermark:
                continue
            merged = self._merge(pa.concat_tables(tables)) if len(tables) > 1 else tables[0]
            self._hold(start, [merged.combine_chunks()])

    def _empty_partials(self) -> pa.Table:
        """A table with no rows in the partials' schema (a snapshot of no open window)."""
        cols = {_WIN: pa.array([], pa.int64()), "_n": pa.array([], pa.int64())}
        for k in self.query.keys:
            cols[k] = pa.array([], self._key_type(k))
        for c in self._columns:
            cols[c] = pa.array([], self._exact_type(c))
        return self._merge(pa.table(cols), first=True)

    def input_fault(self, error: BaseException) -> bool:
        """None: a call that failed part way has changed the state, so its inputs cannot be narrowed down by
        calling again (quarantine); any failure replaces the node."""
        return False

    # --- calls --------------------------------------------------------------------------------------
    def process(self, batch: TupleBatch) -> Outputs:
        controls = np.flatnonzero(batch.streams == StreamRegistry.CONTROL)
        lo = 0
        at: list[np.ndarray] = []
        payloads: list[pa.Array] = []
        for c in controls.tolist():
            if c > lo:
                self._add(batch.payloads.slice(lo, c - lo))
            wm = control.watermark_of(batch.payload(c))
            if wm is None:
                self.unparseable += 1  # no other control record reaches a window query (Nu refuses them)
            else:
                rows = self._close(wm)
                if len(rows):
                    at.append(np.full(len(rows), c, np.int64))
                    payloads.append(rows)
            lo = c + 1
        if lo < len(batch):
            self._add(batch.payloads.slice(lo, len(batch) - lo))
        if not at:
            return Outputs.none()
        return Outputs(np.concatenate(at), pa.concat_arrays(payloads))

    def _selected(self, payloads: pa.Array) -> dict[str, pa.Array]:
        """The inputs between two records that the query aggregates, as columns: `ts` (event time, ms),
        the keys, and each aggregated column (`_columns`)."""
        ok, cols = parse_columns(payloads, self._fields, admitted=True)
        keep = pc.fill_null(self._where(cols, len(payloads)), False) if self._where else None
        if ok is not None:
            self.unparseable += len(payloads) - pc.sum(ok).as_py()
            keep = ok if keep is None else pc.and_(keep, pc.fill_null(ok, False))
        if keep is not None:
            cols = {k: pc.filter(v, keep) for k, v in cols.items()}
        return cols

    def _exact_type(self, column: str) -> pa.DataType:
        """The type an aggregated column's partials are kept in (exact: no float is summed)."""
        return _DECIMAL[FIELD_TYPE[column]]

    def _key_type(self, key: str) -> pa.DataType:
        return pa.string()

    def _add(self, payloads: pa.Array) -> None:
        """Inputs between two records: their partial aggregates per (window, keys), kept for the next record."""
        cols = self._selected(payloads)
        n = len(cols["ts"])
        if not n:
            return
        starts = self.spec.starts(cols["ts"].to_numpy()).ravel()  # (n, windows per tick), flattened
        take = np.repeat(np.arange(n), self.spec.per_tick)
        if self.watermark is not None:
            # A sliding window's tick may lie in windows already final (and emitted) besides open ones:
            # only the open ones take it. (Nu dropped the ticks whose windows are all final.)
            live = self.spec.final_at(starts) > self.watermark
            starts, take = starts[live], take[live]
        if not len(take):
            return
        take = pa.array(take)
        table = {_WIN: pa.array(starts), "_n": pa.array(np.ones(len(take), np.int64))}
        for k in self.query.keys:
            table[k] = cols[k].take(take)
        for c in self._columns:
            table[c] = cols[c].cast(self._exact_type(c)).take(take)
        partial = self._merge(pa.table(table), first=True)
        if self._delta is not None:
            self._delta.append(partial)
            self._delta_rows += partial.num_rows
            if self._delta_rows > max(self._rows, 1 << 16):
                self._delta, self._delta_rows = None, 0
        wins = partial[_WIN].to_numpy()
        starts_in = np.unique(wins).tolist()
        for start in starts_in:
            part = partial if len(starts_in) == 1 else partial.filter(pa.array(wins == start))
            self._hold(start, self._tiered([*self._by_window.get(start, []), part]))

    def _tiered(self, held: list[pa.Table]) -> list[pa.Table]:
        """Size-tiered merging of one window's tables (oldest first, the newest just added): the newest
        two are merged while the older is at most twice the newer, or while more than COMPACT_AT are
        held. Merging everything every few calls would cost the whole state each time (at a million
        keys, more than the calls themselves); this way the tables' sizes grow geometrically."""
        while len(held) >= 2 and (held[-2].num_rows <= 2 * held[-1].num_rows or len(held) > self.COMPACT_AT):
            held[-2:] = [self._merge(pa.concat_tables(held[-2:]))]
        return held

    def _merge(self, t: pa.Table, *, first: bool = False) -> pa.Table:
        """Group `t` by (window, keys), combining its partials (sums of sums, min of mins, ...) into the
        stored names; `first`: `t` holds raw ticks, not partials."""
        aggs = [((raw if first else name), fn) for name, raw, fn in self._aggs]
        out = t.group_by(self._group, use_threads=False).aggregate(aggs)
        names = {f"{src}_{fn}": name for (src, fn), (name, _, _) in zip(aggs, self._aggs, strict=True)}
        return out.rename_columns([names.get(c, c) for c in out.column_names])

    def _close(self, watermark: int) -> pa.Array:
        """The record: merge and emit the windows final at `watermark` (the others stay as they are)."""
        if self.watermark is not None and watermark < self.watermark:
            watermark = self.watermark  # Nu never sends one backwards; a forged one moves nothing back
        self.watermark = watermark
        final = sorted(w for w in self._by_window if self.spec.final_at(w) <= watermark)
        if not final:
            return pa.array([], pa.binary())
        tables = [t for w in final for t in self._by_window[w]]
        for w in final:
            self._hold(w, [])
        done = self._merge(pa.concat_tables(tables))
        done = done.sort_by([(name, "ascending") for name in self._group])
        self.results += done.num_rows
        return self._texts(done)

    def _texts(self, done: pa.Table) -> pa.Array:
        return result_texts(self.query, self.spec.size_ms, done)
