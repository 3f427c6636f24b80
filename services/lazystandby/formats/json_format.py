"""JSON records: one object per record, a key per column (absent: null; other keys ignored).

The columnar path is Arrow's JSON reader over the whole poll, told the declared types; it is taken when
it reads every record and the columns it gives pass the checks `coerce` makes that the reader does not
(ranges, NOT NULL, a DECIMAL's integer digits, finite doubles, a TIMESTAMP given as ms). Anything else
(ISO-8601 timestamps among them, which the reader would read in its own way) goes record by record.
"""

from __future__ import annotations

import decimal
import io
import json
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ..core.errors import MalformedRecord
from .records import Decoded, RecordFormat
from .schema import INT32, TS_MAX_MS, TS_MIN_MS


def _no_duplicates(pairs: list) -> dict:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise MalformedRecord(f"key {dup!r} appears twice in one object")
    return dict(pairs)


class JsonFormat(RecordFormat):
    name = "json"

    def __init__(self, schema) -> None:
        super().__init__(schema)
        # The reader is told every type but TIMESTAMP's (ms since 1970 is a number to it); those are read
        # as what they hold and accepted only as whole numbers.
        self._ts = [c.name for c in schema.columns if c.type.kind == "TIMESTAMP"]
        fields = [pa.field(c.name, c.type.arrow if c.type.kind != "TIMESTAMP" else pa.int64())
                  for c in schema.columns]
        self._parse = pj.ParseOptions(explicit_schema=pa.schema(fields), unexpected_field_behavior="ignore",
                                      newlines_in_values=False)
        self._partial: dict[tuple, tuple] = {}  # the reader told only some columns, by their names

    # --- the record path ---------------------------------------------------------------------------
    def record_values(self, payload: bytes) -> Sequence[object]:
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedRecord(f"record is not UTF-8: {e}") from None
        try:
            obj = json.loads(text, object_pairs_hook=_no_duplicates, parse_float=decimal.Decimal)
        except ValueError as e:
            raise MalformedRecord(f"record is not JSON: {e}") from None
        if not isinstance(obj, dict):
            raise MalformedRecord(f"record is a JSON {type(obj).__name__}, not an object")
        return [obj.get(name) for name in self.schema.names]

    def encode(self, rows: Sequence[dict]) -> list[bytes]:
        return [json.dumps({k: _json_value(v) for k, v in row.items()}, separators=(",", ":")).encode()
                for row in rows]

    # --- the columnar path -------------------------------------------------------------------------
    def decode_columns(self, payloads: pa.Array, names) -> Decoded:
        """Only the columns `names` read by Arrow's reader (the others' keys are skipped, not converted);
        anything it does not vouch for goes the whole way (`decode`)."""
        names = list(names)
        if not len(payloads) or len(names) == len(self.schema.columns):
            return self.decode(payloads)
        key = tuple(names)
        if key not in self._partial:
            cols = [c for c in self.schema.columns if c.name in set(names)]
            fields = [pa.field(c.name, c.type.arrow if c.type.kind != "TIMESTAMP" else pa.int64()) for c in cols]
            self._partial[key] = (cols, pj.ParseOptions(explicit_schema=pa.schema(fields),
                                                        unexpected_field_behavior="ignore", newlines_in_values=False))
        cols, options = self._partial[key]
        table = self._read(payloads, options, cols)
        return Decoded(table) if table is not None else self.decode(payloads)

    def decode_columnar(self, payloads: pa.Array) -> pa.Table | None:
        return self._read(payloads, self._parse, self.schema.columns)

    def _read(self, payloads: pa.Array, options, columns) -> pa.Table | None:
        try:
            text = payloads.cast(pa.string())  # raises on a record that is not UTF-8
        except pa.ArrowInvalid:
            return None
        if pc.any(pc.match_substring(text, "\n")).as_py() or pc.min(pc.binary_length(payloads)).as_py() < 2:
            return None  # the reader takes one record per line, and a blank one as none
        try:
            table = pj.read_json(io.BytesIO(b"\n".join(payloads.to_pylist())), parse_options=options)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if table.num_rows != len(payloads):
            return None  # a line that held more than one object
        cols = []
        for c in columns:
            col = table.column(c.name)
            if not self._vouch(c, col):
                return None
            if c.type.kind == "TIMESTAMP":
                col = col.cast(pa.timestamp("ms"))
            cols.append(col)
        schema = pa.schema([pa.field(c.name, c.type.arrow) for c in columns])
        return pa.Table.from_arrays(cols, schema=schema)

    def _vouch(self, c, col: pa.ChunkedArray) -> bool:
        """Whether the reader's column holds what `coerce` admits, value for value."""
        if not c.nullable and col.null_count:
            return False
        kind = c.type.kind
        if kind == "INT" or kind == "TIMESTAMP":
            lo, hi = INT32 if kind == "INT" else (TS_MIN_MS, TS_MAX_MS)
            if kind == "INT":
                col = col.cast(pa.int64())
            if col.null_count < len(col) and not (pc.min(col).as_py() >= lo and pc.max(col).as_py() <= hi):
                return False
        elif kind == "DOUBLE":
            if pc.all(pc.is_finite(col)).as_py() not in (True, None):
                return False
        elif kind == "DECIMAL":
            bound = pa.scalar(decimal.Decimal(10) ** (c.type.precision - c.type.scale), pa.decimal128(38, 0))
            wide = col.cast(pa.decimal128(38, c.type.scale))
            if pc.any(pc.greater_equal(pc.abs(wide), bound.cast(wide.type))).as_py():
                return False
        elif kind == "VARCHAR" and c.type.length and pc.any(pc.greater(pc.utf8_length(col), c.type.length)).as_py():
            return False
        return True


def _json_value(v: object) -> object:
    if isinstance(v, decimal.Decimal):
        return str(v)
    return v
