"""Nexmark beside Flink SQL: the pipeline files of examples/nexmark-*.sql on our nodes, and the same
queries as Flink SQL jobs, over the same bid topic on the same broker in one run.

    python -m bench.nexmark [--events N] [--kills K] [--queries q0,q1,q2,q5,q5whole,q7] [--publish]

- The events: the `nexmark` crate's generator (`make nexmark`), N bids written once into one topic.
- Ours: the Python operator with a warm standby (Bsize 10), and for the windowed queries also a Passive
  Standby (standby_state snapshot); the nodes started, then events/s from Nu's first admission to Nd
  holding every result; `cpu_us_per_event` is every node's CPU over that span, per event. Failover: K
  trials of `run_trial` with the pipeline, N killed mid-load, p95 of kill to live.
- Spark Structured Streaming direct (spark/direct_query.py --pipeline): the same plan as one Spark query
  reading the topic (availableNow), records/s after its first micro-batch, as bench-quick's Spark peer;
  none for q5whole, whose rank per window Structured Streaming cannot run.
- q5whole: Nexmark q5 itself. Ours ranks the counts per window in QUALIFY (examples/nexmark-q5-whole.sql);
  Flink runs the suite's text, the counts joined with their maximum per window.
- Flink SQL (bench/jvm/flinksql): the same query, JSON format, RocksDB state, a checkpoint every second,
  an exactly-once Kafka sink, the topic read to its end. Its events/s is differential: N events and a
  small topic's n, (N - n) over the difference of the two runs' times, so the job's start and its final
  checkpoint count in neither. Failover: the job killed under load (SIGKILL) and started again from its
  newest checkpoint; kill to the first committed result after the restart.

Results go to run/bench/nexmark.json (docs/bench/ with --publish); the JSON summary is the last line.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness import Serving, _proc_usage, machine_keys, nu_time, write_details
from bench.jvm_peers import CommittedReader, _end_run, _start, kill_at_checkpoint
from lazystandby.formats.pipeline import read_pipeline
from lazystandby.harness import results
from lazystandby.harness.check import nu_read_all
from lazystandby.harness.launcher import Topology, _pct, run_trial, scratch
from lazystandby.harness.places import ND, NU
from lazystandby.harness.wait import wait_until
from lazystandby.sources.kafka_source import Topics, ensure_topics
from lazystandby.sources.pipeline_load import write_load

ROOT = Path(__file__).resolve().parents[1]
QUERIES = {"q0": "nexmark-q0.sql", "q1": "nexmark-q1.sql", "q2": "nexmark-q2.sql", "q5": "nexmark-q5-counts.sql",
           "q5whole": "nexmark-q5-whole.sql", "q7": "nexmark-q7-max.sql"}
WINDOWED = ("q5", "q5whole", "q7")
SMALL = 20_000  # events of the small topic Flink's start-up cost is measured on
FAILOVER_RATE = 20_000.0  # events/s of the failover runs' load


def flink_cp() -> str:
    subprocess.run(["bash", str(ROOT / "bench/jvm/build.sh"), "flinksql"], check=True)
    cache = ROOT / ".cache/jvm/flinksql"
    return f"{cache / 'classes'}:{cache / 'libs'}/*"


def pipeline_copy(query: str, prefix: str, work: Path) -> Path:
    """The example's pipeline with its topics under `prefix` (the run's own)."""
    spec = read_pipeline(ROOT / "examples" / QUERIES[query])
    path = work / QUERIES[query]
    path.write_text(spec.text(prefix))
    return path


# --- ours ---------------------------------------------------------------------------------------------
def ours(bootstrap: str, pipeline: Path, events: int, *, extra: dict[str, Any] | None = None) -> dict:
    """Events/s and CPU per event of the pipeline over a topic already holding `events` bids."""
    settings = {"bsize": 10, "codec": "zstd-stream-dict", "operator": "python", "kafka_bootstrap": bootstrap,
                "topic_prefix": f"r{random.getrandbits(32):x}.", "pipeline": str(pipeline), **(extra or {})}
    with scratch("lazystandby-nexmark-") as work, Topology(settings, work) as topo, topo.poller() as poller:
        topo.start_all()
        t0 = nu_time(poller, "first_admitted_at", 120)
        pids = {k: p.pid for k, p in topo.procs.items()}
        usage0 = _proc_usage(pids)
        serving = Serving(topo, poller.status)
        wait_until(lambda: nu_read_all(topo.status(NU)) and serving.processed() >= topo.status(NU)["head"], 900)
        outputs = serving.status()["processed"][1]
        wait_until(lambda: topo.status(ND)["delivered_through"] >= outputs, 120)
        elapsed = time.monotonic() - t0
        usage = _proc_usage(pids)
        cpu = sum(u[0] - usage0[k][0] for k, u in usage.items())
    return {"events_per_s": round(events / elapsed), "cpu_us_per_event": round(cpu / events * 1e6, 2),
            "seconds": round(elapsed, 2), "outputs": outputs, "takeovers": serving.takeovers}


def our_failovers(bootstrap: str, query: str, kills: int, seed: int) -> list[float]:
    """Kill to live (ms) of `kills` trials with the example's pipeline, N killed at a random point."""
    rng = random.Random(seed)
    total = 160_000 if query in WINDOWED else 40_000
    out = []
    for i in range(kills):
        r = run_trial(fault="kill-primary", kafka=bootstrap, pipeline=str(ROOT / "examples" / QUERIES[query]),
                      total=total, rate=FAILOVER_RATE, kill_after=rng.uniform(1.0, 0.8 * total / FAILOVER_RATE),
                      seed=seed + i, timeout=300.0, extra={"exit_when_fenced": True})
        if not r["ok"]:
            raise RuntimeError(f"{query}: a failover trial was not exact ({r.get('lost')} lost, "
                               f"{r.get('duplicated')} duplicated, {r.get('wrong')} wrong); logs in {r['workdir']}")
        out.append(round(r["recovery_ms"], 1))
    return out


# --- Spark direct -------------------------------------------------------------------------------------
def spark_direct(bootstrap: str, pipeline: Path, events: int) -> dict:
    """The plan as one Spark Structured Streaming query over the topic, as fast as it goes."""
    with scratch("spark-nexmark-") as work:
        p = subprocess.run([sys.executable, str(ROOT / "spark/direct_query.py"), "--bootstrap", bootstrap,
                            "--pipeline", str(pipeline), "--checkpoint", str(work / "ckpt"), "--available-now",
                            "--max-rows", "200000", "--out-topic", f"spark-{random.getrandbits(32):x}"],
                           capture_output=True, text=True, timeout=1800)
    lines = {ln.split()[0]: ln.split()[1:] for ln in p.stdout.splitlines() if ln.split()}
    if p.returncode != 0 or "steady" not in lines:
        raise RuntimeError(f"Spark direct failed ({p.returncode}): {(p.stdout + p.stderr)[-2000:]}")
    records, seconds = int(lines["steady"][0]), float(lines["steady"][1])
    return {"events_per_s": round(records / seconds) if seconds > 0 else None, "records": int(lines["done"][0])}


# --- Flink SQL ----------------------------------------------------------------------------------------
def flink_run(cp: str, bootstrap: str, source: str, query: str, *, work: Path, sink: str = "") -> float:
    """Seconds of one bounded Flink SQL run over `source`, submission to the job's end; its results go to
    topic `sink` (by default one of the run's own)."""
    txn = f"fs{random.getrandbits(32):x}"
    p = subprocess.run(["java", "-Xmx1g", f"-Djava.io.tmpdir={work}", "-cp", cp, "FlinkSqlPeer", bootstrap, source,
                        sink or f"{source}-{txn}-out", query, str(work / f"cp-{txn}"), txn, "bounded"],
                       capture_output=True, text=True, timeout=1800)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        raise RuntimeError(f"Flink SQL {query} failed ({p.returncode}): {(p.stdout + p.stderr)[-2000:]}")
    return float(json.loads(lines[-1])["seconds"])


def flink(cp: str, bootstrap: str, big: str, small: str, events: int, query: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="flinksql-") as tmp:
        t_small = flink_run(cp, bootstrap, small, query, work=Path(tmp))
        t_big = flink_run(cp, bootstrap, big, query, work=Path(tmp))
    rate = (events - SMALL) / max(t_big - t_small, 1e-3)
    return {"events_per_s": round(rate), "seconds": round(t_big, 2), "startup_seconds": round(t_small, 2)}


def flink_failover(cp: str, bootstrap: str, query: str, *, kill_after: float = 4.0, timeout: float = 300.0) -> float:
    """Kill to the first committed result of the restarted job (ms): the job under a load at FAILOVER_RATE,
    killed once it has committed results and completed a checkpoint, started again from the newest. Its
    directory is removed, or kept with the jobs' logs when the run fails."""
    prefix = f"ff{random.getrandbits(32):x}."
    spec = read_pipeline(ROOT / "examples" / QUERIES[query])
    topics = Topics(prefix, (("bid", f"{prefix}bid"),))
    out = f"{prefix}out"
    ensure_topics(bootstrap, [f"{prefix}bid", out])
    work = Path(tempfile.mkdtemp(prefix="flinksql-failover-"))
    txn = f"ff{random.getrandbits(32):x}"
    checkpoints = work / "checkpoints"
    stop = threading.Event()
    gen = threading.Thread(target=write_load, args=(bootstrap, spec, 10**8),
                           kwargs={"rate": FAILOVER_RATE, "topics": topics, "stop": stop}, daemon=True)

    def start(name: str, *restore: str) -> subprocess.Popen:
        return _start(["java", "-Xmx1g", f"-Djava.io.tmpdir={work}", "-cp", cp, "FlinkSqlPeer", bootstrap,
                       f"{prefix}bid", out, query, str(checkpoints), txn, "unbounded", *restore], work / f"{name}.log")

    procs = [start("first")]
    reader = CommittedReader(bootstrap, out)
    ok = False
    try:
        gen.start()
        t_kill, _ = kill_at_checkpoint(procs, start, reader, checkpoints, kill_after=kill_after, timeout=timeout,
                                       failed=f"Flink SQL {query}: no committed result or checkpoint; logs in {work}")
        deadline = time.monotonic() + timeout
        while True:
            fresh = [r for r in reader.more() if r.timestamp > t_kill * 1000]
            if fresh:
                ok = True
                return round(min(r.timestamp for r in fresh) - t_kill * 1000, 1)
            if time.monotonic() > deadline or procs[1].poll() is not None:
                before = sum(r.timestamp <= t_kill * 1000 for r in reader.records)
                raise RuntimeError(f"Flink SQL {query}: no result after the restart ({before} before); logs in {work}")
    finally:
        _end_run(stop, gen, procs, reader, work, ok)


# --- the run ------------------------------------------------------------------------------------------
def measure(bootstrap: str, events: int, kills: int, queries: list[str], say) -> dict:
    cp = flink_cp()
    prefix = f"nx{random.getrandbits(32):x}."
    spec = read_pipeline(ROOT / "examples" / QUERIES["q0"])
    say(f"writing {events:,} bids and {SMALL:,} more (the nexmark generator)")
    write_load(bootstrap, spec, events, topics=Topics(prefix, (("bid", f"{prefix}bid"),)))
    write_load(bootstrap, spec, SMALL, topics=Topics(prefix, (("bid", f"{prefix}small"),)))
    per_query: dict[str, dict] = {}
    with scratch("lazystandby-nexmark-pipelines-") as work:
        for q in queries:
            path = pipeline_copy(q, prefix, work)
            say(f"{q}: ours, warm standby")
            mine = ours(bootstrap, path, events)
            row: dict[str, Any] = {"events_per_s": mine["events_per_s"], "cpu_us_per_event": mine["cpu_us_per_event"],
                                   "outputs": mine["outputs"]}
            if q in WINDOWED:
                say(f"{q}: ours, Passive Standby")
                passive = ours(bootstrap, path, events, extra={"standby_state": "snapshot"})
                row["passive_events_per_s"] = passive["events_per_s"]
            if read_pipeline(path).plan.top is None:
                say(f"{q}: Spark Structured Streaming direct")
                row["spark_events_per_s"] = spark_direct(bootstrap, path, events)["events_per_s"]
            else:  # Structured Streaming ranks no streaming aggregation's rows (spark/direct_query.py)
                row["spark_events_per_s"] = None
            row["vs_spark"] = round(row["events_per_s"] / row["spark_events_per_s"], 2) \
                if row["spark_events_per_s"] else None
            say(f"{q}: Flink SQL")
            fl = flink(cp, bootstrap, f"{prefix}bid", f"{prefix}small", events, q)
            row["flink_events_per_s"] = fl["events_per_s"]
            row["vs_flink"] = round(row["events_per_s"] / fl["events_per_s"], 2)
            if q in WINDOWED:
                row["passive_vs_flink"] = round(row["passive_events_per_s"] / fl["events_per_s"], 2)
            say(f"{q}: {kills} failovers of ours, one of Flink SQL")
            fails = our_failovers(bootstrap, q, kills, seed=17)
            row["failover_ms"] = fails
            row["failover_ms_p95"] = round(_pct(fails, 95), 1)
            row["flink_failover_ms"] = flink_failover(cp, bootstrap, q)
            row["flink_failover_over_ours"] = round(row["flink_failover_ms"] / max(row["failover_ms_p95"], 1e-3), 1)
            per_query[q] = row
            say(f"{q}: {json.dumps(row)}")
    return per_query


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench-nexmark")
    ap.add_argument("--events", type=int, default=1_000_000, help="bids in the topic (default 1,000,000)")
    ap.add_argument("--kills", type=int, default=3, help="failover trials of ours per query (default 3)")
    ap.add_argument("--queries", default=",".join(QUERIES), help=f"which queries (default all: {','.join(QUERIES)})")
    ap.add_argument("--publish", action="store_true", help="write docs/bench/nexmark.json")
    a = ap.parse_args(argv)
    queries = [q for q in a.queries.split(",") if q]
    unknown = [q for q in queries if q not in QUERIES]
    if unknown or a.events <= SMALL or a.kills < 1:
        print(f"bench-nexmark: queries from {', '.join(QUERIES)} (got {unknown}), events above {SMALL}, "
              f"kills >= 1", file=sys.stderr)
        return 2
    t0 = time.monotonic()

    def say(msg: str) -> None:
        print(f"[{time.monotonic() - t0:6.1f} s] {msg}", file=sys.stderr, flush=True)

    from lazystandby.config import kafka_bootstrap_from_env
    from lazystandby.harness.kafka_broker import LocalKafka

    bootstrap, broker = kafka_bootstrap_from_env(), None
    if not bootstrap:
        broker = LocalKafka(ROOT / "run" / "bench-kafka").start()
        bootstrap = broker.bootstrap
    try:
        per_query = measure(bootstrap, a.events, a.kills, queries, say)
    finally:
        if broker is not None:
            broker.stop()
    summary = {"queries": per_query, "events": a.events, "kills": a.kills,
               "vs_flink_min_selections": min((r["vs_flink"] for q, r in per_query.items() if q not in WINDOWED),
                                              default=None),
               "vs_flink_min_windowed": min((r["vs_flink"] for q, r in per_query.items() if q in WINDOWED),
                                            default=None),
               **machine_keys(t0)}
    write_details("nexmark.json", a.publish, summary)
    print(results.dumps("bench-nexmark", summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
