"""The peer a user would pick instead of Lazy Standby: one Spark Structured Streaming query that reads the
source topics directly, applies the same selection, and writes `topic,seq,source timestamp ms` to a results
topic, with a checkpoint as its only fault tolerance. Killed, it is restarted from the checkpoint; the
benchmark times that.

    python spark/direct_query.py --bootstrap 127.0.0.1:9092 --prefix ls. --checkpoint run/spark-direct \
        [--predicate "price > 100"] [--available-now] [--max-rows 200000]

With `--pipeline FILE` the query is the pipeline's (its table's topic, its SQL, written by lazystandby_spark.sql
as the Spark operator writes it), its results as JSON in `--out-topic`: what a Spark user would run instead.

Prints `started <epoch seconds>` when the query runs and, with --available-now, `done <records>` at the end,
then `steady <records> <seconds>`: the records after the first micro-batch and the time from its end to the
last one's (session start and the first micro-batch excluded, as for the pipeline it is compared with).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def connector_jars() -> str:
    return subprocess.run(["bash", str(ROOT / "spark" / "resolve.sh")], check=True, capture_output=True,
                          text=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="spark-direct")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--prefix", default="ls.")
    ap.add_argument("--streams", default="I1,I2")
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--predicate", default="price > 100")
    ap.add_argument("--out-topic", default="")
    ap.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    ap.add_argument("--trigger-ms", type=int, default=0, help="0: the next micro-batch as soon as one ends")
    ap.add_argument("--max-rows", type=int, default=0, help="most records per micro-batch (0: no limit)")
    ap.add_argument("--pipeline", default="", help="a pipeline file: its table's topic and its SQL")
    a = ap.parse_args(argv)
    plan = None
    if a.pipeline:
        from lazystandby.formats.pipeline import read_pipeline

        plan = read_pipeline(a.pipeline).plan
        if plan.top is not None:
            # Structured Streaming ranks no rows of a streaming aggregation (a rank needs a batch's window).
            print(f"spark-direct: {a.pipeline}: QUALIFY's rank has no Spark Structured Streaming form",
                  file=sys.stderr, flush=True)
            return 2

    from lazystandby_spark.query import CHECKPOINT_FILE_MANAGER, driver_settings
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from lazystandby.formats.ticks import spark_columns

    spark = (SparkSession.builder.master("local[2]").appName("spark-direct")
             .config("spark.jars", connector_jars())
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "1").config("spark.driver.memory", "1g")
             .config("spark.sql.streaming.pollingDelay", "5ms")
             # the JVM settings of the pipeline's Spark sessions: a comparison on equal terms
             .config(map=driver_settings())
             .config("spark.sql.streaming.checkpointFileManagerClass", CHECKPOINT_FILE_MANAGER)
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    topics = ",".join(f"{a.prefix}{s}" for s in a.streams.split(","))
    if plan is not None:
        topics = plan.schema.topic
    src = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", a.bootstrap)
           .option("subscribe", topics).option("startingOffsets", "earliest")
           .option("failOnDataLoss", "true"))
    if a.max_rows:
        src = src.option("maxOffsetsPerTrigger", str(a.max_rows))
    src = src.load()
    if plan is not None:
        out = planned(src, plan)
    else:
        # The same parse as the pipeline's Spark operator, generated from the one tick schema.
        ticks = src.selectExpr("topic", "offset", "timestamp", *spark_columns("CAST(value AS STRING)"))
        # The same predicate language is a subset of Spark SQL, so the expression runs unchanged.
        out = ticks.where(a.predicate).select(
            F.concat_ws(",", F.col("topic"), (F.col("offset") + 1).cast("string"),
                        F.unix_millis(F.col("timestamp")).cast("string")).alias("value"))
    w = (out.writeStream.format("kafka").option("kafka.bootstrap.servers", a.bootstrap)
         .option("topic", a.out_topic or f"{a.prefix}results-spark-direct")
         .option("checkpointLocation", a.checkpoint))
    w = w.trigger(availableNow=True) if a.available_now else (
        w.trigger(processingTime=f"{a.trigger_ms} milliseconds") if a.trigger_ms else w)
    q = w.start()
    print(f"started {time.time():.3f}", flush=True)
    q.awaitTermination()
    if a.available_now:
        batches = [p for p in q.recentProgress if p["numInputRows"] > 0]
        print(f"done {sum(p['numInputRows'] for p in batches)}", flush=True)
        if len(batches) > 1:
            def end(p) -> float:
                return datetime.fromisoformat(p["timestamp"]).timestamp() + p["durationMs"]["triggerExecution"] / 1000

            print(f"steady {sum(p['numInputRows'] for p in batches[1:])} {end(batches[-1]) - end(batches[0]):.3f}",
                  flush=True)
    spark.stop()
    return 0


def planned(src, plan):
    """A pipeline's plan over the Kafka source `src`: records parsed as the Spark operator parses them,
    the selection or Spark's own windowed aggregation (its watermark the table's delay), results as JSON."""
    from lazystandby_spark.sql import columns, event_ms, record, sql
    from pyspark.sql import functions as F

    rows = (src.selectExpr(f"{record(plan.schema, 'CAST(value AS STRING)')} AS _r")
            .selectExpr(*columns(plan.schema, plan.input_columns)))
    if plan.where is not None:
        rows = rows.where(sql(plan.where))
    if not plan.stateful:
        out = rows.selectExpr(*(f"{sql(o.expr)} AS `{o.name}`" for o in plan.outputs))
        return out.select(F.to_json(F.struct("*")).alias("value"))
    spec = plan.spec
    rows = (rows.withColumn("_ev", F.timestamp_millis(F.expr(event_ms(plan))))
            .withWatermark("_ev", f"{spec.lateness_ms} milliseconds"))
    fns = {"count": F.count, "sum": F.sum, "min": F.min, "max": F.max, "avg": F.avg}
    aggs = [(F.count(F.lit(1)) if a.arg is None else fns[a.fn](F.expr(sql(a.arg)))).alias(f"_agg{i}")
            for i, a in enumerate(plan.aggregates)]
    window = F.window("_ev", f"{spec.size_ms} milliseconds", f"{spec.slide_ms} milliseconds")
    grouped = rows.groupBy(window.alias("_w"), *(F.expr(sql(k.expr)).alias(k.name) for k in plan.keys)).agg(*aggs)
    named = grouped.selectExpr("_w.start AS window_start", "_w.end AS window_end", *(f"`{k.name}`" for k in plan.keys),
                               *(f"_agg{i}" for i in range(len(plan.aggregates))))
    if plan.having is not None:
        named = named.where(sql(plan.having))
    out = named.selectExpr(*(f"{sql(o.expr)} AS `{o.name}`" for o in plan.outputs))
    return out.select(F.to_json(F.struct("*")).alias("value"))


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
