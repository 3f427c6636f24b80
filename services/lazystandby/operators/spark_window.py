"""The keyed event-time window aggregation run by Spark Structured Streaming (`Query.kind == "window"`).

The aggregation is Spark's own: `groupBy(window(ts), keys).agg(...)` in append mode, its state in
Spark's state store (`spark_state_store`: hdfs or rocksdb). What makes it deterministic on N and N', and
equal to the Python operator (operators/window.py) result for result:

- Event time follows the link order. Each watermark record enters the query with the watermark it
  carries as its event time, and the feed (lazystandby_spark.feed.WindowFeed) ends micro-batches only
  just past records, so Spark's watermark is the link order's at every record, however the inputs were
  cut into calls or micro-batches.
- The query runs in update mode: each micro-batch's commit carries the whole aggregate so far of every
  group its rows changed. Once the micro-batch that read a call's last record has committed, every
  window that record's watermark makes final is complete in what came back, a micro-batch before Spark
  evicts it (what a takeover waits for is one micro-batch shorter). The node keeps each open window's
  rows as they came back and takes each group's newest once the window is final; the call's outputs
  are the windows final at its last record's watermark, each mapped to the first record whose
  watermark makes it final: the Python operator's mapping.
- Rows are sorted by window start and keys and formatted by operators/window.result_texts from exact
  partials (decimal sums, counts, min, max), as the Python operator's are.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lazystandby_spark import query as spark_query
from lazystandby_spark.feed import WindowFeed

from ..config import NodeConfig
from ..core.messages import Params
from ..core.seq import StreamRegistry
from ..core.tuples import TupleBatch
from ..core.windows import WindowSpec
from ..formats import control
from ..formats.query import Query
from .base import Outputs
from .spark import WARMUP_TICK, SparkSelection
from .window import WINDOW, result_texts

log = logging.getLogger(__name__)


class SparkWindow(SparkSelection):
    """A window query's aggregation by Spark, behind the Operator contract (stateful)."""

    name = "spark-window"
    stateful = True

    def __init__(self, query: Query, cfg: NodeConfig) -> None:
        if not query.stateful:
            raise ValueError(f"{query.text()!r} is not a window query")
        self.window = query
        self.spec = WindowSpec(query.size_ms, query.slide_ms, query.lateness_ms)
        self.watermark: int | None = None  # the last record's, clamped non-decreasing (as the Python operator)
        self._floor: int | None = None  # a restored state's watermark: windows final there were delivered
        # Window start -> the rows its groups came back with from each commit, oldest first (update mode: a
        # later row of a group replaces the earlier), until a record makes the window final. Kept by window
        # so that a call works through the rows of the windows it closes, not through every open group.
        self._open: dict[int, list[pa.Table]] = {}
        self.results = 0
        self.unparseable = 0
        self._progress: tuple[float, int, int] = (0.0, 0, 0)  # (when read, rows, bytes) of the state store
        super().__init__(query.where or "true", cfg)

    def _new_feed(self) -> WindowFeed:
        return WindowFeed(max_rows=self.cfg.spark_max_rows)

    def _start_query(self, *, where: str | None = None) -> None:
        self.generation += 1
        self.feed.restart_at_end()
        self._open = {}
        query = self.window if where is None else replace(self.window, where=where)
        self.query = spark_query.start_window(
            self.spark, query, address=self.address, partitions=self.cfg.spark_partitions,
            checkpoint=f"{self.workdir}/checkpoint-{self.generation}", trigger=self.cfg.spark_trigger,
            name=f"window_{self.generation}", on_batch=self._on_batch(self.generation))
        log.info("%s: Spark window query %d started: %s", self.cfg.name, self.generation, query.text())

    def _start_warm(self) -> None:
        """A query's first micro-batches compile its plan and warm the JVM: 2-3 s, which must not fall in
        a takeover. First a query that keeps every tick runs ticks through every stage (aggregation, state
        store, eviction, sink); then the node's own query, started fresh, compiles its filter on ticks
        whose `ts` does not parse (they never reach its state) and a record at event time 0 (it moves no
        watermark). What it holds then is nothing, and its plan is compiled."""
        self._start_query(where="true")
        self._warm_rounds(WARMUP_TICK, 1 << 40, (1_000, 100, 100))
        self.query.stop()
        self._start_query()
        self._warm_rounds(b"WARMUP,1.0,1,-,X", 0, (1_000, 100))

    def _on_batch(self, generation: int):
        def commit(table: pa.Table) -> None:
            if generation == self.generation:  # a stopped query's last micro-batch belongs to a state given up
                self.feed.commit(table)
        return commit

    def _warm_rounds(self, tick: bytes, watermark: int, sizes: tuple[int, ...]) -> None:
        record = control.encode_watermark(watermark)
        for rows in sizes:
            first = self.feed.append_cut(pa.array([tick] * rows + [record], pa.binary()), [rows])
            self._wait(self.feed.until(first + rows + 1))
        self.feed.drain()

    # --- calls --------------------------------------------------------------------------------------
    def process(self, batch: TupleBatch) -> Outputs:
        return self._wait(self.submit(batch))

    def submit(self, batch: TupleBatch) -> Future:
        controls = np.flatnonzero(batch.streams == StreamRegistry.CONTROL).tolist()
        records: list[int] = []
        marks: list[int] = []
        payloads = batch.payloads
        before = self.watermark
        others = []
        for c in controls:
            wm = control.watermark_of(batch.payload(c))
            if wm is None:
                others.append(c)  # ignored, as the Python operator does: it must not reach Spark as a tick
                self.unparseable += 1
                continue
            top = wm if self.watermark is None else max(wm, self.watermark)
            self.watermark = top
            records.append(c)
            marks.append(top)
        if others:
            texts = payloads.to_pylist()
            for c in others:
                texts[c] = b""
            payloads = pa.array(texts, pa.binary())
        first = self.feed.append_cut(self._prepared(payloads, records, marks, before), records)
        done: Future = Future()
        if not records:
            done.set_result(Outputs.none())
            return done
        out = self.feed.until(first + records[-1] + 1)

        def collect(f: Future) -> None:
            try:
                f.result()
                done.set_result(self._collect(np.asarray(records, np.int64), np.asarray(marks, np.int64)))
            except BaseException as e:  # noqa: BLE001 - delivered where the node collects the call
                done.set_exception(e)

        out.add_done_callback(collect)
        return done

    def _prepared(self, payloads: pa.Array, records: list[int], marks: list[int], before: int | None) -> pa.Array:
        """What the feed hands Spark for a call's payloads (records at `records` carrying `marks`; the
        watermark in force before the call `before`): the payloads as they are."""
        return payloads

    def _collect(self, records: np.ndarray, marks: np.ndarray) -> Outputs:
        """The windows final at the call's last record, each mapped to the first record that makes it
        final. Called in call order (the feed resolves its futures in offset order)."""
        for table in self.feed.drain():
            starts = table[WINDOW]
            windows = pc.unique(starts).to_pylist()
            for start in windows:
                part = table if len(windows) == 1 else table.filter(pc.equal(starts, start))
                self._open.setdefault(start, []).append(part)
        closed = [(w, self._open.pop(w)) for w in sorted(self._open) if self.spec.final_at(w) <= marks[-1]]
        keys = list(self.window.keys)
        rows = [newest(tables, keys) for w, tables in closed
                if self._floor is None or self.spec.final_at(w) > self._floor]  # at or below: delivered
        if not rows:
            return Outputs.none()
        table = pa.concat_tables(rows, promote_options="permissive") if len(rows) > 1 else rows[0]
        table = self._kept(table.sort_by([(WINDOW, "ascending"), *((k, "ascending") for k in keys)]))
        if not table.num_rows:
            return Outputs.none()
        final = self.spec.final_at(table[WINDOW].to_numpy())
        at = records[np.searchsorted(marks, final, side="left")]
        self.results += table.num_rows
        return Outputs(at, self._texts(table))

    def _kept(self, table: pa.Table) -> pa.Table:
        """The final windows' rows that make results (all of them: the tick example has no HAVING)."""
        return table

    def _texts(self, table: pa.Table) -> pa.Array:
        return result_texts(self.window, self.spec.size_ms, table)

    def restore(self, position: int, params: Params | None = None) -> None:
        """A node resuming at `position` without the state before it: a fresh query (empty state), and the
        windows final at the watermark in force there are not emitted again."""
        wm = control.watermark_of(params.payload) if params is not None else None
        if self.feed.end > self.feed.query_start:
            self.query.stop()
            self._start_query()
        self._floor = wm
        self.watermark = wm

    def _switch(self, pos: int, payload: bytes) -> None:
        raise AssertionError("a window query takes no parameter switch (Nu refuses them)")

    # --- state --------------------------------------------------------------------------------------
    def _store(self) -> tuple[int, int]:
        """Rows and bytes in the query's state store, from its last progress (read at most once a second:
        py4j calls from the status thread)."""
        at, rows, size = self._progress
        if time.monotonic() - at >= 1.0:
            try:
                ops = (self.query.lastProgress or {}).get("stateOperators") or []
                rows = sum(int(o.get("numRowsTotal", 0)) for o in ops)
                size = sum(int(o.get("memoryUsedBytes", 0)) for o in ops)
            except Exception:  # noqa: BLE001 - a status read never fails the node; the watch thread reports
                pass
            self._progress = (time.monotonic(), rows, size)
        return rows, size

    def live_keys(self) -> int:
        return self._store()[0]

    def state_bytes(self) -> int:
        return self._store()[1]


def newest(tables: list[pa.Table], group: list[str]) -> pa.Table:
    """Each group's row from the last of `tables` that has one (update mode: a later commit's row holds
    the group's whole aggregate so far, so it replaces the earlier ones). `tables` hold one window each."""
    if len(tables) == 1:
        return tables[0]  # one commit holds one row per group (Spark's state has one per key)
    if not group:
        return tables[-1]  # one group per window: every commit of the window has it
    table = pa.concat_tables(tables, promote_options="permissive")
    order = pa.array(np.arange(table.num_rows, dtype=np.int64))
    last = (table.append_column("_row", order).group_by(group, use_threads=False)
            .aggregate([("_row", "max")]))
    return table.take(last["_row_max"])
