"""A planned SQL query (formats/sql.py) run by the Python operator over Arrow: each call decodes its
records once (formats/records.py, the table's declared format) and evaluates the plan's expressions over
whole columns (operators/arrow_eval.py).

- `SqlSelect`: a selection with projections; each kept input makes one output, a JSON object of the
  result columns, mapped to that input.
- `SqlWindow`: a window aggregation, the keyed window machinery of operators/window.py over the plan's
  keys and aggregate arguments; results are emitted at watermark records only, one JSON object per
  (window, keys) that passes HAVING, so N and N' emit the same results with the same numbers.

Results are JSON objects with the result columns' names, written column by column (`json_texts`):
integers and DECIMALs as numbers with their scale, DOUBLEs as numbers (NULL where not finite),
TIMESTAMPs as ISO-8601 text in UTC with milliseconds, BOOLEANs as true/false.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.seq import StreamRegistry
from ..core.tuples import TupleBatch
from ..formats.by_name import record_format
from ..formats.query import Aggregate, Query
from ..formats.sql import Plan
from .arrow_eval import evaluate
from .base import Operator, Outputs
from .top_n import top_mask
from .window import _WIN, WindowAggregate

_CONTROL_CHARS = r"[\x00-\x1f]"


def json_texts(names: list[str], arrays: list[pa.Array]) -> pa.Array:
    """One JSON object per row, `names[i]` holding `arrays[i]`'s value, built column by column."""
    n = len(arrays[0]) if arrays else 0
    if not names:
        return pa.array([b"{}"] * n, pa.binary())
    pieces: list = []
    for i, (name, arr) in enumerate(zip(names, arrays, strict=True)):
        pieces.append(("{" if i == 0 else ",") + json.dumps(name) + ":")
        pieces.append(pc.fill_null(_json_values(arr), "null"))
    pieces.append("}")
    return pc.binary_join_element_wise(*pieces, "").cast(pa.binary())


def _json_values(arr: pa.Array) -> pa.Array:
    t = arr.type
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.string())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        # A control character must be escaped as \uXXXX, which no kernel writes: such a column (rare) is
        # written value by value.
        if _may_hold_control(arr) and pc.any(pc.match_substring_regex(arr, _CONTROL_CHARS)).as_py():
            return pa.array([None if v is None else json.dumps(v) for v in arr.to_pylist()], pa.string())
        for ch, escaped in (("\\", "\\\\"), ('"', '\\"')):
            if pc.any(pc.match_substring(arr, ch)).as_py():
                arr = pc.replace_substring(arr, ch, escaped)
        return pc.binary_join_element_wise('"', arr, '"', "")
    if pa.types.is_timestamp(t):
        # Arrow's cast writes `YYYY-MM-DD HH:MM:SS.mmm` (the milliseconds always), far cheaper than strftime.
        text = pc.replace_substring(arr.cast(pa.timestamp("ms")).cast(pa.string()), " ", "T")
        return pc.binary_join_element_wise('"', text, 'Z"', "")
    if pa.types.is_boolean(t):
        return pc.if_else(arr, "true", "false")
    if pa.types.is_floating(t):
        return pc.if_else(pc.is_finite(arr), arr.cast(pa.string()), pa.scalar(None, pa.string()))
    return arr.cast(pa.string())


def _may_hold_control(arr: pa.Array) -> bool:
    """Whether a string column's bytes hold one below 0x20 (a control character): one pass over its data
    buffer, which may hold bytes outside the array's slice (a regular expression then decides)."""
    data = arr.buffers()[2]
    return data is not None and bool((np.frombuffer(data, np.uint8) < 0x20).any())


class _Decoding:
    """What both SQL operators share: the table's format, the columns the plan reads, and the count of
    records that do not decode (none that Nu admitted; counted alike on N and N')."""

    def _init_decoding(self, plan: Plan) -> None:
        self.plan = plan
        self.format = record_format(plan.schema)
        self.reads = sorted(plan.input_columns)
        self.unparseable = 0

    def _decode_columns(self, payloads: pa.Array) -> tuple[dict[str, pa.Array], np.ndarray | None]:
        """The columns the plan reads, and a mask of the records that decoded (None: all did)."""
        decoded = self.format.decode_columns(payloads, self.reads)
        ok = decoded.ok
        if ok is not None:
            self.unparseable += int(len(ok) - ok.sum())
        table = decoded.table
        return {name: table.column(name).combine_chunks() for name in self.reads}, ok


class SqlSelect(_Decoding, Operator):
    """A selection with projections: the outputs of the inputs WHERE keeps, in input order."""

    name = "python-sql"
    probeable = True

    def __init__(self, plan: Plan) -> None:
        if plan.stateful:
            raise ValueError(f"{plan.text!r} is a window query")
        self._init_decoding(plan)

    def probe_copy(self) -> SqlSelect:
        return SqlSelect(self.plan)

    def process(self, batch: TupleBatch) -> Outputs:
        data = np.flatnonzero(batch.streams != StreamRegistry.CONTROL)  # watermark records mean nothing here
        if not len(data):
            return Outputs.none()
        payloads = batch.payloads if len(data) == len(batch) else batch.payloads.take(pa.array(data))
        cols, ok = self._decode_columns(payloads)
        n = len(payloads)
        keep = np.ones(n, bool) if ok is None else ok.copy()
        if self.plan.where is not None:
            keep &= pc.fill_null(evaluate(self.plan.where, cols, n), False).to_numpy(zero_copy_only=False)
        idx = np.flatnonzero(keep)
        if not len(idx):
            return Outputs.none()
        if len(idx) < n:
            take = pa.array(idx)
            cols = {k: v.take(take) for k, v in cols.items()}
        values = [evaluate(o.expr, cols, len(idx)) for o in self.plan.outputs]
        return Outputs(data[idx], json_texts(self.plan.names, values))


def window_query(plan: Plan) -> Query:
    """The window machinery's own description of the plan: keys by name, each aggregate over its
    argument's column `_a<i>` (count(*) over none)."""
    aggs = []
    for i, a in enumerate(plan.aggregates):
        if a.fn == "count" and a.arg is None:
            aggs.append(Aggregate("count"))
        elif a.fn == "count":
            aggs.append(Aggregate("sum", f"_a{i}"))  # count(x): the rows where x is not null
        else:
            aggs.append(Aggregate(a.fn, f"_a{i}"))
            if a.fn == "avg":  # over the rows where the argument is not null
                aggs.append(Aggregate("sum", f"_c{i}"))
    spec = plan.spec
    assert spec is not None
    return Query("window", keys=tuple(k.name for k in plan.keys), size_ms=spec.size_ms, slide_ms=spec.slide_ms,
                 lateness_ms=spec.lateness_ms, aggregates=tuple(dict.fromkeys(aggs)))


class SqlWindow(_Decoding, WindowAggregate):
    """A window aggregation over the plan's keys and aggregate arguments, in exact types: integer and
    DECIMAL sums in DECIMAL(38, s), counts in int64; a DOUBLE's sum in float64 (which a standby's
    takeover may give in other last bits than the primary would have); avg as the sum over the count,
    in DOUBLE."""

    name = "python-sql-window"

    def __init__(self, plan: Plan) -> None:
        if not plan.stateful:
            raise ValueError(f"{plan.text!r} is not a window query")
        self._init_decoding(plan)
        super().__init__(window_query(plan))
        self._where = None
        self._types = {f"_a{i}": (pa.int64() if a.fn == "count" else
                                  _exact(a.arg_type.arrow if a.arg_type else pa.int64()))
                       for i, a in enumerate(plan.aggregates) if a.arg is not None}
        self._types.update({f"_c{i}": pa.decimal128(38, 0) for i, a in enumerate(plan.aggregates) if a.fn == "avg"})
        self._keys = {k.name: k.type.arrow for k in plan.keys}

    def probe_copy(self) -> SqlWindow:
        return SqlWindow(self.plan)

    def _exact_type(self, column: str) -> pa.DataType:
        return self._types[column]

    def _key_type(self, key: str) -> pa.DataType:
        return self._keys[key]

    def _selected(self, payloads: pa.Array) -> dict[str, pa.Array]:
        cols, ok = self._decode_columns(payloads)
        n = len(payloads)
        keep = np.ones(n, bool) if ok is None else ok.copy()
        ts = cols[self.plan.time]
        keep &= pc.is_valid(ts).to_numpy(zero_copy_only=False)  # no event time: in no window
        if self.plan.where is not None:
            keep &= pc.fill_null(evaluate(self.plan.where, cols, n), False).to_numpy(zero_copy_only=False)
        if not keep.all():
            take = pa.array(np.flatnonzero(keep))
            cols = {k: v.take(take) for k, v in cols.items()}
            n = int(keep.sum())
        out = {"ts": _millis(cols[self.plan.time])}
        for k in self.plan.keys:
            out[k.name] = evaluate(k.expr, cols, n)
        for i, a in enumerate(self.plan.aggregates):
            if a.arg is None:
                continue
            v = evaluate(a.arg, cols, n)
            out[f"_a{i}"] = pc.is_valid(v).cast(pa.int64()) if a.fn == "count" else v
            if a.fn == "avg":
                out[f"_c{i}"] = pc.is_valid(v).cast(pa.int64())
        return out

    def kept(self, done: pa.Table) -> pa.Table:
        """The rows of final windows (window start, keys, partials) that HAVING keeps and then QUALIFY
        ranks among the top. `done` holds every group of each window it holds (windows close whole)."""
        if self.plan.having is not None and done.num_rows:
            keep = pc.fill_null(evaluate(self.plan.having, self._finals(done), done.num_rows), False)
            done = done if pc.all(keep).as_py() else done.filter(keep)
        top = self.plan.top
        if top is None or not done.num_rows:
            return done
        partition = [done[_WIN].combine_chunks(), *(done[k].combine_chunks() for k in top.partition)]
        keep = top_mask(top, self._finals(done), partition, done.num_rows)
        return done if pc.all(keep).as_py() else done.filter(keep)

    def texts(self, done: pa.Table) -> pa.Array:
        """One result per row of `done` (kept already): the plan's outputs over the window's start and
        end, the keys and the aggregates."""
        if not done.num_rows:
            return pa.array([], pa.binary())
        cols = self._finals(done)
        return json_texts(self.plan.names, [evaluate(o.expr, cols, done.num_rows) for o in self.plan.outputs])

    def _texts(self, done: pa.Table) -> pa.Array:
        return self.texts(self.kept(done))

    def _finals(self, done: pa.Table) -> dict[str, pa.Array]:
        starts = done[_WIN].combine_chunks()
        size = self.spec.size_ms
        cols = {"window_start": starts.cast(pa.timestamp("ms")),
                "window_end": pc.add(starts, size).cast(pa.timestamp("ms"))}
        for k in self.plan.keys:
            cols[k.name] = done[k.name].combine_chunks()
        count = done["_n"].combine_chunks()
        for i, a in enumerate(self.plan.aggregates):
            col = f"_a{i}"
            if a.fn == "count":
                cols[f"_agg{i}"] = count if a.arg is None else done[f"{col}__sum"].combine_chunks().cast(pa.int64())
            elif a.fn == "avg":
                total = done[f"{col}__sum"].combine_chunks().cast(pa.float64())
                valid = done[f"_c{i}__sum"].combine_chunks().cast(pa.float64())
                valid = pc.if_else(pc.equal(valid, 0), pa.scalar(None, pa.float64()), valid)
                cols[f"_agg{i}"] = pc.divide(total, valid)
            else:
                cols[f"_agg{i}"] = done[f"{col}__{a.fn}"].combine_chunks().cast(a.type.arrow)
        return cols


def _exact(t: pa.DataType) -> pa.DataType:
    """The type a column's partial sums are kept in: integers in DECIMAL(38, 0), a DECIMAL at its scale in
    38 digits, a DOUBLE as it is, others (min and max of text, times) as they are."""
    if pa.types.is_integer(t):
        return pa.decimal128(38, 0)
    if pa.types.is_decimal(t):
        return pa.decimal128(38, t.scale)
    return t


def _millis(ts: pa.Array) -> pa.Array:
    """Event times as int64 ms (a TIMESTAMP(3) column, or a BIGINT of ms)."""
    return ts.cast(pa.int64()) if not pa.types.is_timestamp(ts.type) else ts.cast(pa.timestamp("ms")).cast(pa.int64())
