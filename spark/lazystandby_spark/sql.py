"""A planned SQL query (lazystandby.formats.sql) as Spark SQL over the feed's `payload` column.

- Records are parsed by Spark's own readers, `from_json` and `from_csv`, with every column read as text
  and then cast by the column's type, so that a value reads as the Python operator's decoder reads it: a
  TIMESTAMP(3) from ms since 1970 or ISO-8601 text (the session runs in UTC), a DECIMAL from its digits
  exactly. Only records Nu admitted reach the query. An Avro table's records arrive as JSON text: the node
  decodes them with fastavro (operators/spark_sql.SparkText), so the session needs no spark-avro.
- Expressions are the plan's normalised trees written in Spark's dialect by sqlglot, with `/` and MOD as
  try_divide and try_mod (NULL for a zero divisor, as the Python operator gives, where ANSI mode would
  fail the query).
"""

from __future__ import annotations

from sqlglot import exp

from lazystandby.formats.schema import Schema
from lazystandby.formats.sql import Dialect, Plan


def sql(e: exp.Expression) -> str:
    """An expression of the plan as Spark SQL."""

    def fix(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Div):
            return exp.Anonymous(this="try_divide", expressions=[node.this, node.expression])
        if isinstance(node, exp.Mod):
            return exp.Anonymous(this="try_mod", expressions=[node.this, node.expression])
        return node

    return e.copy().transform(fix, copy=False).sql(dialect=Dialect)


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def record(schema: Schema, text: str = "payload") -> str:
    """A Spark SQL expression that parses the record in string column `text` into a struct of its
    columns, every one as text (`columns` casts them)."""
    ddl = ", ".join(f"{_q(c.name)} STRING" for c in schema.columns)
    if schema.format in ("json", "avro"):  # Avro: JSON text by then (see the module's docstring)
        return f"from_json({text}, '{ddl}')"
    if schema.format == "csv":
        return f"from_csv({text}, '{ddl}', map('escape', '\"'))"
    raise ValueError(f"table {schema.table}: {schema.format} records are not read by the Spark operator")


def columns(schema: Schema, names: set[str] | list[str], struct: str = "_r") -> list[str]:
    """Spark SQL expressions that read the columns `names` out of a `record` struct, each named as its
    column and in its type."""
    out = []
    for c in schema.columns:
        if c.name not in set(names):
            continue
        raw = f"{struct}.{_q(c.name)}"
        kind = c.type.kind
        if kind == "TIMESTAMP":
            value = (f"CASE WHEN {raw} RLIKE '^-?[0-9]+$' THEN timestamp_millis(CAST({raw} AS BIGINT)) "
                     f"ELSE timestamp_millis(unix_millis(CAST({raw} AS TIMESTAMP))) END")
        elif kind == "VARCHAR":
            value = raw
        else:
            value = f"CAST({raw} AS {c.type.sql()})"
        out.append(f"{value} AS {_q(c.name)}")
    return out


def event_ms(plan: Plan) -> str:
    """The event time of a record, in ms."""
    col = _q(plan.time)
    return f"unix_millis({col})" if plan.schema.column(plan.time).type.kind == "TIMESTAMP" else col


def exact(a_type) -> str:
    """The Spark type an aggregate's argument is kept in (as operators/sql._exact keeps it)."""
    if a_type.kind in ("BIGINT", "INT"):
        return "DECIMAL(38,0)"
    if a_type.kind == "DECIMAL":
        return f"DECIMAL(38,{a_type.scale})"
    return a_type.sql()
