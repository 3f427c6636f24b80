"""The truth of a planned query, from an engine this project does not contain: DuckDB runs the plan's
SQL over every source record, windows by the engine's rules (aligned on the epoch, a slide dividing the
size, every window final at the end), so a check compares the engine's output with a result it did not
compute.

The plan's normalised expressions (formats/sql.py) are written in DuckDB's dialect by sqlglot; the
records are decoded by the table's format (formats/records.py), which only decides what a record holds.
Results are compared as values (`values_of`): numbers as exact decimals, DOUBLEs within a relative 1e-9
(a sum of doubles depends on its order), times and text as they are.
"""

from __future__ import annotations

import decimal
import json
import math

import pyarrow as pa

from ..formats.by_name import record_format
from ..formats.sql import Plan
from ..operators.sql import json_texts


def truth(plan: Plan, payloads: list[bytes]) -> list[bytes]:
    """The results of `plan` over `payloads` (the admitted source records, in link order): for a
    selection, in input order; for a window aggregation, by window start and then by keys, every window
    that holds a record (as if a last watermark made every window final)."""
    if plan.stateful:
        return _run(plan, _table(plan, payloads), _windows_sql(plan))
    return [r for r in selection_truth(plan, payloads) if r is not None]


def selection_truth(plan: Plan, payloads: list[bytes]) -> list[bytes | None]:
    """A selection's result for each input of `payloads`, None where WHERE drops it (or the record does
    not decode)."""
    table = _table(plan, payloads)
    rows = _run(plan, table, _selection_sql(plan), extra=["_pos"])
    out: list[bytes | None] = [None] * len(payloads)
    for pos, text in rows:
        out[pos] = text
    return out


def window_truth(plan: Plan, payloads: list[bytes], *, every: int, streams: list[str] | None = None,
                 known: tuple[str, ...] = (), idle: int = 0, first: int = 1) -> tuple[list[bytes], list[int]]:
    """The window results Nd must hold, in emission order, and the indices of the late records: records
    in admission order (`payloads` on `streams`, None for one stream) from link position `first`, placed
    by harness/placement.py's rule; a record counts in none of its windows final at the watermark in force
    at it. DuckDB then aggregates; each window is emitted at the first record that makes it final (by
    window start and keys there), none that no record made final."""
    from ..formats.admit import TableRules
    from .placement import place

    spec = plan.spec
    assert spec is not None
    table_name = plan.schema.table
    names = streams if streams is not None else [table_name] * len(payloads)
    ts = TableRules({table_name: plan.schema}).event_times(pa.array(payloads, pa.binary()), names).tolist()
    placed = place(ts, size=spec.size_ms, slide=spec.slide_ms, lateness=spec.lateness_ms, every=every,
                   streams=streams, known=known, idle=idle, first=first)
    kept, in_force, marks, late = placed.kept, placed.in_force, placed.marks, placed.late
    table = _table(plan, [payloads[i] for i in kept])
    table = table.append_column("_wm", pa.array(in_force, pa.int64()))
    results = _run(plan, table, _windows_sql(plan, marks=True), marks=marks)
    return results, late


def _table(plan: Plan, payloads: list[bytes]) -> pa.Table:
    decoded = record_format(plan.schema).decode(pa.array(payloads, pa.binary()))
    table = decoded.table.append_column("_pos", pa.array(range(decoded.table.num_rows), pa.int64()))
    ok = decoded.ok
    return table.filter(pa.array(ok)) if ok is not None else table


def _run(plan: Plan, table: pa.Table, sql: str, *, extra: list[str] = (), marks: list[int] | None = None):
    import duckdb

    con = duckdb.connect()
    try:
        con.register("src", table)
        if marks is not None:
            con.register("marks", pa.table({"idx": pa.array(range(len(marks)), pa.int64()),
                                            "wm": pa.array(marks, pa.int64())}))
        result = con.sql(sql).to_arrow_table()
    finally:
        con.close()
    if not result.num_rows:
        return []
    texts = json_texts(plan.names, [result.column(i).combine_chunks() for i in range(len(plan.names))]).to_pylist()
    if not extra:
        return texts
    return list(zip(result.column(extra[0]).to_pylist(), texts, strict=True))


def _d(e) -> str:
    return e.sql(dialect="duckdb")


def _selection_sql(plan: Plan) -> str:
    where = f" WHERE {_d(plan.where)}" if plan.where is not None else ""
    cols = ", ".join(f"{_d(o.expr)} AS {_q(o.name)}" for o in plan.outputs)
    return f"SELECT {cols}, _pos FROM src{where} ORDER BY _pos"


def _windows_sql(plan: Plan, *, marks: bool = False) -> str:
    """Every (window, keys) group; with `marks`, only the windows a watermark record made final, each
    counting only the records not past it (`_wm`, the watermark in force at a record), in emission order."""
    spec = plan.spec
    assert spec is not None
    ts = _q(plan.time)
    if plan.schema.column(plan.time).type.kind == "TIMESTAMP":
        ts = f"epoch_ms(CAST({ts} AS TIMESTAMP))"
    per = spec.size_ms // spec.slide_ms
    slide, final = spec.slide_ms, spec.size_ms + spec.lateness_ms
    conds = [f"{_q(plan.time)} IS NOT NULL"]
    if plan.where is not None:
        conds.append(f"({_d(plan.where)})")
    start = f"({ts} - ((({ts}) % {slide}) + {slide}) % {slide}) - k * {slide}"
    exploded = f"SELECT *, {start} AS _ws FROM src, range({per}) AS r(k) WHERE {' AND '.join(conds)}"
    if marks:
        exploded = f"SELECT * FROM ({exploded}) WHERE _wm IS NULL OR _ws + {final} > _wm"
    keys = [_d(k.expr) for k in plan.keys]
    aggs = []
    for i, a in enumerate(plan.aggregates):
        arg = _d(a.arg) if a.arg is not None else "*"
        if a.fn == "avg":
            aggs.append(f"CAST(sum({arg}) AS DOUBLE) / count({arg}) AS _agg{i}")
        elif a.fn == "sum" and a.type.kind == "BIGINT":
            aggs.append(f"CAST(sum({arg}) AS BIGINT) AS _agg{i}")
        else:
            aggs.append(f"{a.fn}({arg}) AS _agg{i}")
    inner = (f"SELECT _ws, make_timestamp_ms(_ws) AS window_start, "
             f"make_timestamp_ms(_ws + {spec.size_ms}) AS window_end"
             + "".join(f", {k} AS {_q(kk.name)}" for k, kk in zip(keys, plan.keys, strict=True))
             + "".join(f", {a}" for a in aggs)
             + f" FROM ({exploded}) GROUP BY _ws" + "".join(f", {k}" for k in keys))
    conds = [f"({_d(plan.having)})"] if plan.having is not None else []
    close = ""
    if marks:
        close = f", (SELECT min(idx) FROM marks WHERE wm >= _ws + {final}) AS _close"
        inner = f"SELECT *{close} FROM ({inner})"
        conds.append("_close IS NOT NULL")
    where = f" WHERE {' AND '.join(conds)}" if conds else ""
    cols = ", ".join(f"{_d(o.expr)} AS {_q(o.name)}" for o in plan.outputs)
    order = ", ".join([*(["_close"] if marks else []), "_ws", *(_q(k.name) for k in plan.keys)])
    return f"SELECT {cols} FROM ({inner}){where}{_qualify(plan)} ORDER BY {order}"


def _qualify(plan: Plan) -> str:
    """The plan's QUALIFY in DuckDB's words, over the grouped names (`_ws` the window)."""
    top = plan.top
    if top is None:
        return ""
    parts = ", ".join(["_ws", *(_q(k) for k in top.partition)])
    terms = ", ".join(f"{_d(o.expr)} {'DESC' if o.desc else 'ASC'} NULLS {'FIRST' if o.nulls_first else 'LAST'}"
                      for o in top.order)
    return f" QUALIFY {top.fn}() OVER (PARTITION BY {parts} ORDER BY {terms}) <= {top.limit}"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def values_of(record: bytes) -> dict:
    """A result record's values, for comparing: numbers as exact decimals."""
    return json.loads(record, parse_float=decimal.Decimal, parse_int=decimal.Decimal)


def same_values(a: dict, b: dict) -> bool:
    """Whether two results hold the same values (DOUBLEs within a relative 1e-9)."""
    if a.keys() != b.keys():
        return False
    for k, x in a.items():
        y = b[k]
        if isinstance(x, decimal.Decimal) and isinstance(y, decimal.Decimal):
            if x != y and not math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-12):
                return False
        elif x != y:
            return False
    return True
