"""JSON records: one object per record, a key per column (absent: null; other keys ignored).

The columnar path is Arrow's JSON reader over the whole poll, told the declared types; it is taken when
it reads every record and the columns it gives pass the checks `coerce` makes that the reader does not
(ranges, NOT NULL, a DECIMAL's integer digits, finite doubles). A TIMESTAMP column is read as ms since
1970, or, when a poll holds its values as text, as text in the one ISO-8601 shape the results writer gives
(`YYYY-MM-DDTHH:MM:SS.mmm`, `Z` or no zone: UTC, as `coerce` reads it): Arrow's parse is taken only
where writing each value back in that shape gives its text again, so a value the two parsers could read
apart (another shape, a zone offset, a blank) never passes. A view's window bounds take this path.
Anything else goes record by record.

The reader parses its input as a sequence of JSON values, newlines or not, so nothing but the records
themselves says where one ends. The columnar path takes a poll only when every record's first byte is
`{` and its last `}`: the joint between two records, `}` then whitespace then `{`, is then valid JSON
only between two top-level objects (inside an object or array a comma would have to come between), so
each record reads as one or more whole objects, and as many rows as records means one each.
"""

from __future__ import annotations

import decimal
import json
from collections.abc import Sequence

import numpy as np
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
        # The reader is told every type but TIMESTAMP's: those are read as ms since 1970 (a number to it)
        # or as text (`_timestamps`), whichever the last poll held, tried first.
        self._ts_text = False
        self._options: dict[tuple, pj.ParseOptions] = {}  # by (the columns read, TIMESTAMP as text)

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
        table = self._read(payloads, [c for c in self.schema.columns if c.name in set(names)])
        return Decoded(table) if table is not None else self.decode(payloads)

    def decode_columnar(self, payloads: pa.Array) -> pa.Table | None:
        return self._read(payloads, list(self.schema.columns))

    def _parse_options(self, columns: list, ts_text: bool) -> pj.ParseOptions:
        key = (tuple(c.name for c in columns), ts_text)
        if key not in self._options:
            ts = pa.string() if ts_text else pa.int64()
            fields = [pa.field(c.name, c.type.arrow if c.type.kind != "TIMESTAMP" else ts) for c in columns]
            self._options[key] = pj.ParseOptions(explicit_schema=pa.schema(fields), unexpected_field_behavior="ignore",
                                                 newlines_in_values=False)
        return self._options[key]

    def _read(self, payloads: pa.Array, columns: list) -> pa.Table | None:
        try:
            payloads.cast(pa.string())  # raises on a record that is not UTF-8
        except pa.ArrowInvalid:
            return None
        if payloads.null_count or not (pc.all(pc.starts_with(payloads, "{")).as_py()
                                       and pc.all(pc.ends_with(payloads, "}")).as_py()):
            return None  # a record that may not be exactly its own objects (the module's docstring)
        lines = _lines(payloads)
        tries = (self._ts_text, not self._ts_text) if any(c.type.kind == "TIMESTAMP" for c in columns) else (False,)
        for ts_text in tries:
            options = self._parse_options(columns, ts_text)
            try:
                table = pj.read_json(pa.BufferReader(lines), read_options=_READ, parse_options=options)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                continue
            self._ts_text = ts_text
            return self._vouched(table, columns, len(payloads))
        return None

    def _vouched(self, table: pa.Table, columns: list, n: int) -> pa.Table | None:
        if table.num_rows != n:
            return None  # a record that held more than one object
        cols = []
        for c in columns:
            col = table.column(c.name)
            if c.type.kind == "TIMESTAMP":
                col = _timestamps(col) if pa.types.is_string(col.type) else col
                if col is None:
                    return None
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


# One thread: the reader's own threads cost more CPU per record than they save in time, and the node's
# other threads want the cores.
_READ = pj.ReadOptions(use_threads=False, block_size=1 << 22)


def _lines(payloads: pa.Array) -> pa.Buffer:
    """The records, each followed by a newline, as one buffer, without a Python object per record."""
    ended = pc.binary_join_element_wise(payloads, pa.scalar(b"\n", payloads.type), pa.scalar(b"", payloads.type))
    _, offsets, data = ended.buffers()
    width = 8 if pa.types.is_large_binary(ended.type) or pa.types.is_large_string(ended.type) else 4
    bounds = np.frombuffer(offsets, dtype=np.int64 if width == 8 else np.int32)
    start, end = int(bounds[ended.offset]), int(bounds[ended.offset + len(ended)])
    return data.slice(start, end - start)


def _timestamps(text: pa.ChunkedArray) -> pa.ChunkedArray | None:
    """A TIMESTAMP column read as text, as ms since 1970 (int64), when every value is in the results
    writer's shape (`YYYY-MM-DDTHH:MM:SS.mmm`, then `Z` or nothing): Arrow's parse, written back in that
    shape, must give the text again. None otherwise: the record path reads it."""
    bare = pc.replace_substring_regex(text, "Z$", "")
    try:
        ts = bare.cast(pa.timestamp("ms"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    again = pc.replace_substring(ts.cast(pa.string()), " ", "T")
    same = pc.equal(again, bare)
    if same.null_count != text.null_count or pc.all(same).as_py() is False:
        return None
    return ts.cast(pa.int64())


def _json_value(v: object) -> object:
    if isinstance(v, decimal.Decimal):
        return str(v)
    return v
