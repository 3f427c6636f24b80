"""Avro records: the binary encoding of one record whose schema follows from the table's columns
(`avro_schema`), read with fastavro. A nullable column is the union ["null", T]; BIGINT is long, INT int,
DOUBLE double, DECIMAL(p, s) bytes with the decimal logical type, VARCHAR string, BOOLEAN boolean,
TIMESTAMP(3) long with timestamp-millis. With `'avro.confluent' = 'true'` each record starts with the
Confluent wire format's header (a zero byte and a 4-byte schema id), which is checked and skipped.
A record must end where its last field does: trailing bytes are refused, as a truncated record is.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Sequence

import fastavro

from ..core.errors import MalformedRecord
from .records import RecordFormat


def avro_schema(schema, *, logical_timestamps: bool = True) -> dict:
    """The Avro record schema of a table (its columns in order)."""
    fields = []
    for c in schema.columns:
        kind = c.type.kind
        t: object = {"BIGINT": "long", "INT": "int", "DOUBLE": "double", "VARCHAR": "string",
                     "BOOLEAN": "boolean"}.get(kind)
        if kind == "DECIMAL":
            t = {"type": "bytes", "logicalType": "decimal", "precision": c.type.precision, "scale": c.type.scale}
        elif kind == "TIMESTAMP":
            t = {"type": "long", "logicalType": "timestamp-millis"} if logical_timestamps else "long"
        fields.append({"name": c.name, "type": ["null", t] if c.nullable else t})
    return {"type": "record", "name": schema.table, "fields": fields}


class AvroFormat(RecordFormat):
    name = "avro"

    def __init__(self, schema) -> None:
        super().__init__(schema)
        # Timestamps are read as the long they are (ms), not as datetimes: the same value, no conversion.
        self._reader = fastavro.parse_schema(avro_schema(schema, logical_timestamps=False))
        self._writer = fastavro.parse_schema(avro_schema(schema))
        self.confluent = schema.option("avro.confluent", "false").lower() == "true"
        self.schema_id = int(schema.option("avro.schema-id", "1"))

    def record_values(self, payload: bytes) -> Sequence[object]:
        if self.confluent:
            if len(payload) < 5 or payload[0] != 0:
                raise MalformedRecord("record lacks the Confluent header (a zero byte and a 4-byte schema id)")
            payload = payload[5:]
        buf = io.BytesIO(payload)
        try:
            rec = fastavro.schemaless_reader(buf, self._reader, None)
        except (EOFError, StopIteration, IndexError, struct.error):
            raise MalformedRecord(f"Avro record truncated ({len(payload)} bytes)") from None
        except UnicodeDecodeError as e:
            raise MalformedRecord(f"Avro string is not UTF-8: {e}") from None
        except (ValueError, TypeError, OverflowError, fastavro.read.SchemaResolutionError) as e:
            raise MalformedRecord(f"Avro record does not decode: {e}") from None
        if buf.tell() != len(payload):
            raise MalformedRecord(f"Avro record has {len(payload) - buf.tell()} bytes after its last field")
        return [rec.get(name) for name in self.schema.names]

    def encode(self, rows: Sequence[dict]) -> list[bytes]:
        header = b"\x00" + struct.pack(">I", self.schema_id) if self.confluent else b""
        out = []
        for row in rows:
            buf = io.BytesIO()
            values = {n: _avro_value(self.schema.column(n), row.get(n)) for n in self.schema.names}
            fastavro.schemaless_writer(buf, self._writer, values)
            out.append(header + buf.getvalue())
        return out


def _avro_value(col, v: object) -> object:
    if v is not None and col.type.kind == "TIMESTAMP":
        import datetime as dt

        return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=v)
    return v
