"""Spark's own recovery and throughput on the same workload: spark/direct_query.py (Kafka in, the same
selection, Kafka out, a checkpoint) killed with SIGKILL on its whole process group (driver and JVM, as a
container kill would) and started again from its checkpoint.

Recovery is timed as the Lazy Standby failover is: from the kill until output is live again, that is, until
the first result of a source record that arrived after the kill is in the results topic (every topic
stamps its arrival time). Duplicates are counted too: Spark's Kafka sink is at-least-once, so the batch in
flight at the kill is written again.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from lazystandby.harness.launcher import scratch
from lazystandby.harness.wait import wait_until
from lazystandby.sources.kafka_generator import generate
from lazystandby.sources.kafka_source import Topics, all_topics, ensure_topics, read_partition

ROOT = Path(__file__).resolve().parents[1]
QUERY = ROOT / "spark" / "direct_query.py"


def start_query(bootstrap: str, prefix: str, checkpoint: Path, *extra: str) -> subprocess.Popen:
    # Its scratch beside the checkpoint, gone with it: the query is killed with -9 and cannot remove it.
    tmp = checkpoint.parent / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "TMPDIR": str(tmp)}
    return subprocess.Popen([sys.executable, str(QUERY), "--bootstrap", bootstrap, "--prefix", prefix,
                             "--checkpoint", str(checkpoint), *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env, start_new_session=True)


def kill_query(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait(timeout=30)


def direct_results(bootstrap: str, topic: str, start: int = 0) -> list[tuple[str, int, int, int]]:
    """(source topic, seq, source arrival ms, result arrival ms) of every result from offset `start` on."""
    try:
        recs = read_partition(bootstrap, topic, start, timeout=120)
    except TimeoutError:
        return []
    out = []
    for r in recs:
        t, seq, ts = r.value.decode().split(",")
        out.append((t, int(seq), int(ts), r.timestamp))
    return out


def restart_recovery(bootstrap: str, *, rate: float = 5_000.0, kill_after: float = 3.0,
                     predicate: str = "price > 100") -> dict:
    """Load at `rate` until the restarted query is live again; kill `kill_after` s after the first output."""
    prefix = f"sd{random.getrandbits(32):x}."
    topics = Topics(prefix)
    out_topic = f"{prefix}results-spark-direct"
    ensure_topics(bootstrap, [*all_topics(topics, ["I1", "I2"]), out_topic])
    # The query's checkpoints go when the run ends; a failed run keeps them.
    with scratch("spark-direct-", under=ROOT / "run" if (ROOT / "run").is_dir() else None) as ckpt:
        q = start_query(bootstrap, prefix, ckpt / "ckpt", "--out-topic", out_topic, "--predicate", predicate)
        stop = threading.Event()
        gen = threading.Thread(target=generate, args=(bootstrap, ["I1", "I2"], 10**9),
                               kwargs={"rate": rate, "topics": topics, "stop": stop}, daemon=True)
        try:
            assert q.stdout is not None
            if not q.stdout.readline().startswith("started"):
                raise RuntimeError("the Spark query did not start")
            gen.start()
            results: list = []  # read on as the query writes: the poll never re-reads what it has

            def read_more() -> list:
                new = direct_results(bootstrap, out_topic, start=len(results))
                results.extend(new)
                return new

            if not wait_until(lambda: bool(read_more()), 120, step=0.5):
                raise RuntimeError("the Spark query produced no output")
            time.sleep(kill_after)
            t_kill = time.time()
            kill_query(q)
            q = start_query(bootstrap, prefix, ckpt / "ckpt", "--out-topic", out_topic, "--predicate", predicate)
            live: list = []

            def back_live() -> bool:
                live.extend(r for r in read_more() if r[2] > t_kill * 1000)
                return bool(live)

            if not wait_until(back_live, 300, step=1.0):
                raise RuntimeError("the restarted Spark query produced no output for input after the kill")
            recovery_ms = min(r[3] for r in live) - t_kill * 1000
            read_more()
            seen = Counter((t, s) for t, s, _, _ in results)
            return {"restart_recovery_ms": round(recovery_ms, 1), "outputs": len(seen),
                    "duplicated": sum(v - 1 for v in seen.values() if v > 1)}
        finally:
            stop.set()
            kill_query(q)
            if gen.is_alive():
                gen.join(timeout=30)


def direct_throughput(bootstrap: str, *, total: int = 300_000, predicate: str = "price > 100",
                      prefix: str = "", max_rows: int = 0) -> dict:
    """The same query over `total` records already in the topics (written here unless `prefix` names
    topics that hold them), as fast as it goes (availableNow). `tuples_per_s` excludes the session start
    and, given `max_rows` (records per micro-batch), the first micro-batch."""
    if not prefix:
        prefix = f"sdt{random.getrandbits(32):x}."
        generate(bootstrap, ["I1", "I2"], total, topics=Topics(prefix))
    with scratch("spark-direct-thr-") as ckpt:
        extra = ("--max-rows", str(max_rows)) if max_rows else ()
        q = start_query(bootstrap, prefix, ckpt / "ckpt", "--available-now", "--predicate", predicate, *extra)
        try:
            assert q.stdout is not None
            line = q.stdout.readline()
            if not line.startswith("started"):
                raise RuntimeError(f"the Spark query did not start: {line!r}")
            t0 = float(line.split()[1])
            done = q.stdout.readline()
            elapsed = time.time() - t0
            steady = q.stdout.readline().split()
            q.wait(timeout=60)
        finally:
            kill_query(q)
    out = {"tuples": total, "tuples_per_s": round(total / elapsed), "seconds": round(elapsed, 2),
           "reported": done.strip(), "topic_prefix": prefix}
    if steady[:1] == ["steady"] and float(steady[2]) > 0:
        out.update({"tuples_per_s": round(int(steady[1]) / float(steady[2])), "from_start_tuples_per_s":
                    out["tuples_per_s"], "steady_tuples": int(steady[1]), "steady_seconds": float(steady[2])})
    return out


if __name__ == "__main__":
    import json

    from lazystandby.harness.kafka_broker import LocalKafka

    broker = LocalKafka(ROOT / "run" / "bench-kafka")
    broker.start()
    try:
        print(json.dumps({"restart": restart_recovery(broker.bootstrap),
                          "throughput": direct_throughput(broker.bootstrap, total=100_000)}))
    finally:
        broker.stop()
