"""The bench's JVM peers are fair ones: Kafka Streams with exactly_once_v2 and Flink with its exactly-once
Kafka sink (bench/jvm) keep exactly the records the pipeline's selection keeps, each once, committed; a
run that cannot read fails with its cause instead of hanging; Kafka Streams' failover is timed from the
kill of the instance that runs the task, Flink's from the kill of the job it restarts from a checkpoint."""

import random
import shutil
import time
from collections import Counter
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import pytest
from kafka import KafkaProducer

from bench.jvm_peers import (
    CommittedReader,
    flink_failover,
    kstreams_failover,
    select_throughput,
    window_failover,
    window_throughput,
)
from lazystandby.harness.check import kafka_expected
from lazystandby.sources.kafka_generator import generate, interleave
from lazystandby.sources.kafka_source import Topics, read_partition


def _committed(bootstrap: str, topic: str, want: int, timeout: float = 60.0) -> list[bytes]:
    """Every committed record of `topic`: read until `want` arrived, then until a poll brings nothing more
    (a duplicate would arrive after the count was reached)."""
    reader = CommittedReader(bootstrap, topic)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            new = reader.more(1000)
            if len(reader.records) >= want and not new:
                break
        return [r.value for r in reader.records]
    finally:
        reader.close()


@pytest.mark.parametrize("peer", ["kstreams", "flink"])
def test_a_jvm_peer_keeps_exactly_what_the_pipeline_would_each_once(kafka, peer):
    prefix = f"{peer}{random.getrandbits(32):x}."
    generate(kafka, ["I1", "I2"], 4000, topics=Topics(prefix))
    r = select_throughput(peer, kafka, prefix, 4000)
    expected, _ = kafka_expected(kafka, ["I1", "I2"], "price > 100", prefix=prefix)
    values = {s: [rec.value for rec in read_partition(kafka, f"{prefix}{s}")] for s in ("I1", "I2")}
    want = Counter(values[s][q - 1] for s, q in expected)
    assert 0 < len(expected) < 4000
    assert r["tuples"] == 4000 and r["selected"] == len(expected) and r["committed"] and r["tuples_per_s"] > 0
    assert Counter(_committed(kafka, f"{prefix}{peer}-results", len(expected))) == want


@pytest.mark.parametrize(("peer", "cause"), [("kstreams", "MissingSourceTopicException"),
                                             ("flink", "no record from")])
@pytest.mark.parametrize("run", [select_throughput, window_throughput])
def test_a_jvm_peer_that_reads_nothing_fails_with_its_cause(kafka, peer, cause, run):
    """Topics that do not exist: Kafka Streams names them missing; Flink's source waits for them, and the
    peer gives up after `first_wait_s`."""
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=f"(?s)peer failed .*{cause}"):
        run(peer, kafka, f"none{random.getrandbits(32):x}.", 10, first_wait_s=5)
    assert time.monotonic() - t0 < 90


def test_a_kafka_streams_failover_is_timed_from_the_kill_to_output_live_again_with_nothing_duplicated(kafka):
    r = kstreams_failover(kafka)
    assert r["killed"] in ("a", "b") and any(t.endswith(".I1") for t in r["held"])
    # The group notices the kill a session timeout after the instance's last heartbeat, which came at most one
    # interval before the kill: a figure under that was not timed from the kill of the active instance.
    assert r["failover_ms"] >= r["session_timeout_ms"] - r["heartbeat_interval_ms"]
    assert r["outputs"] > 0 and r["duplicated"] == 0


def test_a_flink_failover_restarts_from_its_newest_checkpoint_with_nothing_duplicated(kafka):
    r = flink_failover(kafka)
    assert r["restored_from"].startswith("chk-")
    # Results of the restarted job are committed with its first checkpoint: none can be sooner.
    assert r["failover_ms"] >= r["checkpoint_interval_ms"]
    assert r["outputs"] > 0 and r["duplicated"] == 0


@pytest.mark.parametrize(("run", "message", "logs"), [
    (kstreams_failover, "never settled on one active instance", ["a.log", "b.log"]),
    (flink_failover, "no committed result, or no checkpoint", ["first.log"])])
def test_a_jvm_failover_without_results_fails_and_keeps_its_logs(kafka, run, message, logs):
    with pytest.raises(RuntimeError, match=f"{message}; logs in (\\S+)") as e:
        run(kafka, timeout=0.5)
    work = Path(e.value.args[0].rsplit(" ", 1)[-1])
    try:
        assert sorted(p.name for p in work.glob("*.log")) == logs
    finally:
        shutil.rmtree(work, ignore_errors=True)


DAY_MS = 86_400_000


def _window_truth(total: int) -> dict[str, str]:
    """Per symbol, the result text of one window holding every tick of the load (price > 100), by plain
    Python decimals: what the window peers must write, each result once."""
    groups: dict[str, list[Decimal]] = {}
    start = None
    for _, _, payload in interleave(["I1", "I2"], total, 7):
        symbol, price, _, ts, _ = payload.decode().split(",")
        start = start if start is not None else int(ts) // DAY_MS * DAY_MS
        if Decimal(price) > 100:
            groups.setdefault(symbol, []).append(Decimal(price))
    six = Decimal("0.000001")
    return {s: f"{s},{start},{start + DAY_MS},{len(p)},{(sum(p) / len(p)).quantize(six, ROUND_HALF_EVEN)},"
               f"{max(p).quantize(six)}" for s, p in groups.items()}


@pytest.mark.parametrize("peer", ["kstreams", "flink"])
def test_a_jvm_window_peer_computes_the_window_query_exactly_each_result_once(kafka, peer):
    """One day-long window holds the whole load, so no tick is late on any watermark rule; a last tick a
    day later closes it for Kafka Streams (Flink's bounded run closes every window at its end)."""
    prefix = f"w{peer}{random.getrandbits(32):x}."
    generate(kafka, ["I1", "I2"], 3000, topics=Topics(prefix))
    truth = _window_truth(3000)
    closer = f"ZZZ,150.00,100,{int(next(iter(truth.values())).split(',')[2]) + DAY_MS},XNAS".encode()
    producer = KafkaProducer(bootstrap_servers=kafka)
    producer.send(f"{prefix}I1", closer, key=b"ZZZ").get(timeout=30)
    producer.close()
    r = window_throughput(peer, kafka, prefix, 3001, size_ms=DAY_MS)
    assert r["tuples"] == 3001 and r["committed"] and r["tuples_per_s"] > 0
    got = Counter(v.decode() for v in _committed(kafka, f"{prefix}{peer}-window", len(truth)))
    assert {v: n for v, n in got.items() if not v.startswith("ZZZ,")} == {v: 1 for v in truth.values()}
    assert len(truth) > 1


@pytest.mark.parametrize("peer", ["kstreams", "flink"])
def test_a_jvm_window_failover_is_timed_to_input_after_the_kill_applied(kafka, peer):
    r = window_failover(peer, kafka, keys=1000, size_ms=DAY_MS, rate=2000, kill_after=12)
    assert r["applied_before_kill"] > 1000 and r["keys"] == 1000
    if peer == "kstreams":
        # The group notices the kill a session timeout after the instance's last heartbeat (1.5 s apart).
        assert r["killed"] in ("a", "b") and r["failover_ms"] >= r["session_timeout_ms"] - 1500
    else:
        # The restarted job starts a JVM and restores the checkpoint before it applies anything.
        assert r["restored_from"].startswith("chk-") and r["failover_ms"] > 500


@pytest.mark.parametrize(("peer", "logs"), [("kstreams", ["a.log", "b.log"]), ("flink", ["first.log"])])
def test_a_jvm_window_failover_that_applied_nothing_fails_and_keeps_its_logs(kafka, peer, logs):
    with pytest.raises(RuntimeError, match="applied any input, or Flink completed no checkpoint, in [0-9.]+ s; "
                                           "logs in (\\S+)") as e:
        window_failover(peer, kafka, keys=10, size_ms=DAY_MS, rate=10, kill_after=0.5, start_timeout=0.5)
    work = Path(e.value.args[0].rsplit(" ", 1)[-1])
    try:
        assert sorted(p.name for p in work.glob("*.log")) == logs
    finally:
        shutil.rmtree(work, ignore_errors=True)
