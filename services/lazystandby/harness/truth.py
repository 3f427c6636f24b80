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
    that holds a record."""
    import duckdb

    decoded = record_format(plan.schema).decode(pa.array(payloads, pa.binary()))
    table = decoded.table
    ok = decoded.ok
    if ok is not None:
        table = table.filter(pa.array(ok))
    table = table.append_column("_pos", pa.array(range(table.num_rows), pa.int64()))
    con = duckdb.connect()
    try:
        con.register("src", table)
        result = con.sql(_sql(plan)).to_arrow_table()
    finally:
        con.close()
    if not result.num_rows:
        return []
    return json_texts(plan.names, [result.column(i).combine_chunks() for i in range(len(plan.names))]).to_pylist()


def _d(e) -> str:
    return e.sql(dialect="duckdb")


def _sql(plan: Plan) -> str:
    where = f" WHERE {_d(plan.where)}" if plan.where is not None else ""
    if not plan.stateful:
        cols = ", ".join(f"{_d(o.expr)} AS {_q(o.name)}" for o in plan.outputs)
        return f"SELECT {cols} FROM src{where} ORDER BY _pos"
    spec = plan.spec
    assert spec is not None
    ts = _q(plan.time)
    if plan.schema.column(plan.time).type.kind == "TIMESTAMP":
        ts = f"epoch_ms(CAST({ts} AS TIMESTAMP))"
    per = spec.size_ms // spec.slide_ms
    slide = spec.slide_ms
    # Every window a record lies in: its latest window's start, less k slides (floor for times before 1970).
    exploded = (f"SELECT *, ({ts} - ((({ts}) % {slide}) + {slide}) % {slide}) - k * {slide} AS _ws "
                f"FROM src, range({per}) AS r(k){where} AND {_q(plan.time)} IS NOT NULL" if where else
                f"SELECT *, ({ts} - ((({ts}) % {slide}) + {slide}) % {slide}) - k * {slide} AS _ws "
                f"FROM src, range({per}) AS r(k) WHERE {_q(plan.time)} IS NOT NULL")
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
    inner = (f"SELECT make_timestamp_ms(_ws) AS window_start, make_timestamp_ms(_ws + {spec.size_ms}) AS window_end"
             + "".join(f", {k} AS {_q(kk.name)}" for k, kk in zip(keys, plan.keys, strict=True))
             + "".join(f", {a}" for a in aggs)
             + f" FROM ({exploded}) GROUP BY _ws" + "".join(f", {k}" for k in keys))
    having = f" WHERE {_d(plan.having)}" if plan.having is not None else ""
    cols = ", ".join(f"{_d(o.expr)} AS {_q(o.name)}" for o in plan.outputs)
    order = ", ".join(["window_start", *(_q(k.name) for k in plan.keys)])
    return f"SELECT {cols} FROM ({inner}){having} ORDER BY {order}"


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
