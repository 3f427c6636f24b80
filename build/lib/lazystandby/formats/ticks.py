"""The source record format: a tick as UTF-8 text `symbol,price,volume,ts_ms,venue` (30-60 bytes).

Kept as text rather than JSON because every hop splits thousands of them per frame; `validate` is what Nu
applies to records from outside (Kafka), sending failures to the dead-letter stream.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.seq import MalformedRecord

FIELDS: tuple[tuple[str, type], ...] = (
    ("symbol", str),
    ("price", float),
    ("volume", int),
    ("ts", int),
    ("venue", str),
)
FIELD_INDEX = {name: i for i, (name, _) in enumerate(FIELDS)}
FIELD_TYPE = dict(FIELDS)


@dataclass(frozen=True, slots=True)
class Tick:
    symbol: str
    price: float
    volume: int
    ts: int
    venue: str

    def encode(self) -> bytes:
        return f"{self.symbol},{self.price:.2f},{self.volume},{self.ts},{self.venue}".encode()


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
    for (name, typ), value in zip(FIELDS, parts, strict=True):
        if typ is str:
            if not value:
                raise MalformedRecord(f"field {name} is empty")
            continue
        try:
            typ(value)
        except ValueError:
            raise MalformedRecord(f"field {name}={value!r} is not a {typ.__name__}") from None


_SPARK_TYPES = {str: None, float: "DOUBLE", int: "BIGINT"}


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
