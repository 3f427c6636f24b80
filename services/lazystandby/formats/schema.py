"""A source table's schema as a value: its columns and their SQL types, its event-time column and
watermark delay, and where its records come from (topic, format), read from the `CREATE TABLE`
statement Flink SQL, RisingWave and Arroyo users already write:

    CREATE TABLE bid (auction BIGINT, price BIGINT NOT NULL, date_time TIMESTAMP(3),
                      WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
    WITH ('topic' = 'bid', 'format' = 'json')

sqlglot parses the statement (RisingWave's dialect reads the WATERMARK clause and the WITH options);
this module turns the tree into a `Schema` and holds the one rule per type for what a value may be
(`coerce`): every format's decoder (formats/records.py) admits exactly what it accepts, so Nu's
admission, both operators and the checker read a record the same way. Nothing here names a field.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from dataclasses import dataclass, field

import pyarrow as pa

from ..core.errors import MalformedRecord, SchemaError

INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)
# TIMESTAMP(3) holds years 1 to 9999 (as Spark's and DuckDB's do), in ms since 1970, UTC.
TS_MIN_MS = -62_135_596_800_000
TS_MAX_MS = 253_402_300_799_999
FORMATS = ("json", "csv", "avro")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True)
class SqlType:
    """A column's SQL type: kind is BIGINT, INT, DOUBLE, DECIMAL, VARCHAR, BOOLEAN or TIMESTAMP;
    DECIMAL has a precision (1-38) and a scale; VARCHAR may have a length bound (0: none)."""

    kind: str
    precision: int = 0
    scale: int = 0
    length: int = 0

    @property
    def arrow(self) -> pa.DataType:
        return {
            "BIGINT": pa.int64(), "INT": pa.int32(), "DOUBLE": pa.float64(), "VARCHAR": pa.string(),
            "BOOLEAN": pa.bool_(), "TIMESTAMP": pa.timestamp("ms"),
        }.get(self.kind) or pa.decimal128(self.precision, self.scale)

    @property
    def numeric(self) -> bool:
        return self.kind in ("BIGINT", "INT", "DOUBLE", "DECIMAL")

    def sql(self) -> str:
        """The type as Spark SQL (and DuckDB) write it."""
        if self.kind == "DECIMAL":
            return f"DECIMAL({self.precision},{self.scale})"
        if self.kind == "VARCHAR":
            return "STRING"
        return "TIMESTAMP" if self.kind == "TIMESTAMP" else self.kind

    def text(self) -> str:
        if self.kind == "DECIMAL":
            return f"DECIMAL({self.precision}, {self.scale})"
        if self.kind == "VARCHAR" and self.length:
            return f"VARCHAR({self.length})"
        return "TIMESTAMP(3)" if self.kind == "TIMESTAMP" else self.kind


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: SqlType
    nullable: bool = True


@dataclass(frozen=True)
class Schema:
    """A table: `columns` in declaration order (a CSV record's field order, an Avro record's), the
    `event_time` column a window groups by (empty: none) with Nu's watermark `watermark_delay_ms`
    behind the largest event time seen, and the WITH options (`topic`, `format`, ...)."""

    table: str
    columns: tuple[Column, ...]
    event_time: str = ""
    watermark_delay_ms: int = 0
    options: tuple[tuple[str, str], ...] = ()
    _by_name: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({c.name: c for c in self.columns})

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"table {self.table} has no column {name!r} ({', '.join(self.names)})") from None

    def has(self, name: str) -> bool:
        return name in self._by_name

    def option(self, key: str, default: str = "") -> str:
        return dict(self.options).get(key, default)

    @property
    def topic(self) -> str:
        return self.option("topic", self.table)

    @property
    def format(self) -> str:
        return self.option("format", "json")

    @property
    def arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type.arrow, c.nullable) for c in self.columns])

    def ddl(self) -> str:
        """The statement this schema was read from, normalised (`parse_table` reads it back equal)."""
        cols = [f"{c.name} {c.type.text()}{'' if c.nullable else ' NOT NULL'}" for c in self.columns]
        if self.event_time:
            cols.append(f"WATERMARK FOR {self.event_time} AS {self.event_time} - INTERVAL "
                        f"'{self.watermark_delay_ms}' MILLISECOND")
        opts = ", ".join(f"'{k}' = '{v}'" for k, v in self.options)
        return f"CREATE TABLE {self.table} ({', '.join(cols)})" + (f" WITH ({opts})" if opts else "")


# --- values --------------------------------------------------------------------------------------------
def coerce(col: Column, value: object) -> object:
    """The value `value` (as a JSON, CSV or Avro reader gives it: None, bool, int, float, str, Decimal)
    takes in column `col`, as Arrow holds it (a TIMESTAMP as ms since 1970); MalformedRecord says why
    it cannot. The one rule per type that every decoder follows:

    - BIGINT, INT: an integer (not a float, a bool or text) inside the type's range;
    - DOUBLE: a finite number (an integer too), not text, NaN or an infinity;
    - DECIMAL(p, s): a number or numeric text with at most s decimals and p - s integer digits;
    - VARCHAR: text (within its length, if declared); BOOLEAN: true or false;
    - TIMESTAMP(3): ms since 1970 (an integer) or ISO-8601 text (UTC unless it names a zone; below a
      millisecond truncated), in years 1-9999;
    - null (or absent) only where the column is nullable.
    """
    if value is None:
        if not col.nullable:
            raise MalformedRecord(f"column {col.name} is NOT NULL and the record has no value for it")
        return None
    kind = col.type.kind
    if kind in ("BIGINT", "INT"):
        if type(value) is not int:
            raise MalformedRecord(f"column {col.name} ({kind}) takes an integer, got {_shown(value)}")
        lo, hi = INT64 if kind == "BIGINT" else INT32
        if not lo <= value <= hi:
            raise MalformedRecord(f"column {col.name} ({kind}) holds {lo} to {hi}, got {value}")
        return value
    if kind == "DOUBLE":
        if type(value) not in (int, float, decimal.Decimal):
            raise MalformedRecord(f"column {col.name} (DOUBLE) takes a number, got {_shown(value)}")
        try:
            f = float(value)
            if math.isinf(f) and isinstance(value, decimal.Decimal) and value.is_finite():
                raise OverflowError
        except OverflowError:
            raise MalformedRecord(f"column {col.name} (DOUBLE): {value} is beyond a double's range") from None
        if not math.isfinite(f):
            raise MalformedRecord(f"column {col.name} (DOUBLE) takes a finite number, got {value}")
        return f
    if kind == "DECIMAL":
        return _decimal(col, value)
    if kind == "VARCHAR":
        if type(value) is not str:
            raise MalformedRecord(f"column {col.name} (VARCHAR) takes text, got {_shown(value)}")
        if col.type.length and len(value) > col.type.length:
            raise MalformedRecord(f"column {col.name} (VARCHAR({col.type.length})) holds at most "
                                  f"{col.type.length} characters, got {len(value)}")
        return value
    if kind == "BOOLEAN":
        if type(value) is not bool:
            raise MalformedRecord(f"column {col.name} (BOOLEAN) takes true or false, got {_shown(value)}")
        return value
    return timestamp_ms(col, value)


def _shown(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"


def _decimal(col: Column, value: object) -> decimal.Decimal:
    p, s = col.type.precision, col.type.scale
    if type(value) is bool or type(value) not in (int, float, str, decimal.Decimal):
        raise MalformedRecord(f"column {col.name} (DECIMAL({p}, {s})) takes a number, got {_shown(value)}")
    try:
        d = decimal.Decimal(value if not isinstance(value, float) else repr(value))
    except decimal.InvalidOperation:
        raise MalformedRecord(f"column {col.name} (DECIMAL({p}, {s})) takes a number, got {_shown(value)}") from None
    if not d.is_finite():
        raise MalformedRecord(f"column {col.name} (DECIMAL({p}, {s})) takes a finite number, got {value}")
    exponent = d.normalize().as_tuple().exponent if d else 0
    if isinstance(exponent, int) and -exponent > s:
        raise MalformedRecord(f"column {col.name} (DECIMAL({p}, {s})) takes at most {s} decimals, got {value}")
    if abs(d) >= decimal.Decimal(10) ** (p - s):
        raise MalformedRecord(f"column {col.name} (DECIMAL({p}, {s})) holds fewer than {p - s} integer digits, "
                              f"got {value}")
    return d.quantize(decimal.Decimal(1).scaleb(-s))


def timestamp_ms(col: Column, value: object) -> int:
    """A TIMESTAMP(3) value as ms since 1970 (`coerce`'s rule)."""
    if type(value) is int:
        ms = value
    elif type(value) is str:
        try:
            t = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise MalformedRecord(f"column {col.name} (TIMESTAMP(3)) takes ms since 1970 or ISO-8601 text, "
                                  f"got {_shown(value)}") from None
        if t.tzinfo is None:
            t = t.replace(tzinfo=dt.UTC)
        delta = t - _EPOCH
        ms = (delta.days * 86_400_000 + delta.seconds * 1000) + delta.microseconds // 1000
    else:
        raise MalformedRecord(f"column {col.name} (TIMESTAMP(3)) takes ms since 1970 or ISO-8601 text, "
                              f"got {_shown(value)}")
    if not TS_MIN_MS <= ms <= TS_MAX_MS:
        raise MalformedRecord(f"column {col.name} (TIMESTAMP(3)): {value} is outside years 1-9999")
    return ms


# --- declarations -------------------------------------------------------------------------------------
_KINDS = {
    "BIGINT": "BIGINT", "INT": "INT", "INTEGER": "INT", "DOUBLE": "DOUBLE", "DECIMAL": "DECIMAL",
    "VARCHAR": "VARCHAR", "TEXT": "VARCHAR", "BOOLEAN": "BOOLEAN", "TIMESTAMP": "TIMESTAMP",
}
SUPPORTED_TYPES = "BIGINT, INT, DOUBLE, DECIMAL(p, s), VARCHAR, BOOLEAN, TIMESTAMP(3)"


def parse_table(text_or_tree) -> Schema:
    """The Schema a `CREATE TABLE` statement declares (text, or a tree sqlglot parsed); SchemaError
    names what is wrong."""
    import sqlglot
    from sqlglot import exp

    tree = text_or_tree
    if isinstance(tree, str):
        try:
            tree = sqlglot.parse_one(tree, read="risingwave")
        except sqlglot.errors.ParseError as e:
            raise SchemaError(f"CREATE TABLE does not parse: {_first_line(e)}") from None
    if not isinstance(tree, exp.Create) or (tree.args.get("kind") or "").upper() != "TABLE" \
            or not isinstance(tree.this, exp.Schema):
        raise SchemaError(f"expected CREATE TABLE name (columns...) WITH (...), got {tree.sql()[:80]!r}")
    table = tree.this.this.name
    columns, event_time, delay = [], "", 0
    for item in tree.this.expressions:
        if isinstance(item, exp.ColumnDef):
            columns.append(_column(table, item))
        elif isinstance(item, exp.WatermarkColumnConstraint):
            event_time, delay = _watermark(table, item)
        else:
            raise SchemaError(f"table {table}: {item.sql()!r} is not supported (columns and one WATERMARK FOR "
                              f"column AS column - INTERVAL '<n>' <unit>)")
    if not columns:
        raise SchemaError(f"table {table} declares no column")
    names = [c.name for c in columns]
    if len(set(names)) != len(names):
        raise SchemaError(f"table {table} declares a column twice ({', '.join(names)})")
    if event_time:
        kind = next(c.type.kind for c in columns if c.name == event_time) if event_time in names else None
        if kind is None:
            raise SchemaError(f"table {table}: WATERMARK FOR {event_time}: no such column ({', '.join(names)})")
        if kind not in ("TIMESTAMP", "BIGINT"):
            raise SchemaError(f"table {table}: WATERMARK FOR {event_time}: the event time is a TIMESTAMP(3) or "
                              f"a BIGINT of ms, not {kind}")
    options = _options(table, tree)
    fmt = dict(options).get("format", "json")
    if fmt not in FORMATS:
        raise SchemaError(f"table {table}: format {fmt!r} is not one of {', '.join(FORMATS)}")
    return Schema(table, tuple(columns), event_time, delay, tuple(options))


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def _column(table: str, item) -> Column:
    from sqlglot import exp

    name = item.this.name
    dtype = item.args.get("kind")
    if dtype is None:
        raise SchemaError(f"table {table}: column {name} has no type ({SUPPORTED_TYPES})")
    kind = _KINDS.get(dtype.this.name)
    params = [int(p.this.this) for p in dtype.expressions if isinstance(p.this, exp.Literal)] \
        if dtype.expressions else []
    if kind is None:
        raise SchemaError(f"table {table}: column {name} has type {dtype.sql()}, not one of {SUPPORTED_TYPES}")
    typ = SqlType(kind)
    if kind == "DECIMAL":
        p, s = (params + [10, 0])[:2] if params else (10, 0)
        if len(params) == 1:
            s = 0
        if not 1 <= p <= 38 or not 0 <= s <= p:
            raise SchemaError(f"table {table}: column {name} DECIMAL({p}, {s}): precision 1-38, scale 0 to it")
        typ = SqlType("DECIMAL", p, s)
    elif kind == "TIMESTAMP" and params and params[0] != 3:
        raise SchemaError(f"table {table}: column {name} TIMESTAMP({params[0]}): only TIMESTAMP(3) (ms)")
    elif kind == "VARCHAR" and params:
        typ = SqlType("VARCHAR", length=params[0])
    elif params and kind not in ("TIMESTAMP",):
        raise SchemaError(f"table {table}: column {name} {dtype.sql()}: {kind} takes no parameters")
    nullable = True
    for c in item.args.get("constraints") or []:
        if isinstance(c.args.get("kind"), exp.NotNullColumnConstraint):
            nullable = bool(c.args["kind"].args.get("allow_null"))
        else:
            raise SchemaError(f"table {table}: column {name}: constraint {c.sql()!r} is not supported (NOT NULL)")
    return Column(name, typ, nullable)


_UNIT_MS = {"MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000}


def _watermark(table: str, item) -> tuple[str, int]:
    from sqlglot import exp

    col = item.this.name
    expr = item.expression
    if isinstance(expr, exp.Column) and expr.name == col:
        return col, 0
    if isinstance(expr, exp.Sub) and isinstance(expr.this, exp.Column) and expr.this.name == col \
            and isinstance(expr.expression, exp.Interval):
        delay = interval_ms(expr.expression)
        if delay is not None and delay >= 0:
            return col, delay
    raise SchemaError(f"table {table}: WATERMARK FOR {col} AS {expr.sql()}: expected {col} or {col} - "
                      f"INTERVAL '<n>' MILLISECOND|SECOND|MINUTE|HOUR")


def interval_ms(iv) -> int | None:
    """An INTERVAL literal's length in ms (`'4' SECOND`, `'10 seconds'`), None when it is not one."""
    unit = iv.args.get("unit")
    text = iv.this.name if iv.this is not None else ""
    if unit is None:
        return duration_ms(text)
    try:
        n = decimal.Decimal(text)
    except decimal.InvalidOperation:
        return None
    mult = _UNIT_MS.get(unit.name.upper().rstrip("S"))
    if mult is None or n != n.to_integral_value() and (n * mult) != (n * mult).to_integral_value():
        return None
    return int(n * mult)


_WORD_MS = {"millisecond": 1, "ms": 1, "second": 1000, "sec": 1000, "s": 1000, "minute": 60_000, "min": 60_000,
            "m": 60_000, "hour": 3_600_000, "h": 3_600_000}


def duration_ms(text: str) -> int | None:
    """A Spark duration text (`'10 seconds'`, `'2 minutes'`, `'500 milliseconds'`) in ms; None if not one."""
    parts = text.strip().lower().split()
    if len(parts) != 2 or not parts[0].isdigit():
        return None
    mult = _WORD_MS.get(parts[1].removesuffix("s") or "s") or _WORD_MS.get(parts[1])
    return int(parts[0]) * mult if mult else None


def _options(table: str, tree) -> list[tuple[str, str]]:
    from sqlglot import exp

    props = tree.args.get("properties")
    out = []
    for p in props.expressions if props is not None else []:
        if not isinstance(p, exp.Property) or not isinstance(p.args.get("value"), exp.Literal):
            raise SchemaError(f"table {table}: option {p.sql()!r} is not 'key' = 'value'")
        key = p.this.name if isinstance(p.this, exp.Expression) else str(p.this)
        out.append((key.lower(), p.args["value"].name))
    return out
