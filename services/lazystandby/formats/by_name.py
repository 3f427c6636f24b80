"""The record format a table declares, by its name (`'format' = 'json' | 'csv' | 'avro'`)."""

from __future__ import annotations

from .avro_format import AvroFormat
from .csv_format import CsvFormat
from .json_format import JsonFormat
from .records import RecordFormat
from .schema import Schema

FORMATS = {"json": JsonFormat, "csv": CsvFormat, "avro": AvroFormat}


def record_format(schema: Schema) -> RecordFormat:
    """The decoder and encoder of `schema`'s records."""
    return FORMATS[schema.format](schema)
