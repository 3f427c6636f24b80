"""The record formats' contract: a decoder turns a column of records (bytes, as Kafka holds them) into
the declared table's typed Arrow columns, and names what is wrong with each record it refuses.

Every format has two paths to the same result. The record path reads one record at a time and follows
`schema.coerce`, the one rule per type: it is the reference, and it names each refused record's reason.
A format may add a columnar path (JSON: Arrow's reader over the whole poll); it is taken only when it
accepts the whole column, and then gives exactly the values the record path would (a property test
holds them equal). A poll with a record to refuse is therefore read record by record, as Nu names each.

Records travel between the nodes as their source bytes: every node decodes them with the same decoder,
so N and N' see the same values for the same positions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ..core.errors import MalformedRecord
from .schema import Schema, coerce


class Decoded:
    """A decoded column of records: `table` has the schema's columns, one row per record (a refused
    record's row is all null); `bad` maps a refused record's index to its reason."""

    __slots__ = ("table", "bad")

    def __init__(self, table: pa.Table, bad: dict[int, str] | None = None) -> None:
        self.table = table
        self.bad = bad or {}

    @property
    def ok(self) -> np.ndarray | None:
        """A mask of the admitted records, None when every record is."""
        if not self.bad:
            return None
        mask = np.ones(self.table.num_rows, bool)
        mask[list(self.bad)] = False
        return mask


class RecordFormat(ABC):
    """One format of one schema: `decode` records into columns, `encode` rows into records."""

    name = ""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.arrow_schema = schema.arrow_schema

    def decode(self, payloads: pa.Array, *, max_bytes: int = 0) -> Decoded:
        """Every record of `payloads` (binary), columnar where the format can take the whole column,
        else record by record. A record over `max_bytes` (0: no limit) is refused."""
        n = len(payloads)
        if not n:
            return Decoded(self.arrow_schema.empty_table())
        if max_bytes and pa.compute.max(pa.compute.binary_length(payloads)).as_py() > max_bytes:
            return self.decode_records(payloads, max_bytes=max_bytes)
        table = self.decode_columnar(payloads)
        if table is not None:
            return Decoded(table)
        return self.decode_records(payloads, max_bytes=max_bytes)

    def decode_columns(self, payloads: pa.Array, names: Sequence[str]) -> Decoded:
        """`decode` for a reader that needs only the columns `names` (an operator over admitted records):
        the same values in those columns; a format may read the others less, or not at all."""
        return self.decode(payloads)

    def decode_columnar(self, payloads: pa.Array) -> pa.Table | None:
        """The whole column at once, or None when this path cannot vouch for every record (the record
        path then decides). Only when it gives the record path's values exactly."""
        return None

    def decode_records(self, payloads: pa.Array, *, max_bytes: int = 0) -> Decoded:
        """The record path: each record on its own, through `coerce`."""
        rows: list[Sequence[object] | None] = []
        bad: dict[int, str] = {}
        cols = self.schema.columns
        for i, p in enumerate(payloads.to_pylist()):
            try:
                if p is None:
                    raise MalformedRecord("the record is null")
                if max_bytes and len(p) > max_bytes:
                    raise MalformedRecord(f"record of {len(p)} bytes exceeds the {max_bytes}-byte limit")
                values = self.record_values(p)
                rows.append([coerce(c, v) for c, v in zip(cols, values, strict=True)])
            except MalformedRecord as e:
                bad[i] = e.message
                rows.append(None)
        return Decoded(self._table(rows), bad)

    @abstractmethod
    def record_values(self, payload: bytes) -> Sequence[object]:
        """One record's raw values, one per column in order (None for absent), as its reader gives
        them; MalformedRecord when the record does not parse."""

    @abstractmethod
    def encode(self, rows: Sequence[dict]) -> list[bytes]:
        """Records of `rows` (column name -> value as `coerce` gives it; TIMESTAMP in ms)."""

    def _table(self, rows: list) -> pa.Table:
        arrays = []
        for j, c in enumerate(self.schema.columns):
            arrays.append(pa.array([None if r is None else r[j] for r in rows], c.type.arrow))
        return pa.Table.from_arrays(arrays, schema=_nullable(self.arrow_schema))


def _nullable(schema: pa.Schema) -> pa.Schema:
    """The schema with every field nullable (a refused record's row is null; NOT NULL is checked apart)."""
    return pa.schema([f.with_nullable(True) for f in schema])

