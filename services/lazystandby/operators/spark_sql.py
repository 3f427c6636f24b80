"""A planned SQL query (formats/sql.py) run by Spark Structured Streaming, behind the Operator contract:
the same feed, session and pacing as the tick example's Spark operators (operators/spark.py,
operators/spark_window.py), with the query Spark runs written from the plan (lazystandby_spark.sql).

- `SparkSqlSelect`: Spark parses the records, filters and computes the result columns; each micro-batch
  hands them to the node in the driver (foreachBatch, as Arrow), with a marker row per range read, and
  the feed answers each call with the selected offsets and their rows (`SqlFeed`).
- `SparkSqlWindow`: Spark's streaming aggregation over the plan's keys and aggregate arguments, in the
  window feed's cuts at watermark records; the node keeps each open window's newest rows and emits the
  windows a record makes final, HAVING applied.

Either way the node formats the results (operators/sql.py): both operators write the same JSON for the
same values. Avro records reach Spark as JSON text (`SparkText`): the node decodes them with the table's
own decoder (fastavro), so Spark needs no spark-avro package and reads every table with `from_json` or
`from_csv`.
"""

from __future__ import annotations

from concurrent.futures import Future

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
from lazystandby_spark import query as spark_query
from lazystandby_spark.feed import Feed, resolve

from ..config import NodeConfig
from ..core.messages import Params
from ..core.seq import StreamRegistry
from ..core.tuples import TupleBatch
from ..formats.by_name import record_format
from ..formats.json_format import JsonFormat
from ..formats.schema import Schema
from ..formats.sql import Plan
from ..sources.drawn import draw_records
from .base import Outputs
from .spark import SparkSelection
from .spark_window import SparkWindow
from .sql import SqlWindow, json_texts, window_query


class SqlFeed(Feed):
    """The feed of a SQL selection: ranges and selected offsets come back with the selected rows' result
    columns, from the query's foreachBatch (`commit`); `answer` futures give (offsets, rows)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[pa.Table] = []  # parallel to `selected`

    def commit(self, table: pa.Table) -> None:
        """One micro-batch's output (in the driver): marker rows close ranges, the others are selected."""
        if not table.num_rows:
            return
        marker = table.column("marker").to_numpy(zero_copy_only=False).astype(bool)
        off = table.column("off").to_numpy(zero_copy_only=False).astype(np.int64)
        starts = table.column("rstart").to_numpy(zero_copy_only=False)[marker]
        ends = off[marker]
        chosen = table.filter(pa.array(~marker))
        offsets = chosen.column("off").to_numpy(zero_copy_only=False).astype(np.int64)
        with self.lock:
            fresh = self._answered(starts.tolist(), ends.tolist(), offsets)
            if fresh.any():
                self.selected.append(offsets[fresh])
                self.rows.append(chosen.filter(pa.array(fresh)))
            ready = self._ready()
        resolve(ready)

    def _ready(self):
        out = []
        if self.waiters and self.waiters[0][1] <= self.done_through:
            offs = np.concatenate(self.selected) if self.selected else np.empty(0, np.int64)
            rows = pa.concat_tables(self.rows) if self.rows else None
            order = np.argsort(offs, kind="stable")
            offs = offs[order]
            if rows is not None:
                rows = rows.take(pa.array(order))
            while self.waiters and self.waiters[0][1] <= self.done_through:
                start, end, fut = self.waiters.popleft()
                lo, hi = np.searchsorted(offs, [start, end])
                out.append((fut, (offs[lo:hi] - start, None if rows is None else rows.slice(lo, hi - lo))))
                offs = offs[hi:]
                if rows is not None:
                    rows = rows.slice(hi)
            self.selected = [offs] if len(offs) else []
            self.rows = [rows] if rows is not None and rows.num_rows else []
        while self.chunks and self.base + len(self.chunks[0]) <= self.done_through:
            self.base += len(self.chunks.popleft())
        return out


class SparkText:
    """The records of a table as Spark's query reads them: as they are, except Avro's, which become JSON
    objects of the same values (DECIMAL as its exact text, TIMESTAMP as ms). Only admitted records come
    here, so each decodes; one that did not would fail the call, as any input the operator cannot read
    does. Built once per operator: the formats' schemas are parsed then, not at every call."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.avro = record_format(schema) if schema.format == "avro" else None
        self.json = JsonFormat(schema) if self.avro is not None else None

    def __call__(self, payloads: pa.Array) -> pa.Array:
        if self.avro is None or not len(payloads):
            return payloads
        decoded = self.avro.decode(payloads)
        if decoded.bad:
            i, why = next(iter(decoded.bad.items()))
            raise ValueError(f"record {i} of the call does not decode as {self.schema.table}'s Avro: {why}")
        table = decoded.table
        for i, field in enumerate(table.schema):
            if pa.types.is_timestamp(field.type):  # ms since 1970, as the JSON format reads a TIMESTAMP(3)
                table = table.set_column(i, field.name, table.column(i).cast(pa.int64()))
        return pa.array(self.json.encode(table.to_pylist()), pa.binary())


def _warm_record(plan: Plan) -> bytes:
    """A record of the plan's table, valid, as Spark reads it, for warming a query up (its results are never
    output)."""
    return SparkText(plan.schema)(pa.array(draw_records(plan.schema, 1, seed=1), pa.binary()))[0].as_py()


class SparkSqlSelect(SparkSelection):
    """A SQL selection run by Spark; stateless: N and N' compute each input's result alone."""

    name = "spark-sql"

    def __init__(self, plan: Plan, cfg: NodeConfig) -> None:
        if plan.stateful:
            raise ValueError(f"{plan.text!r} is a window query")
        self.plan = plan
        self.spark_text = SparkText(plan.schema)
        super().__init__("true", cfg)

    def _new_feed(self) -> SqlFeed:
        return SqlFeed()

    def _warm_payload(self) -> bytes:
        return _warm_record(self.plan)

    def _start_query(self) -> None:
        self.generation += 1
        self.feed.restart_at_end()
        generation, cfg = self.generation, self.cfg

        def commit(table: pa.Table) -> None:
            if generation == self.generation:
                self.feed.commit(table)

        self.query = spark_query.start_sql_select(
            self.spark, self.plan, address=self.address, max_rows=cfg.spark_max_rows,
            partitions=cfg.spark_partitions, checkpoint=f"{self.workdir}/checkpoint-{self.generation}",
            trigger=cfg.spark_trigger, name=f"sql_select_{self.generation}", on_batch=commit)

    def submit(self, batch: TupleBatch) -> Future:
        data = np.flatnonzero(batch.streams != StreamRegistry.CONTROL)  # no control record means anything here
        payloads = batch.payloads if len(data) == len(batch) else batch.payloads.take(pa.array(data))
        answer = self._append(self.spark_text(payloads))
        done: Future = Future()

        def collect(f: Future) -> None:
            try:
                offsets, rows = f.result()
                if rows is None or not len(offsets):
                    done.set_result(Outputs.none())
                    return
                values = [rows.column(f"_o{i}").combine_chunks() for i in range(len(self.plan.outputs))]
                done.set_result(Outputs(data[offsets], json_texts(self.plan.names, values)))
            except BaseException as e:  # noqa: BLE001 - delivered where the node collects the call
                done.set_exception(e)

        answer.add_done_callback(collect)
        return done

    def process(self, batch: TupleBatch) -> Outputs:
        return self._wait(self.submit(batch))

    def restore(self, position: int, params: Params | None = None) -> None:
        """Stateless: nothing to resume."""

    def _switch(self, pos: int, payload: bytes) -> None:
        raise AssertionError("a pipeline's query takes no parameter switch (Nu refuses them)")


class SparkSqlWindow(SparkWindow):
    """A SQL window aggregation run by Spark (stateful)."""

    name = "spark-sql-window"

    def __init__(self, plan: Plan, cfg: NodeConfig) -> None:
        if not plan.stateful:
            raise ValueError(f"{plan.text!r} is not a window query")
        self.plan = plan
        self.spark_text = SparkText(plan.schema)
        self.results_of = SqlWindow(plan)  # formats final rows (and applies HAVING) as the Python operator
        super().__init__(window_query(plan), cfg)

    def _start_query(self, *, where: str | None = None) -> None:
        self.generation += 1
        self.feed.restart_at_end()
        self._open = {}
        self.query = spark_query.start_sql_window(
            self.spark, self.plan, address=self.address, partitions=self.cfg.spark_partitions,
            checkpoint=f"{self.workdir}/checkpoint-{self.generation}", trigger=self.cfg.spark_trigger,
            name=f"sql_window_{self.generation}", on_batch=self._on_batch(self.generation), where=where)

    def _start_warm(self) -> None:
        """As the tick example's: every stage warmed by a query that keeps every record, then the node's
        own query compiled on records without an event time (they never reach its state)."""
        self._start_query(where="true")
        self._warm_rounds(_warm_record(self.plan), 1 << 40, (1_000, 100, 100))
        self.query.stop()
        self._start_query()
        no_time = b"{}" if self.plan.schema.format != "csv" else b"," * (len(self.plan.schema.columns) - 1)
        self._warm_rounds(no_time, 0, (1_000, 100))

    def submit(self, batch: TupleBatch) -> Future:
        """As the tick example's window, with the data rows as Spark reads them (`SparkText`)."""
        if self.plan.schema.format != "avro":
            return super().submit(batch)
        data = np.flatnonzero(batch.streams != StreamRegistry.CONTROL)
        if not len(data):
            return super().submit(batch)
        texts = batch.payloads.to_pylist()
        for i, t in zip(data.tolist(), self.spark_text(batch.payloads.take(pa.array(data))).to_pylist(),
                        strict=True):
            texts[i] = t
        return super().submit(TupleBatch(batch.first, batch.streams, batch.seqs, texts))

    def _prepared(self, payloads: pa.Array, records: list[int], marks: list[int], before: int | None) -> pa.Array:
        """Sliding windows: each data row prefixed with the watermark in force at it (`<ms>|`, empty before
        the first record). A record counts only in its windows still open there, as in the Python
        operator; Spark's own watermark is the previous micro-batch's, and one micro-batch spans several
        records, so the query filters each (record, window) pair by the row's own (start_sql_window)."""
        if self.spec.per_tick == 1 or not len(payloads):
            return payloads
        bounds = np.asarray(records, np.int64)
        texts = [b"" if before is None else str(before).encode(), *(str(m).encode() for m in marks)]
        seg = np.searchsorted(bounds, np.arange(len(payloads)), side="right")  # records before each row
        prefix = pa.array(texts, pa.binary()).take(pa.array(seg))
        is_record = np.zeros(len(payloads), bool)
        is_record[bounds] = True
        joined = pa.compute.binary_join_element_wise(prefix, payloads, b"|")
        return pa.compute.if_else(pa.array(is_record), payloads, joined)

    def _kept(self, table: pa.Table) -> pa.Table:
        return self.results_of.kept(table)

    def _texts(self, table: pa.Table) -> pa.Array:
        return self.results_of.texts(table)
