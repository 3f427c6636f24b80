"""CSV records: one line per record, the fields in the columns' declared order, comma-separated, quoted
as RFC 4180 quotes them (Python's csv module reads and writes them). An empty field is NULL, whatever
the column's type. A field's text is read by its column's type: an integer's digits, a double's number
(no NaN or infinity), a DECIMAL's digits, `true`/`false`, a TIMESTAMP's ms since 1970 or ISO-8601 text;
then `coerce` holds it to the type's rule, as for every format.
"""

from __future__ import annotations

import csv
import decimal
import io
import re
from collections.abc import Sequence

from ..core.errors import MalformedRecord
from .records import RecordFormat

_INT = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class CsvFormat(RecordFormat):
    name = "csv"

    def record_values(self, payload: bytes) -> Sequence[object]:
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedRecord(f"record is not UTF-8: {e}") from None
        if "\n" in text.rstrip("\r\n") or "\x00" in text:
            raise MalformedRecord("record holds a line break or a NUL")
        try:
            rows = list(csv.reader([text.rstrip("\r\n")], strict=True))
        except csv.Error as e:
            raise MalformedRecord(f"record is not CSV: {e}") from None
        fields = rows[0] if rows else []
        cols = self.schema.columns
        if len(fields) != len(cols):
            raise MalformedRecord(f"record has {len(fields)} fields; expected {len(cols)} "
                                  f"({', '.join(self.schema.names)})")
        return [_value(c, f) for c, f in zip(cols, fields, strict=True)]

    def encode(self, rows: Sequence[dict]) -> list[bytes]:
        out = []
        for row in rows:
            buf = io.StringIO()
            csv.writer(buf, lineterminator="").writerow(["" if row.get(n) is None else _text(row.get(n))
                                                         for n in self.schema.names])
            out.append(buf.getvalue().encode())
        return out


def _value(col, text: str) -> object:
    """A field's text as the value its column's type reads it as (coerce checks it after)."""
    if text == "":
        return None
    kind = col.type.kind
    if kind in ("BIGINT", "INT"):
        if not _INT.fullmatch(text):
            raise MalformedRecord(f"column {col.name} ({kind}) takes an integer, got {text[:40]!r}")
        return int(text)
    if kind in ("DOUBLE", "DECIMAL"):
        if not _NUMBER.fullmatch(text):
            raise MalformedRecord(f"column {col.name} ({col.type.text()}) takes a number, got {text[:40]!r}")
        return decimal.Decimal(text)
    if kind == "BOOLEAN":
        low = text.lower()
        if low not in ("true", "false"):
            raise MalformedRecord(f"column {col.name} (BOOLEAN) takes true or false, got {text[:40]!r}")
        return low == "true"
    if kind == "TIMESTAMP" and _INT.fullmatch(text):
        return int(text)
    return text


def _text(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
