"""The selection run by Spark Structured Streaming, behind the Operator contract: the node's thin adapter.

Why this shape: Spark runs Python data sources in its own worker processes, so the node cannot hand it
tuples in memory. The node keeps a feed (spark/lazystandby_spark/feed.py) and serves it on loopback gRPC;
the query (spark/lazystandby_spark/query.py) reads ranges of it and reports per range which offsets were
selected. `submit(batch)` appends the batch to the feed and returns a future of its answer: up to
`in_flight_max` tuples wait in the feed, so the query's micro-batches follow one another back to back.

A parameter change (control tuple) stops the query once everything before it is done and starts a new
one with the new predicate at the next offset: the switch happens at one position, on N and N' alike.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from concurrent import futures
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FuturesTimeout
from pathlib import Path

import grpc
import numpy as np
import pyarrow as pa
from lazystandby_spark import query as spark_query
from lazystandby_spark.feed import Feed
from lazystandby_spark.source import PER_TASK as _PER_TASK

from ..config import NodeConfig
from ..core.errors import MalformedRecord
from ..core.messages import Params
from ..core.seq import StreamRegistry
from ..core.tuples import TupleBatch
from ..formats import control
from ..formats.predicate import compile_predicate
from ..v1 import lazystandby_pb2_grpc as pb_grpc
from .base import Operator

log = logging.getLogger(__name__)

_STALL = 120.0  # seconds with tuples waiting and no answer from Spark: the query is stuck
WARMUP_TICK = b"WARMUP,1.0,1,1,X"  # what warms a query up; never part of a node's output


def feed_address(bind: str, advertise: str, port: int) -> str:
    """What Spark's workers are told: the advertised address if it names a port; else the advertised host,
    or the bound one (a wildcard bind: this host's name), with the port the feed got."""
    import socket

    if advertise:
        host, sep, given = advertise.rpartition(":")
        if sep and given not in ("", "0"):
            return advertise
        host = host if sep else advertise
    else:
        host = bind.rpartition(":")[0]
    if host in ("", "0.0.0.0", "[::]", "::"):
        host = socket.gethostname()
    return f"{host}:{port}"


class SparkSelection(Operator):
    """Selection run by Spark Structured Streaming; one query at a time, restarted on parameter change."""

    name = "spark"
    takeover_gather = True
    paces_standby = True  # its feed holds a standby's tuples for spark_standby_hold (lazy())

    def __init__(self, predicate: str, cfg: NodeConfig) -> None:
        compile_predicate(predicate)  # refuse a bad predicate here, with our error, before Spark starts
        self.cfg = cfg
        self.predicate = predicate
        self.feed = self._new_feed()
        # Each start is a new query over a new feed (the node's state comes from the protocol, not Spark's
        # checkpoint), so checkpoints live under a fresh directory, inside spark_checkpoint_dir if given.
        base = cfg.spark_checkpoint_dir or None
        if base:
            Path(base).mkdir(parents=True, exist_ok=True)
        self.workdir = tempfile.mkdtemp(prefix=f"lazystandby-spark-{cfg.name.replace(chr(39), 'p')}-", dir=base)
        # The JVM first: forking it while gRPC threads run is what gRPC warns about, and can lose the gateway.
        self.spark = spark_query.session(cfg.name, master=cfg.spark_master, driver_memory=cfg.spark_driver_memory,
                                         conf=cfg.spark_conf, state_store=cfg.spark_state_store)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                                  options=[("grpc.max_send_message_length", 256 << 20),
                                           ("grpc.max_receive_message_length", 256 << 20)])
        pb_grpc.add_OperatorFeedServicer_to_server(self.feed, self.server)
        port = self.server.add_insecure_port(cfg.spark_feed_bind)
        if not port:
            raise ValueError(f"spark_feed_bind {cfg.spark_feed_bind!r}: the feed cannot listen there")
        self.server.start()
        self.address = feed_address(cfg.spark_feed_bind, cfg.spark_feed_advertise, port)
        self.query = None
        self._closing = threading.Event()
        # Two micro-batches' worth waiting in the feed: Spark starts the next as soon as one ends.
        self.in_flight_max = 2 * cfg.spark_max_rows
        self.generation = 0
        self.switches: list[tuple[int, str]] = []
        self._start_warm()
        threading.Thread(target=self._watch, name=f"{cfg.name}:spark-watch", daemon=True).start()

    def _new_feed(self) -> Feed:
        return Feed()

    def _start_warm(self) -> None:
        """Start the query and warm it up. Spark's first micro-batches are slow (JIT, Python workers); pay
        for them now, not during a failover: one with a task per partition, so each Python worker Spark
        needs is started, then small ones."""
        self._start_query()
        payload = self._warm_payload()
        for rows in (_PER_TASK * max(1, self.cfg.spark_partitions), 100, 100, 100):
            self._wait(self._append(pa.array([payload] * rows, pa.binary())))

    def _warm_payload(self) -> bytes:
        """What warms the query up: a record it reads (its results are never output)."""
        return WARMUP_TICK

    def _start_query(self) -> None:
        self.generation += 1
        self.feed.restart_at_end()
        cfg = self.cfg
        self.query = spark_query.start_selection(
            self.spark, address=self.address, predicate=self.predicate, max_rows=cfg.spark_max_rows,
            partitions=cfg.spark_partitions, checkpoint=f"{self.workdir}/checkpoint-{self.generation}",
            trigger=cfg.spark_trigger, name=f"selection_{self.generation}")
        log.info("%s: Spark query %d started with predicate %r", self.cfg.name, self.generation, self.predicate)

    def _wait(self, fut: Future) -> np.ndarray:
        """The answer of `fut`, failing if the query died or Spark answered nothing for `_STALL` seconds."""
        quiet_since = time.monotonic()
        answered = self.feed.done_through
        while True:
            try:
                return fut.result(timeout=1.0)
            except FuturesTimeout:
                self._check_query()
                if self.feed.done_through != answered:
                    answered, quiet_since = self.feed.done_through, time.monotonic()
                elif time.monotonic() - quiet_since > _STALL:
                    raise TimeoutError(f"{self.cfg.name}: Spark answered nothing for {_STALL:.0f} s "
                                       f"(answered through feed offset {answered})") from None

    def _check_query(self) -> None:
        exc = self.query.exception() if self.query is not None and not self.query.isActive else None
        if exc is not None:
            error = RuntimeError(f"Spark query failed: {exc}")
            self.feed.fail(error)
            raise error

    def _watch(self) -> None:
        """Fails what waits in the feed if the query dies, or the JVM itself (py4j cannot reach it: killed,
        crashed): the node would otherwise wait for ever, or until OperatorWatch's operator_stall_max."""
        while not self._closing.wait(1.0):
            try:
                self._check_query()
            except RuntimeError:
                log.exception("%s: the Spark query died", self.cfg.name)
                return
            except Exception as e:  # py4j's errors: the gateway's connection is gone, and the JVM with it
                if self._closing.is_set():
                    return
                error = RuntimeError(f"Spark's JVM cannot be reached: {type(e).__name__}: {e}")
                self.failure = error
                self.feed.fail(error)
                log.error("%s: %s", self.cfg.name, error)
                return

    def _append(self, payloads: pa.BinaryArray) -> Future:
        first = self.feed.append(payloads)
        return self.feed.answer(first, first + len(payloads))

    def input_fault(self, error: BaseException) -> bool:
        # A failed micro-batch ends the streaming query itself: no call can be retried on it, so every
        # failure replaces the node. Admitted ticks never fail it (try_cast over fields the schema bounds).
        return False

    def submit(self, batch: TupleBatch) -> Future:
        if not (batch.streams == StreamRegistry.CONTROL).any():
            return self._append(batch.payloads)
        # A control tuple: everything before it is answered, then the query restarts with the new
        # predicate at the next offset. Rare, so done in place.
        done: Future = Future()
        done.set_result(self.process(batch))
        return done

    def process(self, batch: TupleBatch) -> np.ndarray:
        out: list[np.ndarray] = []
        seg_start = 0
        controls = np.flatnonzero(batch.streams == StreamRegistry.CONTROL).tolist()
        for i in [*controls, len(batch)]:
            if i > seg_start:
                out.append(self._wait(self._append(batch.payloads.slice(seg_start, i - seg_start))) + seg_start)
            if i < len(batch):
                self._switch(batch.first + i, batch.payload(i))
            seg_start = i + 1
        return np.concatenate(out) if out else np.empty(0, np.int64)

    def lazy(self, on: bool) -> None:
        # Up to spark_standby_hold seconds of backup wait in the feed, then one micro-batch takes them all:
        # the standby's JVM does a fraction of the primary's work, and at takeover one micro-batch is left.
        self.feed.pace(self.cfg.spark_standby_hold if on else 0.0, self.cfg.spark_max_rows)

    def restore(self, position: int, params: Params | None = None) -> None:
        if params is not None and (not self.switches or self.switches[-1][0] < params.pos):
            self._switch(params.pos, params.payload)

    def _switch(self, pos: int, payload: bytes) -> None:
        try:
            text = control.decode(payload)
        except MalformedRecord:  # ignored identically on N and N', as the Python operator does
            return
        if self.query is not None:
            self._wait(self.feed.answer(self.feed.end, self.feed.end))  # everything before the switch
            self.query.stop()
        self.predicate = text
        self.switches.append((pos, text))
        self._start_query()

    def close(self) -> None:
        self._closing.set()
        try:
            if self.query is not None:
                self.query.stop()
            self.spark.stop()
        finally:
            self.server.stop(grace=0)
            shutil.rmtree(self.workdir, ignore_errors=True)
