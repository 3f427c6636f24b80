"""The keyed event-time window aggregation run by Spark Structured Streaming (`Query.kind == "window"`).

The aggregation is Spark's own: `groupBy(window(ts), keys).agg(...)` in append mode, its state in
Spark's state store (`spark_state_store`: hdfs or rocksdb). What makes it deterministic on N and N', and
equal to the Python operator (operators/window.py) result for result:

- Event time follows the link order. Each watermark record enters the query with the watermark it
  carries as its event time, and the feed (lazystandby_spark.feed.WindowFeed) ends micro-batches only
  just past records, so Spark's watermark is the link order's at every record, however the inputs were
  cut into calls or micro-batches.
- Spark emits a window in the micro-batch after the one whose watermark closed it. The feed knows when
  every window closed by the records of a call is out; the call's outputs are the windows final at its
  last record's watermark, each mapped to the first record whose watermark makes it final: the Python
  operator's mapping.
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
        self._pending: list[pa.Table] = []  # results out, final at a record not yet collected
        self.results = 0
        self.unparseable = 0
        self._progress: tuple[float, int, int] = (0.0, 0, 0)  # (when read, rows, bytes) of the state store
        super().__init__(query.where or "true", cfg)

    def _new_feed(self) -> WindowFeed:
        return WindowFeed(max_rows=self.cfg.spark_max_rows)

    def _start_query(self, *, where: str | None = None) -> None:
        self.generation += 1
        self.feed.restart_at_end()
        self._pending = []
        query = self.window if where is None else replace(self.window, where=where)
        self.query = spark_query.start_window(
            self.spark, query, address=self.address, partitions=self.cfg.spark_partitions,
            checkpoint=f"{self.workdir}/checkpoint-{self.generation}", trigger=self.cfg.spark_trigger,
            name=f"window_{self.generation}")
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
        first = self.feed.append_cut(payloads, records)
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

    def _collect(self, records: np.ndarray, marks: np.ndarray) -> Outputs:
        """The windows final at the call's last record, each mapped to the first record that makes it
        final. Called in call order (the feed resolves its futures in offset order)."""
        rows = [*self._pending, *self.feed.drain()]
        self._pending = []
        if not rows:
            return Outputs.none()
        table = pa.concat_tables(rows, promote_options="permissive") if len(rows) > 1 else rows[0]
        table = table.sort_by([(WINDOW, "ascending"), *((k, "ascending") for k in self.window.keys)])
        final = self.spec.final_at(table[WINDOW].to_numpy())
        now = final <= marks[-1]
        if not now.all():
            self._pending = [table.filter(pa.array(~now))]
        if self._floor is not None:
            now &= final > self._floor
        table, final = table.filter(pa.array(now)), final[now]
        if not table.num_rows:
            return Outputs.none()
        at = records[np.searchsorted(marks, final, side="left")]
        self.results += table.num_rows
        return Outputs(at, result_texts(self.window, self.spec.size_ms, table))

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

