"""The source record format: a tick as UTF-8 text `symbol,price,volume,ts_ms,venue` (30-60 bytes).

Kept as text rather than JSON because every hop splits thousands of them per frame. The format is strict
(SCHEMA, PATTERN): numbers are plain decimals (no exponent, no spaces, no `nan`) within what their type
holds, so that Nu's validation, the Python operator (Arrow compute), the Spark operator (Spark SQL) and
the checker all read a tick the same way, and a tick Nu admits never fails a cast downstream.
`valid_mask` is what Nu applies to records from outside (Kafka) a poll at a time; `validate` says, for the
few that fail, what is wrong, and they go to the dead-letter stream.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.errors import MalformedRecord


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a tick: its name, its Python type, and the text a record may hold for it.

    `text` is a regular expression (RE2 and Python `re` alike) admitting exactly the values the field's type
    holds without loss on every reader: Arrow's and Spark's int64 and float64, and a timestamp in
    milliseconds that Arrow's and Spark's timestamps hold. `holds` says that in words, for the refusal."""

    name: str
    type: type
    text: str
    holds: str


# The schema every reader takes its rules from: Nu's admission (valid_mask, validate), the Python operator
# (parse_columns), the Spark operator and the direct Spark query (spark_columns), and the checker's truth
# table (validate). A value outside what its type holds is refused at Nu with the reason, never admitted to
# fail a cast on N and then on N'.
SCHEMA: tuple[Field, ...] = (
    # Text fields: no comma (the separator) and no control character (a newline, a NUL).
    Field("symbol", str, r"[^,\x00-\x1f\x7f]{1,32}", "1 to 32 characters, none a comma or a control character"),
    # 9 + 6 digits: 15 significant digits, which a float64 gives back exactly as written.
    Field("price", float, r"-?[0-9]{1,9}(?:\.[0-9]{1,6})?",
          "a decimal of at most 9 digits before the point and 6 after, with an optional '-'"),
    # 18 digits: every such integer is inside int64's range (|x| < 2^63, about 9.22e18).
    Field("volume", int, r"-?[0-9]{1,18}", "an integer of at most 18 digits (inside int64), with an optional '-'"),
    # 15 digits of milliseconds: before the year 33658, inside Arrow's and Spark's timestamp range.
    Field("ts", int, r"[0-9]{1,15}", "milliseconds since 1970: at most 15 digits, not negative"),
    Field("venue", str, r"[^,\x00-\x1f\x7f]{1,32}", "1 to 32 characters, none a comma or a control character"),
)
FIELDS: tuple[tuple[str, type], ...] = tuple((f.name, f.type) for f in SCHEMA)
FIELD_INDEX = {name: i for i, (name, _) in enumerate(FIELDS)}
FIELD_TYPE = dict(FIELDS)


def table(lateness_ms: int = 0):
    """The ticks as a SQL table (formats/schema.Schema), for reading a tick query: its event time `ts`,
    with `lateness_ms` as its WATERMARK delay (a window is final that long after its end)."""
    from .schema import parse_table

    return parse_table(f"""CREATE TABLE ticks (symbol VARCHAR NOT NULL, price DECIMAL(15, 6) NOT NULL,
        volume BIGINT NOT NULL, ts TIMESTAMP(3) NOT NULL, venue VARCHAR NOT NULL,
        WATERMARK FOR ts AS ts - INTERVAL '{int(lateness_ms)}' MILLISECOND) WITH ('format' = 'csv')""")


@dataclass(frozen=True, slots=True)
class Tick:
    symbol: str
    price: float
    volume: int
    ts: int
    venue: str

    def encode(self) -> bytes:
        return f"{self.symbol},{self.price:.2f},{self.volume},{self.ts},{self.venue}".encode()


PATTERN = "^" + ",".join(f.text for f in SCHEMA) + "$"
_FIELD_RE = {f.name: re.compile(f.text) for f in SCHEMA}
_ARROW_TYPE = {float: pa.float64(), int: pa.int64(), str: pa.string()}


def valid_mask(payloads: pa.Array, *, max_bytes: int) -> np.ndarray | None:
    """A boolean mask of the well-formed ticks, or None when every one is (the common case). Columnar:
    one length check, one UTF-8 check and one regular expression over the whole array."""
    if not len(payloads):
        return None
    ok = pc.and_(pc.less_equal(pc.binary_length(payloads), max_bytes), _matches(payloads)[1])
    if pc.all(ok).as_py():
        return None
    return ok.to_numpy(zero_copy_only=False)


def _matches(payloads: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The payloads as text and whether each is a tick (PATTERN). A record that is not UTF-8 is not one;
    it is found one record at a time, only when the whole array does not cast (rare)."""
    try:
        text = payloads.cast(pa.string())
        return text, pc.match_substring_regex(text, PATTERN)
    except pa.ArrowInvalid:
        utf8 = pa.array([_is_utf8(p) for p in payloads.to_pylist()])
        text = pc.if_else(utf8, payloads, b"").cast(pa.string())
        return text, pc.and_(utf8, pc.match_substring_regex(text, PATTERN))


def _is_utf8(p: bytes | None) -> bool:
    try:
        (p or b"").decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def parse_columns(payloads: pa.Array, names: set[str], *,
                  admitted: bool = False) -> tuple[pa.Array | None, dict[str, pa.Array]]:
    """The named fields of each tick as typed Arrow columns, and a mask of the well-formed ticks (None when
    all are). A malformed tick's fields are null. Only the fields asked for are cast.

    `admitted`: the ticks passed Nu's admission (PATTERN), as every tuple on the links did, so the full
    expression is not matched again: the fields are split and cast, and only if that fails (a frame that
    did not come through admission) is the whole batch matched. For admitted ticks the result is the same
    either way; for anything else it is still the same on N and N'."""
    if not len(payloads):
        return None, {n: pa.array([], _ARROW_TYPE[FIELD_TYPE[n]]) for n in names}
    if admitted:
        try:
            return None, _split_cast(payloads.cast(pa.string()), names)
        except (pa.ArrowInvalid, ValueError):
            pass
    text, ok = _matches(payloads)
    if pc.all(ok).as_py():
        return None, _split_cast(text, names)
    # The malformed ones replaced by a tick that parses, their fields then made null.
    cols = _split_cast(pc.if_else(ok, text, ",".join("0" for _ in FIELDS)), names)
    return ok, {name: pc.if_else(ok, col, pa.scalar(None, col.type)) for name, col in cols.items()}


def _split_cast(text: pa.Array, names: set[str]) -> dict[str, pa.Array]:
    """Fields of ticks that all have len(FIELDS) fields (else ValueError), cast (ArrowInvalid if one fails)."""
    width = len(FIELDS)
    if not names:
        return {}
    parts = pc.split_pattern(text, ",")
    flat = parts.flatten()
    if len(flat) != width * len(text) or not pc.all(pc.equal(pc.list_value_length(parts), width)).as_py():
        raise ValueError("a tick without the right number of fields")
    cols = {}
    for name in names:
        col = flat.take(pa.array(np.arange(FIELD_INDEX[name], width * len(text), width)))
        typ = FIELD_TYPE[name]
        cols[name] = col if typ is str else col.cast(_ARROW_TYPE[typ])
    return cols


def validate(payload: bytes, *, max_bytes: int) -> None:
    """Raise MalformedRecord naming what is wrong with a record from outside."""
    if len(payload) > max_bytes:
        raise MalformedRecord(f"record of {len(payload)} bytes exceeds the {max_bytes}-byte limit")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MalformedRecord(f"record is not UTF-8: {e}") from None
    parts = text.split(",")
    if len(parts) != len(FIELDS):
        raise MalformedRecord(f"record has {len(parts)} fields; expected {len(FIELDS)} ({text[:60]!r})")
    for f, value in zip(SCHEMA, parts, strict=True):
        if not value and f.type is str:
            raise MalformedRecord(f"field {f.name} is empty")
        if not _FIELD_RE[f.name].fullmatch(value):
            raise MalformedRecord(f"field {f.name}={value[:40]!r} is not {f.holds}")


_SPARK_TYPES = {str: None, float: "DOUBLE", int: "BIGINT"}
# The exact types a window query aggregates a column in (as the Python operator's decimal128): a price's
# 9 + 6 digits, an integer's 18 inside 38, so no sum of admitted ticks is rounded or overflows early.
_SPARK_EXACT = {float: "DECIMAL(15,6)", int: "DECIMAL(38,0)"}


def spark_exact(name: str, text: str = "payload") -> str:
    """A Spark SQL expression for numeric field `name` of the tick in `text`, in its exact type."""
    i = FIELD_INDEX[name]
    return f"try_cast(split({text}, ',')[{i}] AS {_SPARK_EXACT[FIELDS[i][1]]})"


def spark_columns(text: str = "payload") -> list[str]:
    """Spark SQL expressions that parse a tick held in the string column `text` into its named fields.

    Generated from FIELDS, so the Spark operator and the benchmark's direct Spark query parse exactly what
    `validate` accepts. `try_cast` makes a malformed field NULL (the predicate is then not true) instead of
    failing the query under ANSI mode."""
    out = []
    for i, (name, typ) in enumerate(FIELDS):
        part = f"split({text}, ',')[{i}]"
        sql = _SPARK_TYPES[typ]
        out.append(f"{part} AS {name}" if sql is None else f"try_cast({part} AS {sql}) AS {name}")
    return out
