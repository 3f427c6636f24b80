"""`make bench-spark-cycle`: what one result of the Spark window query costs in micro-batches, beside the
same aggregation with Spark's own source and sink.

A Spark standby's takeover ends when the windows closed by Nu's tail are out. The query runs in update
mode, so they are out once the micro-batch that read the tail has run: a takeover waits for the
micro-batch in flight and the one that reads the tail, which makes the micro-batch's cost the Spark
failover's floor. This bench measures that cost on this machine, one query alone, nothing else running:

- `spark_window_call_ms`: the node's operator (operators/spark_window.SparkWindow, the `window` query,
  Spark's state store) answering a call of CALL_TICKS ticks with a watermark record every RECORD_EVERY
  positions: the median time from submit to the call's results (the micro-batch that reads the call);
  `spark_window_data_batch_ms` and `spark_window_emit_batch_ms` the medians of Spark's own
  `triggerExecution` for micro-batches that read rows and for those that read none (Spark evicting
  closed windows; null when none ran).
- `spark_jvm_batch_ms`: the same aggregation (one-second tumbling windows by symbol, count, avg and max
  of price where price > 100) over Spark's `rate` source at RATE rows/s into the `noop` sink: the median
  `triggerExecution` of its micro-batches, what Spark costs with no Python on the path.
- `spark_window_batch_over_jvm`: the data micro-batch's cost over the JVM's: what the node's feed (a Python
  data source read and written by Spark's Python workers) adds per micro-batch.

Results: run/bench/spark-cycle.json (docs/bench with --publish), a JSON summary as the last line.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

import numpy as np

from lazystandby.harness import results
from lazystandby.harness.operator_procs import no_process_left

from .harness import machine_keys, write_details

CALL_TICKS = 5_000  # one second of make demo-window's load
RECORD_EVERY = 500
RATE = 5_000
CALLS = 12
JVM_SECONDS = 30.0


def _say(what: str) -> None:
    print(f"bench-spark-cycle: {what}", file=sys.stderr, flush=True)


def batch_medians(progress: list[dict]) -> dict:
    """Median `triggerExecution` (ms) of the micro-batches that read rows and of those that read none
    (None when there were none)."""
    def med(ps):
        return round(statistics.median(p["durationMs"]["triggerExecution"] for p in ps), 1) if ps else None

    return {"data": med([p for p in progress if p.get("numInputRows", 0) > 0]),
            "empty": med([p for p in progress if p.get("numInputRows", 0) == 0])}


def link_order(ticks: int, every: int):
    """`ticks` generated ticks in the link order Nu gives them, a watermark record every `every` positions."""
    from lazystandby.core.seq import StreamRegistry
    from lazystandby.core.tuples import TupleBatch
    from lazystandby.core.watermarks import WatermarkPlacer
    from lazystandby.core.windows import WindowSpec
    from lazystandby.formats import control
    from lazystandby.formats.query import parse_query
    from lazystandby.sources.generator import interleave

    q = parse_query("window")
    placer = WatermarkPlacer(WindowSpec(q.size_ms, q.slide_ms, q.lateness_ms), every)
    generated = list(interleave(["I1", "I2"], ticks, 11))
    streams, seqs, payloads = [], [], []
    for lo in range(0, len(generated), every):
        poll = generated[lo:lo + every]
        placed = placer.place(1 + len(streams), np.array([int(p.split(b",")[3]) for _, _, p in poll]))
        marks = iter(placed.watermarks)
        for k in placed.order.tolist():
            if k < 0:
                streams.append(StreamRegistry.CONTROL)
                seqs.append(len(streams))  # a record's sequence number is its position
                payloads.append(control.encode_watermark(next(marks)))
            else:
                streams.append(1 if poll[k][0] == "I1" else 2)
                seqs.append(poll[k][1])
                payloads.append(poll[k][2])
    return q, TupleBatch(1, streams, seqs, payloads)


def node_cycle(calls: int) -> dict:
    """The node's Spark window operator answering `calls` calls of CALL_TICKS ticks, one at a time."""
    from lazystandby.config import NodeConfig
    from lazystandby.operators.spark_window import SparkWindow

    q, batch = link_order(CALL_TICKS * (calls + 1), RECORD_EVERY)
    op = SparkWindow(q, NodeConfig(name="bench", operator="spark", query="window"))
    try:
        seen = len(op.query.recentProgress)
        took = []
        for i in range(calls):
            lo = batch.first + i * CALL_TICKS
            t = time.monotonic()
            op.submit(batch.slice(lo, lo + CALL_TICKS)).result(timeout=120)
            took.append((time.monotonic() - t) * 1000)
        progress = op.query.recentProgress[seen:]
    finally:
        op.close()
    return {"call_ms": [round(x, 1) for x in took], "call_ms_median": round(statistics.median(took), 1),
            "batches": batch_medians(progress), "micro_batches": len(progress)}


def jvm_cycle(seconds: float) -> dict:
    """The same aggregation over Spark's rate source into the noop sink, for `seconds`."""
    from lazystandby_spark import query as spark_query
    from pyspark.sql import functions as F

    spark = spark_query.session("bench-jvm", master="local[2]", driver_memory="1g")
    try:
        df = (spark.readStream.format("rate").option("rowsPerSecond", RATE).option("numPartitions", 1).load()
              .withColumn("symbol", F.concat(F.lit("S"), (F.col("value") % 50).cast("string")))
              .withColumn("price", (F.col("value") % 200).cast("double")))
        out = (df.withWatermark("timestamp", "0 seconds").where("price > 100")
               .groupBy(F.window("timestamp", "1 second"), "symbol")
               .agg(F.count(F.lit(1)), F.avg("price"), F.max("price")))
        with tempfile.TemporaryDirectory(prefix="bench-jvm-") as ckpt:
            query = (out.writeStream.format("noop").outputMode("update").option("checkpointLocation", ckpt)
                     .trigger(processingTime="0 seconds").start())
            time.sleep(seconds)
            progress = [p for p in query.recentProgress if p["batchId"] >= 3]  # the first compile the plan
            query.stop()
    finally:
        spark.stop()
    return {"batches": batch_medians(progress), "micro_batches": len(progress)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench-spark-cycle", description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=CALLS, help="calls timed on the node's operator")
    ap.add_argument("--publish", action="store_true", help="write into docs/bench, not run/bench")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    _say("the node's Spark window operator")
    node = node_cycle(a.calls)
    _say("the same aggregation, Spark's rate source and noop sink")
    jvm = jvm_cycle(JVM_SECONDS)
    data, pure = node["batches"]["data"], jvm["batches"]["data"]
    summary = {
        "spark_window_call_ms": node["call_ms_median"],
        "spark_window_data_batch_ms": data, "spark_window_emit_batch_ms": node["batches"]["empty"],
        "spark_jvm_batch_ms": pure,
        "spark_window_batch_over_jvm": round(data / pure, 2) if data and pure else None,
        "call_ticks": CALL_TICKS, "record_every": RECORD_EVERY, "jvm_rows_per_s": RATE,
        **machine_keys(t0),
    }
    out = write_details("spark-cycle.json", a.publish, {"summary": summary, "node": node, "jvm": jvm})
    print(f"details: {out}", file=sys.stderr)
    print(results.dumps("bench-spark-cycle", summary))
    return 0


if __name__ == "__main__":
    with no_process_left():
        sys.exit(main())
