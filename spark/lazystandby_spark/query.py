"""The selection as a Spark Structured Streaming query over a node's feed.

The query reads ranges of the feed through the Python data source (source.py), parses the ticks with
Spark SQL expressions generated from the one tick schema (formats/ticks.py), applies the predicate (a Spark
SQL expression: the same text the Python operator understands), and its sink reports per range which
offsets were selected. One marker row per range reports ranges the filter emptied.
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import lazystandby
import lazystandby_spark
from lazystandby.formats.ticks import spark_columns

log = logging.getLogger(__name__)

FORMAT = "lazystandby_feed"
JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
CHECKPOINT_FILE_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


def worker_python_path() -> list[str]:
    """Where Spark's Python workers find this package and `lazystandby` (they inherit the JVM's
    environment, not the driver's sys.path)."""
    return [str(Path(m.__file__).resolve().parents[1]) for m in (lazystandby, lazystandby_spark)]


def session(name: str, *, master: str, driver_memory: str, conf: tuple[str, ...] = (), state_store: str = "hdfs"):
    """A Spark session for one node, with the feed's data source registered; a window query keeps its state
    in `state_store` (STATE_STORES). `conf` (key=value items) comes after our settings, so a user's setting
    wins."""
    from pyspark.sql import SparkSession

    from .source import FeedDataSource

    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join([*(p for p in worker_python_path() if p not in paths), *paths])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName(f"lazystandby-{name}")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "1")
               .config("spark.driver.memory", driver_memory)
               .config("spark.sql.streaming.pollingDelay", "5ms")
               .config("spark.python.worker.reuse", "true")
               .config("spark.sql.ansi.enabled", "true")
               # A TIMESTAMP without a zone (ISO-8601 text in a record) is read in UTC, as the Python operator reads it.
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
               # The node's state comes from the protocol, not from this checkpoint; what matters is what
               # each micro-batch pays to write it. The default (FileContext) manager, without Hadoop's native
               # library, starts a process for each readlink and chmod, which makes the offset and commit
               # logs most of an idle query's micro-batch; this one writes them without a process.
               .config("spark.sql.streaming.checkpointFileManagerClass", CHECKPOINT_FILE_MANAGER)
               # A JVM sharing two cores with another and four nodes: C2's compiler threads and G1's
               # concurrent ones cost more than they save here: fewer cores at a given rate, a higher rate
               # saturated (docs/benchmarks.md, the Spark operator). The driver's: driver_settings.
               .config("spark.executor.extraJavaOptions", JVM_OPTIONS)
               .config("spark.sql.streaming.stateStore.providerClass", STATE_STORES[state_store])
               .config(map=driver_settings()))
    for item in conf:
        key, _, value = item.partition("=")
        builder = builder.config(key.strip(), value.strip())
    try:
        spark = builder.getOrCreate()
    except Exception as e:  # a gateway that dies at birth, which a loaded machine can cause: one more try
        log.warning("%s: Spark did not start (%s); trying once more", name, e)
        time.sleep(2)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if not master.startswith("local"):
        # Executors on other hosts have neither package: ship both (PYTHONPATH above serves a worker on
        # this host; the zip, any worker).
        spark.sparkContext.addPyFile(str(package_zip()))
    spark.dataSource.register(FeedDataSource)
    return spark


def driver_settings() -> dict[str, str]:
    """The driver's JVM options (JVM_OPTIONS), and where its scratch goes (a local master's blocks too):
    Python's temporary directory (TMPDIR, else the system's). Java ignores TMPDIR, and a driver killed
    with -9 leaves its scratch behind: whoever sets TMPDIR finds it there, not in /tmp. The path is quoted
    as Spark splits Java options."""
    tmp = tempfile.gettempdir()
    return {"spark.driver.extraJavaOptions": f"{JVM_OPTIONS} {shlex.quote(f'-Djava.io.tmpdir={tmp}')}",
            "spark.local.dir": tmp}


def package_zip() -> Path:
    """`lazystandby` and `lazystandby_spark` in one zip, as Spark's pyFiles want them."""
    dest = Path(tempfile.mkdtemp(prefix="lazystandby-pyfiles-")) / "lazystandby-packages.zip"
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        for module in (lazystandby, lazystandby_spark):
            pkg = Path(module.__file__).resolve().parent
            for f in sorted(pkg.rglob("*.py")):
                if "__pycache__" not in f.parts:
                    z.write(f, f.relative_to(pkg.parent))
    return dest


def _active(spark) -> None:
    """Make `spark` the calling thread's active session on the JVM side. Spark looks a Python data source
    up (the feed's sink, at `start()`) in the thread's active session only, and a Python thread that never
    had one (a node's operator loop restoring its query) found none: DATA_SOURCE_NOT_FOUND, and the node
    could not rejoin as a standby. PySpark's createDataFrame does the same before it reads."""
    from pyspark.sql import SparkSession

    SparkSession._get_j_spark_session_class(spark._jvm).setActiveSession(spark._jsparkSession)


def start_selection(spark, *, address: str, predicate: str, max_rows: int, partitions: int, checkpoint: str,
                    trigger: str, name: str):
    """Start the selection over the feed at `address`; returns the running StreamingQuery."""
    _active(spark)
    df = (spark.readStream.format(FORMAT).option("address", address).option("maxRows", str(max_rows))
          .option("partitions", str(partitions)).load())
    parsed = df.selectExpr("off", "rstart", "marker", *spark_columns("payload"))
    out = parsed.where(f"marker OR ({predicate})").select("off", "rstart", "marker")
    # The sink reads rstart/marker from the rows; give it the reader's full schema back.
    out = out.selectExpr("off", "rstart", "marker", "CAST(NULL AS STRING) AS payload")
    return (out.writeStream.format(FORMAT).option("address", address).option("checkpointLocation", checkpoint)
            .trigger(processingTime=trigger).queryName(name).start())


STATE_STORES = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}


def start_window(spark, query, *, address: str, partitions: int, checkpoint: str, trigger: str,
                 name: str, on_batch):
    """Start the window aggregation `query` (formats/query.Query) over the feed at `address`: Spark's own
    streaming aggregation, its state in Spark's state store. Returns the running StreamingQuery.

    Event time is a tick's `ts`, and a watermark record's event time is the watermark it carries: Spark's
    watermark (the largest event time read, less the lateness) is then the link order's at every record,
    and the feed cuts micro-batches only just past records (feed.WindowFeed). Each micro-batch gives
    `on_batch` the groups it changed (update mode), and the node takes a window as final once its record
    was read (core/windows.WindowSpec.final_at); Spark evicts it in a later micro-batch. The rows carry
    the window start (ms), the keys and the partial aggregates of operators/window.partials; the node
    formats them."""
    from pyspark.sql import functions as F

    from lazystandby.formats.ticks import spark_exact
    from lazystandby.operators.window import WINDOW, partials

    _active(spark)
    # The feed cuts each micro-batch (at most max_rows, at a record), so the reader takes what it offers.
    df = (spark.readStream.format(FORMAT).option("address", address).option("maxRows", str(1 << 62))
          .option("partitions", str(partitions)).load())
    record = "startswith(payload, '{\"watermark\": ')"
    # The watermark is the record's first key (formats/control.encode_watermark); the streams' state follows.
    mark = f"CASE WHEN {record} THEN try_cast(regexp_extract(payload, '^[{{]\"watermark\": ([0-9]+)', 1) AS BIGINT) END"
    parts = partials(query)[1:]  # after the count
    columns = sorted({column for _, column, _ in parts})
    ticks = (df.where("NOT marker")
             .selectExpr(f"{mark} AS _mark", *spark_columns("payload"),
                         *(f"{spark_exact(c)} AS _x_{c}" for c in columns))
             .withColumn("_ev", F.timestamp_millis(F.coalesce(F.col("_mark"), F.col("ts"))))
             .withWatermark("_ev", f"{query.lateness_ms} milliseconds")
             .where(f"_mark IS NULL AND ts IS NOT NULL AND ({query.where or 'true'})"))
    fn = {"sum": F.sum, "min": F.min, "max": F.max}
    aggs = [F.count(F.lit(1)).alias("_n")]
    for stored, column, f in parts:
        aggs.append(fn[f](F.col(f"_x_{column}")).alias(stored))
    window = F.window("_ev", f"{query.size_ms} milliseconds", f"{query.slide_ms} milliseconds")
    out = (ticks.groupBy(window.alias("_w"), *query.keys).agg(*aggs)
           .select(F.unix_millis(F.col("_w.start")).alias(WINDOW), *query.keys, "_n", *(s for s, _, _ in parts)))
    # Update mode: each micro-batch gives the groups it changed, with their whole aggregate so far, and
    # foreachBatch hands them to `on_batch` in the driver (the node's own process) as one Arrow table. A
    # Python data source's sink takes append mode only, where a window comes out in the micro-batch after
    # the one that closed it. The action also runs the micro-batch, so it is taken for an empty one too.
    return (out.writeStream.foreachBatch(lambda df, _batch: on_batch(df.toArrow()))
            .option("checkpointLocation", checkpoint).outputMode("update")
            .trigger(processingTime=trigger).queryName(name).start())


def start_sql_select(spark, plan, *, address: str, max_rows: int, partitions: int, checkpoint: str, trigger: str,
                     name: str, on_batch):
    """Start a planned SQL selection (lazystandby.formats.sql.Plan) over the feed at `address`. Each
    micro-batch hands `on_batch` (in the driver, the node's process) one Arrow table: a marker row per range
    read (`rstart`, `off` its end) and a row per selected input (`off`) with the result columns `_o0`,
    `_o1`, ... in the plan's order; the node formats them as the Python operator does."""
    from .sql import columns, record, sql

    _active(spark)
    df = (spark.readStream.format(FORMAT).option("address", address).option("maxRows", str(max_rows))
          .option("partitions", str(partitions)).load())
    parsed = df.selectExpr("off", "rstart", "marker",
                           f"CASE WHEN marker THEN NULL ELSE {record(plan.schema)} END AS _r")
    cols = parsed.selectExpr("off", "rstart", "marker", *columns(plan.schema, plan.input_columns))
    if plan.where is not None:
        cols = cols.where(f"marker OR ({sql(plan.where)})")
    out = cols.selectExpr("off", "rstart", "marker",
                          *(f"CASE WHEN marker THEN NULL ELSE {sql(o.expr)} END AS _o{i}"
                            for i, o in enumerate(plan.outputs)))
    return (out.writeStream.foreachBatch(lambda df, _batch: on_batch(df.toArrow()))
            .option("checkpointLocation", checkpoint).trigger(processingTime=trigger).queryName(name).start())


def start_sql_window(spark, plan, *, address: str, partitions: int, checkpoint: str, trigger: str, name: str,
                     on_batch, where: str | None = None):
    """Start a planned SQL window aggregation over the feed at `address`, as `start_window` runs the
    tick example's (the same event time, watermark records, cuts and update mode): rows of the window
    start (ms), the keys and the partial aggregates of operators/sql's window (`_n`, `_a<i>__sum`, ...),
    which the node formats. `where` replaces the plan's WHERE (the warm-up's `true`)."""
    from pyspark.sql import functions as F

    from lazystandby.operators.sql import window_query
    from lazystandby.operators.window import WINDOW, partials

    from .sql import columns, event_ms, exact, record, sql

    _active(spark)
    spec = plan.spec
    df = (spark.readStream.format(FORMAT).option("address", address).option("maxRows", str(1 << 62))
          .option("partitions", str(partitions)).load())
    is_record = "startswith(payload, '{\"watermark\": ')"
    mark = (f"CASE WHEN {is_record} THEN try_cast(regexp_extract(payload, '^[{{]\"watermark\": ([0-9]+)', 1) "
            f"AS BIGINT) END")
    sliding = spec.slide_ms != spec.size_ms
    # Sliding windows: a data row comes as `<watermark in force>|<record>` (operators/spark_sql._prepared).
    text = "substr(payload, instr(payload, '|') + 1)" if sliding else "payload"
    in_force = (f"CASE WHEN {is_record} THEN NULL ELSE try_cast(substring_index(payload, '|', 1) AS BIGINT) END"
                if sliding else "CAST(NULL AS BIGINT)")
    rows = (df.where("NOT marker")
            .selectExpr(f"{mark} AS _mark", f"{in_force} AS _wmf",
                        f"CASE WHEN {is_record} THEN NULL ELSE {record(plan.schema, text)} END AS _r")
            .selectExpr("_mark", "_wmf", *columns(plan.schema, plan.input_columns)))
    derived = [f"{event_ms(plan)} AS _t", *(f"{sql(k.expr)} AS `{k.name}`" for k in plan.keys)]
    for i, a in enumerate(plan.aggregates):
        if a.arg is None:
            continue
        arg = sql(a.arg)
        if a.fn == "count":
            derived.append(f"CASE WHEN ({arg}) IS NULL THEN 0 ELSE 1 END AS _a{i}")
        else:
            derived.append(f"CAST({arg} AS {exact(a.arg_type)}) AS _a{i}")
        if a.fn == "avg":
            derived.append(f"CAST(CASE WHEN ({arg}) IS NULL THEN 0 ELSE 1 END AS DECIMAL(38,0)) AS _c{i}")
    condition = where if where is not None else (sql(plan.where) if plan.where is not None else "true")
    rows = rows.selectExpr("_mark", "_wmf", *derived, f"({condition}) AS _keep")
    query = window_query(plan)
    parts = partials(query)[1:]
    keys = [k.name for k in plan.keys]
    ticks = (rows.withColumn("_ev", F.timestamp_millis(F.coalesce(F.col("_mark"), F.col("_t"))))
             .withWatermark("_ev", f"{spec.lateness_ms} milliseconds")
             .where("_mark IS NULL AND _t IS NOT NULL AND _keep"))
    fn = {"sum": F.sum, "min": F.min, "max": F.max}
    aggs = [F.count(F.lit(1)).alias("_n"), *(fn[f](F.col(column)).alias(stored) for stored, column, f in parts)]
    window = F.window("_ev", f"{spec.size_ms} milliseconds", f"{spec.slide_ms} milliseconds")
    if sliding:
        # Each (record, window) pair, kept where the window is still open at the record's watermark.
        final = f"unix_millis(_w.end) + {spec.lateness_ms}"
        grouped = (ticks.select("*", window.alias("_w")).where(f"_wmf IS NULL OR {final} > _wmf")
                   .groupBy("_w", *keys))
    else:
        grouped = ticks.groupBy(window.alias("_w"), *keys)
    out = grouped.agg(*aggs).select(F.unix_millis(F.col("_w.start")).alias(WINDOW), *keys, "_n",
                                    *(s for s, _, _ in parts))
    return (out.writeStream.foreachBatch(lambda df, _batch: on_batch(df.toArrow()))
            .option("checkpointLocation", checkpoint).outputMode("update")
            .trigger(processingTime=trigger).queryName(name).start())
