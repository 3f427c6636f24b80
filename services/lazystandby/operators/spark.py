"""The selection as a Spark Structured Streaming query (PySpark), behind the same Operator contract.

Why this shape: Spark runs Python data sources in its own worker processes, so the node cannot hand it
tuples in memory. The node keeps a feed (contiguous offsets 0, 1, ...) and serves it on loopback gRPC;
the query reads ranges of it through a Python streaming data source, parses the ticks with Spark SQL,
applies the predicate (a Spark SQL expression: the same text the Python operator understands), and its
sink reports, per range, which offsets were selected. `process(batch)` appends the batch to the feed and
waits for its ranges: results come back by offset, so N and N' select exactly the same tuples.

A parameter change (control tuple) stops the query once everything before it is done and starts a new
one with the new predicate at the next offset: the switch happens at one position, on N and N' alike.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc

from ..config import NodeConfig
from ..core.seq import StreamRegistry
from ..core.tuples import TupleBatch
from ..v1 import lazystandby_pb2 as pb
from ..v1 import lazystandby_pb2_grpc as pb_grpc
from .base import Operator
from .predicate import compile_predicate

log = logging.getLogger(__name__)

PARSE = [
    "off", "rstart", "marker",
    "split(payload, ',')[0] AS symbol",
    "try_cast(split(payload, ',')[1] AS DOUBLE) AS price",
    "try_cast(split(payload, ',')[2] AS BIGINT) AS volume",
    "try_cast(split(payload, ',')[3] AS BIGINT) AS ts",
    "split(payload, ',')[4] AS venue",
]


class Feed(pb_grpc.OperatorFeedServicer):
    """Tuples handed to Spark, by feed offset, and the results that came back."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.base = 0  # offset of payloads[0]
        self.payloads: list[str] = []
        self.query_start = 0
        self.done: dict[int, int] = {}  # range start -> end, not yet folded into done_through
        self.done_through = 0  # every offset below is answered
        self.selected: set[int] = set()

    @property
    def end(self) -> int:
        return self.base + len(self.payloads)

    def append(self, payloads: list[str]) -> int:
        with self.cond:
            first = self.end
            self.payloads.extend(payloads)
            self.cond.notify_all()
            return first

    def wait_done(self, end: int, timeout: float) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.done_through >= end, timeout):
                raise TimeoutError(f"Spark did not answer offsets up to {end} within {timeout}s "
                                   f"(answered through {self.done_through})")

    def take_selected(self, start: int, end: int) -> list[int]:
        with self.cond:
            out = sorted(o for o in self.selected if start <= o < end)
            self.selected.difference_update(out)
            # What Spark answered is no longer needed in the feed.
            drop = self.done_through - self.base
            if drop > 0:
                del self.payloads[:drop]
                self.base += drop
            return out

    # --- the gRPC side, called from Spark's Python workers -----------------------------------------
    def Latest(self, request, context):
        with self.cond:
            return pb.FeedState(start=self.query_start, end=self.end)

    def Fetch(self, request, context):
        with self.cond:
            if request.start < self.base or request.end > self.end:
                context.abort(grpc.StatusCode.OUT_OF_RANGE,
                              f"feed holds {self.base}..{self.end}; asked {request.start}..{request.end}")
            return pb.FetchReply(payloads=self.payloads[request.start - self.base : request.end - self.base])

    def Emit(self, request, context):
        with self.cond:
            for s, e in zip(request.range_starts, request.range_ends, strict=True):
                if e <= self.done_through:
                    continue  # a retried task: already answered
                self.done[s] = e
            self.selected.update(o for o in request.selected if o >= self.done_through)
            while self.done_through in self.done:
                self.done_through = self.done.pop(self.done_through)
            self.cond.notify_all()
        return pb.EmitReply()


class SparkSelection(Operator):
    """Selection run by Spark Structured Streaming; one query at a time, restarted on parameter change."""

    name = "spark"

    def __init__(self, predicate: str, cfg: NodeConfig) -> None:
        compile_predicate(predicate)  # refuse a bad predicate here, with our error, before Spark starts
        self.cfg = cfg
        self.predicate = predicate
        self.feed = Feed()
        # Each start is a new query over a new feed (the node's state comes from the protocol, not Spark's
        # checkpoint), so checkpoints live under a fresh directory, inside spark_checkpoint_dir if given.
        base = cfg.spark_checkpoint_dir or None
        if base:
            Path(base).mkdir(parents=True, exist_ok=True)
        self.workdir = tempfile.mkdtemp(prefix=f"lazystandby-spark-{cfg.name.replace(chr(39), 'p')}-", dir=base)
        # The JVM first: forking it while gRPC threads run is what gRPC warns about, and once lost the gateway.
        self.spark = self._session()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                                  options=[("grpc.max_send_message_length", 256 << 20),
                                           ("grpc.max_receive_message_length", 256 << 20)])
        pb_grpc.add_OperatorFeedServicer_to_server(self.feed, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.address = f"127.0.0.1:{port}"
        self.query = None
        self.generation = 0
        self.batches = 0
        self.batch_ms: list[float] = []
        self.switches: list[tuple[int, str]] = []
        self._start_query()
        # Spark's first micro-batch is slow (JIT, Python workers); pay for it now, not during a failover.
        # Enough tuples for every partition, so each Python worker Spark needs is started here too.
        self._run(["WARMUP,1.0,1,1,X"] * (1000 * max(1, cfg.spark_partitions)))
        self.batches, self.batch_ms = 0, []

    def _session(self):
        from pyspark.sql import SparkSession

        from .spark_feed import FeedDataSource

        cfg = self.cfg
        # Spark's Python workers import this package (the data source); they inherit the JVM's environment.
        pkg_root = str(Path(__file__).resolve().parents[2])
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if pkg_root not in paths:
            os.environ["PYTHONPATH"] = os.pathsep.join([pkg_root, *paths])
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = (SparkSession.builder.master(cfg.spark_master).appName(f"lazystandby-{cfg.name}")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "1")
                 .config("spark.driver.memory", cfg.spark_driver_memory)
                 .config("spark.sql.streaming.pollingDelay", "5ms")
                 .config("spark.python.worker.reuse", "true")
                 .config("spark.sql.ansi.enabled", "true")
                 .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"]))
        try:
            spark = builder.getOrCreate()
        except Exception as e:  # a gateway that died at birth (seen once under load): one more try
            log.warning("%s: Spark did not start (%s); trying once more", cfg.name, e)
            time.sleep(2)
            spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
        spark.dataSource.register(FeedDataSource)
        return spark

    def _start_query(self) -> None:
        self.generation += 1
        with self.feed.cond:
            self.feed.query_start = self.feed.end
        df = (self.spark.readStream.format("lazystandby_feed").option("address", self.address)
              .option("maxRows", str(self.cfg.spark_max_rows)).option("partitions", str(self.cfg.spark_partitions))
              .load())
        out = df.selectExpr(*PARSE).where(f"marker OR ({self.predicate})").select("off", "rstart", "marker")
        # The sink reads rstart/marker from the rows; give it the reader's full schema back.
        out = out.selectExpr("off", "rstart", "marker", "CAST(NULL AS STRING) AS payload")
        ckpt = f"{self.workdir}/checkpoint-{self.generation}"
        self.query = (out.writeStream.format("lazystandby_feed").option("address", self.address)
                      .option("checkpointLocation", ckpt).trigger(processingTime=self.cfg.spark_trigger)
                      .queryName(f"selection_{self.generation}").start())
        log.info("%s: Spark query %d started with predicate %r", self.cfg.name, self.generation, self.predicate)

    def _run(self, payloads: list[str]) -> list[int]:
        t0 = time.monotonic()
        first = self.feed.append(payloads)
        end = first + len(payloads)
        deadline = 120.0
        while True:
            try:
                self.feed.wait_done(end, 1.0)
                break
            except TimeoutError:
                exc = self.query.exception() if self.query is not None and not self.query.isActive else None
                if exc is not None:
                    raise RuntimeError(f"Spark query failed: {exc}") from None
                deadline -= 1.0
                if deadline <= 0:
                    raise
        self.batches += 1
        self.batch_ms.append((time.monotonic() - t0) * 1000)
        log.debug("%s: Spark answered %d tuples in %.0f ms", self.cfg.name, len(payloads), self.batch_ms[-1])
        return [o - first for o in self.feed.take_selected(first, end)]

    def process(self, batch: TupleBatch) -> list[int]:
        out: list[int] = []
        seg_start = 0
        streams = batch.streams
        for i in [*(i for i, s in enumerate(streams) if s == StreamRegistry.CONTROL), len(batch)]:
            if i > seg_start:
                seg = [p.decode("utf-8", "replace") for p in batch.payloads[seg_start:i]]
                out.extend(seg_start + j for j in self._run(seg))
            if i < len(batch):
                self._switch(batch.first + i, batch.payloads[i])
            seg_start = i + 1
        return out

    def _switch(self, pos: int, payload: bytes) -> None:
        import json

        try:
            text = json.loads(payload)["predicate"]
            compile_predicate(text)
        except Exception:  # ignored identically on N and N', as the Python operator does
            return
        if self.query is not None:
            self.query.stop()
        self.predicate = text
        self.switches.append((pos, text))
        self._start_query()

    def close(self) -> None:
        try:
            if self.query is not None:
                self.query.stop()
            self.spark.stop()
        finally:
            self.server.stop(grace=0)
            shutil.rmtree(self.workdir, ignore_errors=True)
