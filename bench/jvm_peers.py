"""The JVM peers of the bench on the same broker and workload (bench/jvm, built by bench/jvm/build.sh from
Maven Central's jars): Kafka Streams (bench/jvm/kstreams) and Flink (bench/jvm/flink).

Throughput: SelectPeer (Kafka Streams, exactly_once_v2, one stream thread) or FlinkSelectPeer (Flink's local
MiniCluster, parallelism 1, an exactly-once Kafka sink) over the pre-filled topics of the Kafka figure,
timed from its first record to the last one it processed, as the Quix peer is.

Failover, Kafka Streams: two FailoverPeer instances in one group with a standby replica, under the load
Spark's restart is timed with; the instance that runs the task is killed (SIGKILL), and recovery is timed
as the Lazy Standby failover is: from the kill until the first result of a source record that arrived
after it, from a source partition the killed instance held, is committed to the results topic (every topic
stamps its arrival time). Duplicates are counted over every committed result.

Failover, Flink: FlinkFailoverPeer under the same load, checkpoints every second, killed (SIGKILL) and
started again from its newest complete checkpoint, timed and checked the same way.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from kafka import KafkaConsumer, TopicPartition

from lazystandby.sources.kafka_generator import generate
from lazystandby.sources.kafka_source import Topics, all_topics, ensure_topics

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "jvm"
MAIN = {"kstreams": "SelectPeer", "flink": "FlinkSelectPeer"}  # each peer's throughput class
NAMES = {"kstreams": "Kafka Streams", "flink": "Flink"}


def build(peer: str) -> str:
    """The classpath of a built peer (bench/jvm/build.sh PEER: idempotent)."""
    b = subprocess.run(["bash", str(ROOT / "bench" / "jvm" / "build.sh"), peer], capture_output=True, text=True,
                       timeout=900)
    if b.returncode != 0:
        raise RuntimeError(f"building the {NAMES.get(peer, peer)} peer failed: {b.stderr[-2000:]}")
    return f"{CACHE / peer / 'classes'}:{CACHE / peer / 'libs'}/*"


def select_throughput(peer: str, bootstrap: str, prefix: str, total: int, *, first_wait_s: int = 120) -> dict:
    """`peer` ("kstreams" or "flink") with exactly-once doing the same selection over the same topics. A run
    whose last transaction did not commit is refused: its figure would count records that no
    read_committed consumer sees; so is one that read nothing within `first_wait_s`."""
    cp = build(peer)
    with tempfile.TemporaryDirectory(prefix=f"{peer}-peer-") as tmp:  # its state and temporary files
        p = subprocess.run(["java", "-Xmx768m", f"-Djava.io.tmpdir={tmp}", "-cp", cp, MAIN[peer], bootstrap, prefix,
                            str(total), str(first_wait_s)], capture_output=True, text=True, timeout=900)
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        raise RuntimeError(f"the {NAMES[peer]} peer failed ({p.returncode}): {(p.stdout + p.stderr)[-2000:]}")
    return json.loads(lines[-1])


class CommittedReader:
    """Reads a one-partition topic as a read_committed consumer does, from the start, on each `more()`."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                                      enable_auto_commit=False, auto_offset_reset="earliest")
        self.consumer.assign([TopicPartition(topic, 0)])
        self.records: list = []

    def more(self, timeout_ms: int = 200) -> list:
        new = [r for recs in self.consumer.poll(timeout_ms=timeout_ms).values() for r in recs]
        self.records.extend(new)
        return new

    def close(self) -> None:
        self.consumer.close()


def _parse(record) -> tuple[str, str, int, int, int]:
    """(instance, source topic, source offset, source arrival ms, result arrival ms) of a failover result
    (both JVM failover peers write "INSTANCE,topic,offset,input timestamp")."""
    instance, topic, offset, ts = record.value.decode().split(",")
    return instance, topic, int(offset), int(ts), record.timestamp


def _live_again(reader: CommittedReader, held: set[str], t_kill: float, deadline: float,
                alive: Callable[[], bool], failed: str) -> float:
    """The arrival (ms) of the first committed result of input from a `held` topic that arrived after the
    kill at `t_kill` (s); RuntimeError(`failed`) past `deadline` (monotonic) or once `alive()` is false."""
    while True:
        if time.monotonic() > deadline or not alive():
            raise RuntimeError(failed)
        after = [r for r in map(_parse, reader.more()) if r[1] in held and r[3] > t_kill * 1000]
        if after:
            return min(r[4] for r in after)


def _tally(reader: CommittedReader) -> dict:
    """After a second more of results: how many inputs have results, and how many results repeat one."""
    time.sleep(1.0)
    reader.more()
    seen = Counter((topic, offset) for _, topic, offset, _, _ in map(_parse, reader.records))
    return {"outputs": len(seen), "duplicated": sum(v - 1 for v in seen.values() if v > 1)}


def _states(logs: Path) -> dict[str, str]:
    """Each instance's last state line ("running active N" after a rebalance, "state X" otherwise)."""
    out = {}
    for log in logs.glob("*.log"):
        lines = [ln for ln in log.read_text().splitlines() if ln.startswith(("running", "state"))]
        if lines:
            out[log.stem] = lines[-1]
    return out


def _end_run(stop: threading.Event, gen: threading.Thread, procs: list[subprocess.Popen], reader: CommittedReader,
             work: Path, ok: bool) -> None:
    """A failover run's end, whatever happened: the load stopped, every process killed, the reader closed;
    its directory removed, or kept with the processes' logs when the run failed."""
    stop.set()
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=30)
    reader.close()
    if gen.is_alive():
        gen.join(timeout=30)
    if ok:
        shutil.rmtree(work, ignore_errors=True)


def _load(bootstrap: str, topics: Topics, out_topic: str, rate: float
          ) -> tuple[threading.Event, threading.Thread, CommittedReader]:
    """A failover run's load, the generator at `rate` into `topics` (a thread not started yet, and the event
    that stops it), and its reader of the committed results in `out_topic`."""
    stop = threading.Event()
    gen = threading.Thread(target=generate, args=(bootstrap, ["I1", "I2"], 10**9),
                           kwargs={"rate": rate, "topics": topics, "stop": stop}, daemon=True)
    return stop, gen, CommittedReader(bootstrap, out_topic)


def _start(cmd: list[str], log: Path) -> subprocess.Popen:
    with open(log, "w") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)


def kstreams_failover(bootstrap: str, *, rate: float = 5_000.0, kill_after: float = 3.0,
                      timeout: float = 180.0) -> dict:
    """Two Kafka Streams instances under load at `rate`; the one running the task is killed once it has for
    `kill_after` s with no rebalance. Results within `timeout` s of the start, or the run fails (its
    instances' logs kept)."""
    cp = build("kstreams")
    prefix = f"kf{random.getrandbits(32):x}."
    topics = Topics(prefix)
    out_topic = f"{prefix}kstreams-failover"
    ensure_topics(bootstrap, [*all_topics(topics, ["I1", "I2"]), out_topic])
    app = f"kstreams-failover-{random.getrandbits(32):x}"
    logs = Path(tempfile.mkdtemp(prefix="kstreams-failover-"))
    peers = {name: _start(["java", "-Xmx384m", f"-Djava.io.tmpdir={logs}", "-cp", cp, "FailoverPeer", bootstrap,
                           prefix, app, name], logs / f"{name}.log") for name in ("a", "b")}
    stop, gen, reader = _load(bootstrap, topics, out_topic, rate)
    ok = False
    try:
        gen.start()
        deadline = time.monotonic() + timeout
        # One sub-topology reads partition 0 of both topics, so one task: one instance is active, the other
        # its standby. The victim is the instance that runs it, after `kill_after` s with no rebalance, whose
        # results came last for both topics (results name their instance).
        owner: dict[str, str] = {}  # source topic -> the instance whose results came last
        while True:
            for inst, topic, *_ in map(_parse, reader.more()):
                owner[topic] = inst
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Kafka Streams instances produced no results for both topics, or never "
                                   f"settled on one active instance; logs in {logs}")
            before = _states(logs)
            active = [n for n, line in before.items() if line.startswith("running active ") and line[15:] != "0"]
            if len(owner) < 2 or len(active) != 1 or set(owner.values()) != set(active) or len(before) < 2:
                time.sleep(0.2)
                continue
            time.sleep(kill_after)
            for inst, topic, *_ in map(_parse, reader.more()):
                owner[topic] = inst
            if _states(logs) == before and set(owner.values()) == set(active):
                break
        victim = active[0]
        held = {t for t, inst in owner.items() if inst == victim}
        t_kill = time.time()
        peers[victim].kill()
        peers[victim].wait(timeout=30)
        live = _live_again(reader, held, t_kill, deadline + 120, lambda: True,
                           f"no result for input after the kill within the deadline; logs in {logs}")
        counts = _tally(reader)
        ok = True
        return {"failover_ms": round(live - t_kill * 1000, 1), "killed": victim, "held": sorted(held), **counts,
                "session_timeout_ms": 6000, "heartbeat_interval_ms": 1500, "standby_replicas": 1}
    finally:
        _end_run(stop, gen, list(peers.values()), reader, logs, ok)


def _newest_checkpoint(root: Path) -> Path | None:
    """The newest complete checkpoint under a job's checkpoint directory (chk-N with its _metadata)."""
    done = [p.parent for p in root.glob("*/chk-*/_metadata")]
    return max(done, key=lambda p: int(p.name.split("-")[1]), default=None)


def kill_at_checkpoint(procs: list[subprocess.Popen], start: Callable[..., subprocess.Popen],
                       reader: CommittedReader, checkpoints: Path, *, kill_after: float, timeout: float,
                       failed: str) -> tuple[float, Path]:
    """A Flink job's kill and restart: once the job `procs[0]` has a committed result and a complete
    checkpoint, it runs `kill_after` s more, is killed with SIGKILL, and `start("restarted", checkpoint)`
    starts it again from its newest complete checkpoint (appended to `procs`). Returns the kill's wall
    time (s) and that checkpoint; RuntimeError(`failed`) when the first job exits, or has no result or no
    checkpoint within `timeout` s."""
    deadline = time.monotonic() + timeout
    while not (reader.more() or reader.records) or _newest_checkpoint(checkpoints) is None:
        if time.monotonic() > deadline or procs[0].poll() is not None:
            raise RuntimeError(failed)
    time.sleep(kill_after)
    t_kill = time.time()
    procs[0].kill()
    procs[0].wait(timeout=30)
    newest = _newest_checkpoint(checkpoints)
    if newest is None:  # checkpoints are only ever added: one was complete before the kill
        raise RuntimeError(failed)
    procs.append(start("restarted", str(newest)))
    return t_kill, newest


def flink_failover(bootstrap: str, *, rate: float = 5_000.0, kill_after: float = 3.0,
                   timeout: float = 180.0) -> dict:
    """Flink under load at `rate`, killed with SIGKILL `kill_after` s after its first committed result (and
    once it has completed a checkpoint), then started again from its newest complete checkpoint. Results
    within `timeout` s of each start, or the run fails (its logs and checkpoints kept)."""
    cp = build("flink")
    prefix = f"ff{random.getrandbits(32):x}."
    topics = Topics(prefix)
    out_topic = f"{prefix}flink-failover"
    ensure_topics(bootstrap, [*all_topics(topics, ["I1", "I2"]), out_topic])
    work = Path(tempfile.mkdtemp(prefix="flink-failover-"))
    checkpoints = work / "checkpoints"
    txn = f"ff-{random.getrandbits(32):x}"

    def start(name: str, *restore: str) -> subprocess.Popen:
        return _start(["java", "-Xmx512m", f"-Djava.io.tmpdir={work}", "-cp", cp, "FlinkFailoverPeer", bootstrap,
                       prefix, str(checkpoints), txn, name, *restore], work / f"{name}.log")

    procs = [start("first")]
    stop, gen, reader = _load(bootstrap, topics, out_topic, rate)
    ok = False

    try:
        gen.start()
        t_kill, newest = kill_at_checkpoint(
            procs, start, reader, checkpoints, kill_after=kill_after, timeout=timeout,
            failed=f"Flink produced no committed result, or no checkpoint; logs in {work}")
        deadline = time.monotonic() + timeout
        live = _live_again(reader, {topics.source("I1"), topics.source("I2")}, t_kill, deadline,
                           lambda: procs[1].poll() is None,
                           f"the restarted Flink job produced no result for input after the kill; logs in {work}")
        counts = _tally(reader)
        ok = True
        return {"failover_ms": round(live - t_kill * 1000, 1), "restored_from": newest.name, **counts,
                "checkpoint_interval_ms": 1000}
    finally:
        _end_run(stop, gen, procs, reader, work, ok)


WINDOW_MAIN = {"kstreams": "WindowPeer", "flink": "FlinkWindowPeer"}  # each peer's window query class
WINDOW_TOPIC = {"kstreams": "kstreams-window", "flink": "flink-window"}


def _window_cmd(peer: str, cp: str, tmp: Path | str, *, where: bool, heap: str = "-Xmx768m") -> list[str]:
    return ["java", heap, f"-Djava.io.tmpdir={tmp}", *([] if where else ["-Dwindow.where=none"]), "-cp", cp,
            WINDOW_MAIN[peer]]


def window_throughput(peer: str, bootstrap: str, prefix: str, total: int, *, size_ms: int = 1000,
                      lateness_ms: int = 0, first_wait_s: int = 120) -> dict:
    """`peer` with exactly-once running the `window` query (bench/jvm/WindowQuery.java) over the pre-filled
    topics of a Kafka figure: the Tally line (tuples, seconds, tuples_per_s, selected, committed; Flink's
    with `results`). Refused, as `select_throughput`'s, when the last transaction did not commit."""
    cp = build(peer)
    with tempfile.TemporaryDirectory(prefix=f"{peer}-window-") as tmp:  # its state and temporary files
        p = subprocess.run([*_window_cmd(peer, cp, tmp, where=True), "throughput", bootstrap, prefix, str(total),
                            str(size_ms), str(lateness_ms), str(first_wait_s)],
                           capture_output=True, text=True, timeout=900)
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        raise RuntimeError(f"the {NAMES[peer]} window peer failed ({p.returncode}): {(p.stdout + p.stderr)[-2000:]}")
    return json.loads(lines[-1])


def _progress(log: Path) -> list[tuple[int, int, int]]:
    """A window failover peer's WindowQuery.Progress lines: (wall ms, offset applied in I1, in I2)."""
    out = []
    for line in log.read_text().splitlines():
        if line.startswith("progress "):
            _, now, a, b = line.split()
            out.append((int(now), int(a), int(b)))
    return out


def _end_offsets(bootstrap: str, topics: Topics) -> tuple[int, int]:
    c = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        parts = [TopicPartition(topics.source(s), 0) for s in ("I1", "I2")]
        ends = c.end_offsets(parts)
        return ends[parts[0]], ends[parts[1]]
    finally:
        c.close()


def window_failover(peer: str, bootstrap: str, *, keys: int, size_ms: int, rate: float, kill_after: float,
                    where: bool = False, timeout: float = 240.0, start_timeout: float = 120.0) -> dict:
    """`peer` running the window query with `size_ms` windows over a load of `keys` symbols at `rate`,
    killed (SIGKILL) `kill_after` s into the load, or later, once it has applied input (and Flink has
    completed a checkpoint): a JVM started on a busy machine can take longer than `kill_after` to do so. Fails
    when that takes past `start_timeout` s. Kafka Streams' active instance is killed, its standby replica on
    the other taking over; Flink's job is started again from its newest complete checkpoint. The failover is
    timed from the kill to the first input that arrived after it applied to the state of the instance that
    took over (its first WindowQuery.Progress line past both topics' ends at the kill): the window results
    of that input are then only waiting for their window to close. Fails past `timeout` s, its logs kept."""
    cp = build(peer)
    prefix = f"wf{random.getrandbits(32):x}."
    topics = Topics(prefix)
    out_topic = f"{prefix}{WINDOW_TOPIC[peer]}"
    ensure_topics(bootstrap, [*all_topics(topics, ["I1", "I2"]), out_topic])
    work = Path(tempfile.mkdtemp(prefix=f"{peer}-window-failover-"))
    checkpoints = work / "checkpoints"
    group = f"wf-{random.getrandbits(32):x}"

    def start(name: str, *restore: str) -> subprocess.Popen:
        tail = ([str(checkpoints), group, *restore] if peer == "flink" else [group, name])
        return _start([*_window_cmd(peer, cp, work, where=where, heap="-Xmx1g"), "failover", bootstrap, prefix,
                       str(size_ms), "0", *tail], work / f"{name}.log")

    procs = {name: start(name) for name in (["first"] if peer == "flink" else ["a", "b"])}
    stop = threading.Event()
    gen = threading.Thread(target=generate, args=(bootstrap, ["I1", "I2"], 10**9),
                           kwargs={"rate": rate, "topics": topics, "stop": stop, "keys": keys}, daemon=True)
    reader = CommittedReader(bootstrap, out_topic)
    ok = False
    try:
        gen.start()
        t0 = time.monotonic()
        while True:
            if any(p.poll() is not None for p in procs.values()):
                raise RuntimeError(f"a {NAMES[peer]} window peer ended before the kill; logs in {work}")
            # The victim: the instance that applies the input (Kafka Streams' active one: its progress is newest).
            newest = {n: (_progress(work / f"{n}.log") or [(0, -1, -1)])[-1] for n in procs}
            victim = max(newest, key=lambda n: newest[n][0])
            ready = newest[victim][0] > 0 and (peer != "flink" or _newest_checkpoint(checkpoints) is not None)
            waited = time.monotonic() - t0
            if ready and waited >= kill_after:
                break
            if waited >= max(kill_after, start_timeout):
                raise RuntimeError(f"no {NAMES[peer]} window peer applied any input, or Flink completed no "
                                   f"checkpoint, in {round(waited, 1)} s; logs in {work}")
            time.sleep(0.5)
        ends = _end_offsets(bootstrap, topics)
        t_kill = time.time()
        procs[victim].kill()
        procs[victim].wait(timeout=30)
        if peer == "flink":
            restored = _newest_checkpoint(checkpoints)
            procs["restarted"] = start("restarted", str(restored))
            taker = "restarted"
        else:
            restored, taker = None, next(n for n in procs if n != victim)
        deadline = time.monotonic() + timeout
        while True:
            past = [now for now, a, b in _progress(work / f"{taker}.log") if a >= ends[0] or b >= ends[1]]
            if past:
                break
            if time.monotonic() > deadline or procs[taker].poll() is not None:
                raise RuntimeError(f"the {NAMES[peer]} window peer applied no input that arrived after the kill "
                                   f"within {timeout} s; logs in {work}")
            time.sleep(0.2)
        ok = True
        return {"failover_ms": round(past[0] - t_kill * 1000, 1), "killed": victim, "keys": keys,
                "applied_before_kill": sum(newest[victim][1:]) + 2, "window_ms": size_ms,
                **({"restored_from": restored.name, "checkpoint_interval_ms": 1000} if restored else
                   {"standby_replicas": 1, "session_timeout_ms": 6000})}
    finally:
        _end_run(stop, gen, list(procs.values()), reader, work, ok)
