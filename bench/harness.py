"""Benchmarks: seed 000's Bsize trade-off (Figs 6-8) and throughput with and without HA.

    make bench-quick   Bsize {1, 10, inf} x every codec, 1 trial each, throughput runs (about 10 minutes)
    make bench         Bsize {1, 2, 10, 15, ..., 50, inf} x every codec, 30 trials each (hours);
                       TRIALS=3 CODECS=none,zstd,zstd-dict narrow it

Both also time the peer a user would pick instead (bench/spark_peer.py: a plain Spark query on the same
Kafka topics, killed and restarted from its checkpoint) and measure throughput with the Python and the
Spark operator against the same pipeline without a standby and against Spark reading Kafka directly.

Each trade-off trial runs Nu, N, N', Nd as processes on loopback at a fixed input rate, kills N at a fixed
time, and records the bandwidth overhead (backup bytes / primary bytes on Nu's links, seed 000 2.3.1, at
the moment of the kill) and the recovery time split as seed 000 does: reconnection (N' connecting to Nd
and Nu) and data recovery (replay and reprocessing until N' is live). `failover_ms` adds detection: from
the kill to N' live. Every trial is also checked against the truth table; a failed check fails the run.
Results: run/bench/<name>.json and .csv (docs/bench with --publish), PNG plots, and a JSON summary as the last
line printed.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lazystandby.config import NodeConfig
from lazystandby.core.batching import parse_bsize
from lazystandby.core.codec import CodecName
from lazystandby.harness import results
from lazystandby.harness.campaign import cpu_model
from lazystandby.harness.check import nu_read_all
from lazystandby.harness.launcher import SPARK_DETECTOR, StatusPoller, Topology, run_trial, scratch
from lazystandby.harness.operator_procs import CLOCK_TICKS, ProcRow, children_of, no_process_left, proc_table, subtree
from lazystandby.harness.places import N2, ND, NU, N
from lazystandby.harness.wait import wait_until

ROOT = Path(__file__).resolve().parent.parent
# Results and plots go under run/bench; --publish writes them where the README shows them (docs/bench).
RESULTS = ROOT / "run" / "bench"
PUBLISHED = ROOT / "docs" / "bench"
CODECS = [c.value for c in CodecName]
# The goal rate: both pipelines paced at it show whether each holds it and what the standby costs
# there in CPU (at full speed the cores are full, and the cost shows only as throughput). 10 s each.
GOAL_RATE = 500_000.0
PACED_TUPLES = 5_000_000


def tradeoff(bsizes: list[str], codecs: list[str], trials: int, *, total: int, rate: float,
             kill_after: float) -> list[dict]:
    rows = []
    cells = [(bsize, codec, t) for bsize in bsizes for codec in codecs for t in range(trials)]
    with tqdm(cells, desc="trade-off", unit="trial", file=sys.stderr) as bar:
        for bsize, codec, t in bar:
            bar.set_postfix_str(f"Bsize {bsize} {codec} trial {t + 1}")
            r = run_trial(fault="kill-primary", bsize=bsize, codec=codec, total=total, rate=rate,
                          kill_after=kill_after, seed=7 + t, tls=True)
            if not r["ok"]:
                raise RuntimeError(f"trial failed the truth-table check: {r['workdir']} {r.get('diff')}")
            rec, nu = r["recovery"], r["before"][NU]
            c = nu["counters"]
            rows.append({
                "bsize": bsize, "codec": codec, "trial": t,
                "overhead": nu["overhead"],
                "overhead_raw": c.get("backup_raw_bytes", 0) / c["primary_bytes"] if c.get("primary_bytes") else 0,
                "compression_ratio": nu["compression_ratio"],
                "reconnection_ms": rec["reconnection_ms"], "data_recovery_ms": rec["data_recovery_ms"],
                "recovery_ms": rec["reconnection_ms"] + rec["data_recovery_ms"],
                "detection_ms": rec["detection_ms"], "failover_ms": r.get("recovery_ms", 0.0),
                "replayed_from_oq": rec["replayed_from_oq"], "resent_by_nu": rec["resent_by_nu"],
            })
    return rows


def tree_usage(table: dict[int, ProcRow], pid: int, children: dict[int, list[int]] | None = None
               ) -> tuple[float, int]:
    """CPU seconds and minor page faults of `pid` and every live process it started, in a `proc_table`
    (`children`: its `children_of`, when the caller walks several trees of one table)."""
    tree = [pid, *subtree(children_of(table) if children is None else children, pid)]
    rows = [table[p] for p in tree if p in table]
    return sum(r.cpu_seconds for r in rows), sum(r.minor_faults for r in rows)


def _proc_usage(pids: dict[str, int], table: dict[int, ProcRow] | None = None,
                children: dict[int, list[int]] | None = None) -> dict[str, tuple[float, int]]:
    """CPU seconds and minor page faults of each node process and everything it started (a Spark operator's
    JVM and Python workers), from one pass over /proc (`table` and its `children`, when the caller has them)."""
    table = proc_table() if table is None else table
    children = children_of(table) if children is None else children
    return {k: tree_usage(table, pid, children) for k, pid in pids.items()}


def machine_keys(t0: float) -> dict:
    """The machine keys every bench summary ends with: wall seconds since `t0` (monotonic), the CPU model,
    the cores and the one-minute load now."""
    return {"seconds": round(time.monotonic() - t0), "cpu": cpu_model(), "cores": os.cpu_count(),
            "load_1m": round(os.getloadavg()[0], 2)}


def write_details(name: str, publish: bool, details: dict) -> Path:
    """A bench's details as run/bench/<name> (docs/bench/<name> when published); returns the path."""
    out = (PUBLISHED if publish else RESULTS) / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(details, indent=1))
    return out


def machine_cpu(stat: str | None = None) -> tuple[float, float, float]:
    """The machine's CPU seconds since boot, every core, from /proc/stat's first line (`stat`: that file's
    text): in processes (user, nice, system: what /proc/<pid>/stat splits among them), in interrupts (hard
    and soft, loopback's TCP receive among them: kept apart, as a kernel that accounts them apart charges
    them to no process), and stolen by the hypervisor."""
    f = (Path("/proc/stat").read_text() if stat is None else stat).split("\n", 1)[0].split()
    if len(f) < 9 or f[0] != "cpu":
        raise ValueError(f"not /proc/stat's total line: {' '.join(f[:3])!r}")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in f[1:9])
    return (user + nice + system) / CLOCK_TICKS, (irq + softirq) / CLOCK_TICKS, steal / CLOCK_TICKS


def other_cores(a: tuple[float, ...], b: tuple[float, ...]) -> dict[str, float]:
    """Cores between two `MachineShare` marks (monotonic time, the machine's process, interrupt and stolen
    CPU, the nodes', the bench's own): `other`, the processes' CPU less the nodes' and the bench's (what
    else ran); `bench`; `irq`; `steal`."""
    dt = b[0] - a[0]
    tasks, irq, steal, nodes, own = (b[i] - a[i] for i in range(1, 6))
    return {"other": round((tasks - nodes - own) / dt, 3), "bench": round(own / dt, 3), "irq": round(irq / dt, 3),
            "steal": round(steal / dt, 3)}


MIN_WINDOW_S = 0.5  # the shortest window MachineShare.per_second reads: a tick's skew there is 0.02 cores


class MachineShare:
    """What else the machine ran while a run ran: its processes' CPU less the nodes' (with what they started)
    and this process's, each second and over the run. On 2 full cores a neighbour's tenth of a core is a
    twentieth of the pipeline's, so a slow second or round with other work on the machine is told apart
    from one the pipeline made itself. A node's child that ended within the run leaves its CPU under
    `other` (none does in a throughput run). One pass over /proc a mark: about 2 ms of the bench's CPU."""

    def __init__(self, pids: Callable[[], list[int]]) -> None:
        self.pids = pids
        self.marks: list[tuple[float, ...]] = []
        self.mark()

    def mark(self) -> None:
        table = proc_table()
        machine = machine_cpu()
        children = children_of(table)
        nodes = sum(tree_usage(table, p, children)[0] for p in self.pids())
        # This process alone (its children are the nodes, counted above), to the microsecond: os.times()
        # counts in ticks of 10 ms, a run's whole polling in a test's short run.
        me = resource.getrusage(resource.RUSAGE_SELF)
        own = me.ru_utime + me.ru_stime
        self.marks.append((time.monotonic(), *machine, nodes, own))

    def over_run(self) -> dict[str, float]:
        return other_cores(self.marks[0], self.marks[-1])

    def per_second(self) -> list[float]:
        """`other` over each window between marks of at least MIN_WINDOW_S: a run's last mark comes at its
        end, often a poll (50 ms) after the one before, and /proc/stat's 10-ms ticks over so short a window
        read as whole cores of other work, or less than none."""
        return [other_cores(a, b)["other"] for a, b in zip(self.marks, self.marks[1:], strict=False)
                if b[0] - a[0] >= MIN_WINDOW_S]


def _peak_rss_mb(pids: dict[str, int], children: dict[int, list[int]]) -> dict[str, float]:
    """Peak resident memory of each node process and everything it started (VmHWM, MB), in a `children_of`."""
    return {k: _tree_hwm_mb(pid, children) for k, pid in pids.items()}


def _tree_hwm_mb(pid: int, children: dict[int, list[int]]) -> float:
    total = 0
    for p in (pid, *subtree(children, pid)):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return round(total / 1024, 1)


class Serving:
    """The status of whichever node serves as primary during a measurement: N, until a takeover makes it
    N' (a real failure, or a false suspicion: on this 2-core machine, heartbeats once went unanswered for
    300 ms while the Kafka pipeline started, and the bench then waited ten minutes on a fenced N). Polls
    the node it follows and looks at the other one only when that one is no primary; `takeovers` counts
    the switches, reported with the run."""

    def __init__(self, topo: Topology, status: Callable[[str], dict] | None = None) -> None:
        # status: a node's status by key; a kept channel (Topology.poller) where it polls all along
        self.topo, self.key, self.takeovers = topo, N, 0
        self._status = status or topo.status

    def status(self) -> dict:
        s = self._status(self.key)
        other = N2 if self.key == N else N
        if s["role"] == "primary" or other not in self.topo.procs:
            return s
        o = self._status(other)
        if o["role"] == "primary" and o["epoch"] > s["epoch"]:
            self.key, self.takeovers = other, self.takeovers + 1
            return o
        return s

    def processed(self) -> int:
        return self.status()["processed"][0]


def per_second_rates(marks: list[tuple[float, int]]) -> list[int]:
    """Tuples/s over each window between consecutive marks (monotonic time, tuples done by then). The bench
    marks about once a second, but at the first poll after the second is up: on a busy machine a mark
    comes 50-100 ms late, and counting the next window (then 0.9 s long) as a whole second reads as a dip
    of a tenth that never happened."""
    return [round((c1 - c0) / (t1 - t0)) for (t0, c0), (t1, c1) in zip(marks, marks[1:], strict=False) if t1 > t0]


def slowest_second(samples: list[int]) -> dict:
    """The mean over a run's full seconds (the last is partial), the slowest against it, and which second
    that was (1: the first, which holds the start): a start is told apart from a stall within the run."""
    full = samples[:-1] or samples
    mean = statistics.mean(full)
    return {"mean_per_s": round(mean), "worst_second_ratio": round(min(full) / mean, 3) if mean else 0.0,
            "worst_second": full.index(min(full)) + 1}


def usage_at_start(nodes: Topology | StatusPoller) -> tuple[float, int]:
    """Nu's CPU seconds and minor page faults at its start(), as it reports them (once it has started)."""
    s = nodes.status(NU)
    if s.get("cpu_seconds_at_start") is None:
        raise RuntimeError("Nu has not reported its CPU at start: it has not started")
    return s["cpu_seconds_at_start"], s["minor_faults_at_start"]


def nu_time(nodes: Topology | StatusPoller, event: str, timeout: float = 30.0) -> float:
    """When Nu says `event` happened (`started_at`: its start(); `first_admitted_at`: its first admission;
    wall clock, same host), on this process's monotonic clock, once Nu reports it. Seen from here instead,
    by polling, either moved by up to a poll (50 ms): a twentieth of a run's first second, a tenth of a
    Kafka run of 300,000 records. Nu's server answers status before start(), so the first answer is no
    start either: it can come before start() or after the first admission.
    Polled every 5 ms: give it the run's kept channel (Topology.poller), not the Topology's fresh one per
    call."""
    seen: dict[str, float | None] = {}

    def reported() -> bool:
        seen["at"] = nodes.status(NU).get(event)
        return bool(seen["at"])

    if not wait_until(reported, timeout, step=0.005):
        raise RuntimeError(f"Nu did not report {event} within {timeout} s")
    return on_this_clock(seen["at"])


def on_this_clock(wall: float) -> float:
    """A node's wall-clock time (same host) on this process's monotonic clock."""
    return time.monotonic() - max(0.0, time.time() - wall)


class FrameMarks:
    """Points on the serving node's processing curve about a second apart, from the first frame it has
    finished: each is (when it finished a frame, tuples processed by then), as the node reports them.

    Why not the count polled at each second: N counts a whole frame at once (32,768 tuples, about 22 ms at
    1.5 M tuples/s), so a count read between frames is up to a frame old at either end of a window, and a
    second's rate read so moves by up to a frame, about 2 %, either way; the slowest of eight such seconds
    reads low. And why from the first frame, not from Nu's start: no output can come before the first
    frame has been generated, sent and run (tens of ms after Nu's start at full speed, more with a
    standby: `first_output_ms`), so a first second counted from the start holds that fill
    time as if the pipeline had slowed. The fill is a latency, reported with the run (`first_output_ms`:
    from Nu's start to N's first frame done)."""

    def __init__(self) -> None:
        self.marks: list[tuple[float, int]] = []

    def see(self, status: dict, *, final: bool = False) -> None:
        """Take a point from a status reply once a second has passed since the last (or at the run's end)."""
        done, wall = status["processed"][0], status.get("processed_at")
        if not done or wall is None:
            return
        at = on_this_clock(wall)
        if not self.marks or at >= self.marks[-1][0] + 1.0 or (final and done > self.marks[-1][1]):
            self.marks.append((at, done))


def throughput(*, bsize: str, codec: str, standby: bool, total: int, operator: str = "python",
               extra: dict[str, Any] | None = None, rate: float = 0.0, tls: bool = True) -> dict:
    """The pipeline as fast as it goes (generator rate 0), or with the generator paced at `rate` tuples/s:
    tuples/s through N to Nd, per-second samples, each node's CPU. Mutual TLS, as the commands run it,
    unless `tls` is off."""
    settings = {"bsize": parse_bsize(bsize), "codec": codec, "total": total, "rate": rate, "operator": operator}
    if operator == "spark":
        settings.update(SPARK_DETECTOR)
    settings.update(extra or {})
    with (scratch("lazystandby-bench-") as work,
          Topology(settings, work, with_standby=standby, tls_dir=Path(work) / "tls" if tls else None) as topo,
          topo.poller() as poller):
        topo.start_all()
        serving = Serving(topo, poller.status)
        t0 = nu_time(poller, "started_at")
        # Each node's CPU over the run's clock, which starts at Nu's start(): Nu's as it reported it there,
        # the others' read now (3-35 ms after it in three start-ups, with N yet to process a tuple). Read
        # before Nu starts instead, they would hold N''s registration (0.04-0.05 s of CPU in three start-ups).
        usage0 = _proc_usage({k: p.pid for k, p in topo.procs.items() if k != NU})
        usage0[NU] = usage_at_start(poller)
        share = MachineShare(lambda: [p.pid for p in topo.procs.values()])
        marks, frames = [(t0, 0)], FrameMarks()
        next_sample = t0 + 1.0
        while True:
            # Polled finely: a run lasts 5-10 s, and timing its end to the second would make the rate (and
            # any ratio of two rates) move in steps of 10-20 %.
            time.sleep(0.05)
            s = serving.status()
            done, now = s["processed"][0], time.monotonic()
            frames.see(s, final=done >= total)
            if now >= next_sample:
                marks.append((now, done))
                share.mark()
                next_sample += 1.0
            if done >= total or now - t0 > 300:
                break
        marks.append((now, done))
        share.mark()
        from_start = per_second_rates(marks)
        # A run too short for two frame points (a test's) keeps the polled rates.
        samples = per_second_rates(frames.marks) or from_start
        first_output = s.get("first_processed_at")  # the loop's last reply: the first frame is long done
        wait_until(lambda: topo.status(ND)["delivered_through"] >= serving.status()["processed"][1], 30)
        elapsed = time.monotonic() - t0
        pids = {k: p.pid for k, p in topo.procs.items()}
        table = proc_table()  # one pass over /proc for the nodes' CPU, faults and peak memory
        children = children_of(table)
        usage = _proc_usage(pids, table, children)
        cpu = {k: round((u[0] - usage0[k][0]) / elapsed, 3) for k, u in usage.items()}
        faults = {k: round((u[1] - usage0[k][1]) / elapsed) for k, u in usage.items()}
        rss = _peak_rss_mb(pids, children)
        nu = topo.status(NU)
        behind = nu["head"] - nu["backup_confirmed_through"] if standby else 0
        if standby:
            # What the standby had not acknowledged when Nd held everything (at most backup_lag_max) still
            # goes to it: coverage counts what it gets, not where the last call happened to be.
            wait_until(lambda: topo.status(NU)["backup_confirmed_through"] >= nu["head"], 30)
            nu = topo.status(NU)
        n2 = topo.status(N2)["counters"] if standby else {}
    return {"bsize": bsize, "codec": codec, "standby": standby, "operator": operator, "tuples": total,
            "tuples_per_s": round(total / elapsed), **slowest_second(samples), "per_second": samples,
            # The same measure as polled from Nu's start, the fill time and frame steps included (FrameMarks).
            "worst_second_ratio_from_start": slowest_second(from_start)["worst_second_ratio"],
            "first_output_ms": round((on_this_clock(first_output) - t0) * 1000, 1) if first_output else None,
            "cpu_cores_per_node": cpu,
            # Pages a node faulted in afresh: a frame's buffers mapped anew each time (malloc_keep_mb) show here.
            "minor_faults_per_s": faults,
            "max_rss_mb": rss,
            # What else the machine ran meanwhile (MachineShare), in cores: other_, bench_, irq_, steal_cpu_cores
            # over the run, and `other` each second as polled (`worst_second_ratio_from_start`'s seconds).
            **{f"{k}_cpu_cores": v for k, v in share.over_run().items()},
            "other_cpu_cores_per_second": share.per_second(),
            "takeovers": serving.takeovers, "codec_backend": nu["codec_backend"],
            "e2e_commit_p50_ms": nu["e2e_commit_p50_ms"], "e2e_commit_p99_ms": nu["e2e_commit_p99_ms"],
            # A backup that fell behind is trimmed before it is sent: N' then gets only checkpoints and the
            # run looks as cheap as no HA. The share of tuples N' actually received shows it.
            "backup_coverage": round(nu["counters"].get("backup_tuples", 0) / total, 3) if standby else 0.0,
            # Positions never sent because Nd's acks covered them first (a resync's skip to a checkpoint),
            # and how far the standby's acks were behind when Nd held everything.
            "backup_skipped": nu["backup_skipped"] if standby else 0, "backup_behind_at_end": behind,
            # What the standby decoded of the backup it received: a lazy one only what it had to process.
            "standby_decoded_ratio": round(n2.get("backup_decoded_tuples", 0) / max(1, n2.get("backup_tuples", 0)), 3)
            if standby else 0.0}


def kafka_throughput(bootstrap: str, *, total: int = 300_000, standby: bool = True, operator: str = "python",
                     prefix: str = "", skip: int = 0, extra: dict[str, Any] | None = None) -> dict:
    """The same pipeline with the Kafka source and the results topic: `total` ticks in the source topics
    first (written here unless `prefix` names topics that hold them), then the nodes started; tuples/s from
    Nu's first admission (or, given `skip`, from N's first `skip` tuples processed: the Spark operator's
    first micro-batch) to the last output in Nd."""
    import random

    from lazystandby.sources.kafka_generator import generate
    from lazystandby.sources.kafka_source import Topics

    if not prefix:
        prefix = f"b{random.getrandbits(32):x}."
        generate(bootstrap, ["I1", "I2"], total, topics=Topics(prefix))
    settings = {"bsize": 10, "codec": "zstd-stream-dict", "rate": 0.0, "operator": operator,
                "kafka_bootstrap": bootstrap, "topic_prefix": prefix}
    if operator == "spark":
        settings.update(SPARK_DETECTOR)
    settings.update(extra or {})
    with (scratch("lazystandby-bench-") as work, Topology(settings, work, with_standby=standby) as topo,
          topo.poller() as poller):
        topo.start_all()
        t0, first = nu_time(poller, "first_admitted_at", 60), 0
        pids = {k: p.pid for k, p in topo.procs.items()}
        usage0 = _proc_usage(pids)  # read just after Nu's first admission: start-up and imports left out
        serving = Serving(topo, poller.status)
        if skip:
            wait_until(lambda: serving.processed() >= skip, 300, step=0.02)
            t0, first = time.monotonic(), serving.processed()
        if (extra or {}).get("query"):
            # A window query's positions are not its ticks (Nu adds watermark records and leaves late ticks
            # out): done once Nu has read every record and the primary has processed all it admitted.
            wait_until(lambda: nu_read_all(topo.status(NU)) and serving.processed() >= topo.status(NU)["head"],
                       600)
        else:
            wait_until(lambda: serving.processed() >= total, 600)
        n = serving.status()
        wait_until(lambda: topo.status(ND)["delivered_through"] >= n["processed"][1], 60)
        elapsed = time.monotonic() - t0
        usage = _proc_usage(pids)
        cpu = {k: round(u[0], 2) for k, u in usage.items()}
        run = {k: round(u[0] - usage0[k][0], 2) for k, u in usage.items()}
    return {"tuples": total, "standby": standby, "operator": operator, "tuples_per_s": round((total - first) / elapsed),
            "cpu_seconds": cpu, "cpu_seconds_run": run, "topic_prefix": prefix, "skipped_tuples": first,
            "takeovers": serving.takeovers}


SPARK_FAIR_TUPLES = 1_000_000  # records in Kafka that the Spark pipeline and the direct query both read
SPARK_MAX_ROWS = NodeConfig.spark_max_rows  # records per micro-batch, for both


@dataclass(frozen=True)
class Plan:
    """How many rounds, trials and kills each measurement takes. Every figure is a median over its rounds
    (the configurations take turns within a round), so fewer rounds keep every key and widen its spread;
    the summary's `rounds` says what ran."""

    name: str
    bsizes: tuple[str, ...]  # the trade-off's Bsizes
    trials: int  # failover trials per Bsize and codec in the trade-off
    throughput_rounds: int  # rounds of the standby / no-standby pair at full speed
    side_rounds: int  # rounds of the other throughput configurations (Bsize 1 and inf, zstd)
    paced_rounds: int  # rounds of the pair paced at GOAL_RATE
    kafka_rounds: int  # runs of the Kafka path and of each exactly-once peer (Quix, Kafka Streams, Flink)
    spark_fair_rounds: int  # rounds of the Spark pipeline against the direct Spark query
    jvm_kills: int  # kills of the active Kafka Streams instance and of the Flink job
    spark_kills: int  # kills of N with the Spark operator (each trial starts two Spark sessions)
    # Tuples of each full-speed run. The full plan's 12,000,000 last 6-12 s at 1.0-1.9 M tuples/s; with
    # 4,000,000 (2-4 s) start-up (a standby registering, a codec dictionary trained) fell in one of only
    # 1-3 full seconds and moved the median run and its worst second. The quick plan's half keeps 3-6 s.
    throughput_tuples: int

    def rounds(self) -> dict[str, int]:
        return {k: v for k, v in vars(self).items() if isinstance(v, int)}


QUICK = Plan("quick", ("1", "10", "inf"), trials=1, throughput_rounds=2, side_rounds=1, paced_rounds=1,
             kafka_rounds=1, spark_fair_rounds=1, jvm_kills=1, spark_kills=1, throughput_tuples=6_000_000)
FULL = Plan("full", ("1", "2", "10", "15", "20", "25", "30", "35", "40", "45", "50", "inf"), trials=30,
            throughput_rounds=3, side_rounds=3, paced_rounds=2, kafka_rounds=3, spark_fair_rounds=3, jvm_kills=3,
            spark_kills=5, throughput_tuples=12_000_000)


def spark_fair(bootstrap: str, reps: int) -> dict:
    """Our pipeline with the Spark operator (standby on) and a direct Spark query over the same records
    already in Kafka, both without their session start and first micro-batch: `reps` rounds, each over
    records of its own (a pipeline's topics hold its state), the two taking turns; each side's median run,
    and their ratio. (One round each swung from 0.85 to 1.24 on the same code.)"""
    import random

    from bench.spark_peer import direct_throughput
    from lazystandby.sources.kafka_generator import generate
    from lazystandby.sources.kafka_source import Topics

    directs, pipelines = [], []
    for rep in range(reps):
        prefix = f"sf{random.getrandbits(32):x}."
        generate(bootstrap, ["I1", "I2"], SPARK_FAIR_TUPLES, topics=Topics(prefix))
        print(f"Spark, fair peer {rep + 1}/{reps}: the direct query over the records in Kafka", file=sys.stderr,
              flush=True)
        directs.append(direct_throughput(bootstrap, total=SPARK_FAIR_TUPLES, prefix=prefix,
                                         max_rows=SPARK_MAX_ROWS))
        print(f"Spark, fair peer {rep + 1}/{reps}: the pipeline (Spark operator, standby on) over the same "
              f"records", file=sys.stderr, flush=True)
        pipelines.append(kafka_throughput(bootstrap, total=SPARK_FAIR_TUPLES, operator="spark", prefix=prefix,
                                          skip=SPARK_MAX_ROWS))
    direct, ours = median_run(directs), median_run(pipelines)
    return {"direct": direct, "pipeline": ours,
            "ratio": round(ours["tuples_per_s"] / direct["tuples_per_s"], 3) if direct["tuples_per_s"] else 0.0,
            "ratio_rounds": cost_rounds(pipelines, directs)}


def spark_failover(kills: int) -> dict:
    """Kills of N with the Spark operator: `make failover-check OPERATOR=spark`'s own run, `kills` trials."""
    import subprocess

    p = subprocess.run([sys.executable, "-m", "lazystandby.cli", "failover-check", "--operator", "spark",
                        "--kills", str(kills)], capture_output=True, text=True, timeout=3600)
    lines = p.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError(f"failover-check with the Spark operator printed nothing: {p.stderr[-2000:]}")
    return json.loads(lines[-1])


QUIX_PYTHON = ROOT / ".cache" / "quix-venv" / "bin" / "python"


def quix_throughput(bootstrap: str, prefix: str, total: int) -> dict:
    """Quix Streams with exactly-once doing the same selection over the same topics (bench/quix_peer.py,
    in its own venv: `make quix-venv`)."""
    import subprocess

    if not QUIX_PYTHON.exists():
        raise RuntimeError(f"{QUIX_PYTHON} is missing: run `make quix-venv` (bench-quick does)")
    p = subprocess.run([str(QUIX_PYTHON), str(ROOT / "bench" / "quix_peer.py"), bootstrap, prefix, str(total)],
                       capture_output=True, text=True, timeout=600, env={"PATH": os.environ.get("PATH", "")})
    if p.returncode != 0:
        raise RuntimeError(f"the Quix Streams peer failed: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def jvm_failover_keys(peer: str, runs: list[dict], worst_failover_ms: float) -> dict:
    """A JVM peer's failover in the summary: the median of its runs, the duplicates over all of them, and
    that median over our worst failover p95."""
    median = statistics.median(r["failover_ms"] for r in runs)
    return {f"{peer}_failover_ms": median, f"{peer}_failover_duplicated": sum(r["duplicated"] for r in runs),
            f"failover_speedup_vs_{peer}": round(median / worst_failover_ms, 1)}


def same_selection(quix: dict, other: dict, name: str) -> None:
    """Peer `name` read the records the Quix peer read and kept the same ones, or their rates compare
    different work."""
    q, k = (quix["tuples"], quix["selected"]), (other["tuples"], other["selected"])
    if q != k:
        raise RuntimeError(f"the peers did different work: Quix Streams read {q[0]} and kept {q[1]}, "
                           f"{name} read {k[0]} and kept {k[1]}")


def backup_codec_cost(total: int = 1_000_000, bsize: int = 10, codec: str = "zstd-stream-dict",
                      passes: int = 3) -> dict:
    """CPU per tuple of the backup's codec alone, in one thread with nothing beside it, over the generator's
    ticks in runs of 20,480 (what Nu cuts at full speed): Nu's side (RunEncoder: cut Bsize batches, compress
    each on its own) and N''s (decompress a run, check and rebuild its batches). And the floor: zstd with the
    same parameters and dictionary over each run's bytes in one call each way, no batch boundaries.

    Each figure is the least of `passes` passes, each with fresh encoders: on this machine's two vCPUs the
    same pass reads up to 1.76 times as much CPU when something runs beside it (just after the Spark runs,
    say), and a floor is what the work costs when nothing else slows it.

    A standby costs at least the floor's compression per tuple (every tuple is compressed once; a lazy
    standby decompresses only what it needs, `standby_decoded_ratio`), so on saturated cores a pipeline
    with it runs at most no_ha / (no_ha + that) as fast as one without it, with no_ha that pipeline's CPU per
    tuple: `ha_cost_ratio_bound` in the summary."""
    import numpy as np

    from lazystandby.core.tuples import TupleBatch
    from lazystandby.sources.base import GeneratorSource

    src, runs, first = GeneratorSource([f"s{i}" for i in range(4)], total=total), [], 0
    while not src.exhausted:
        r = src.poll(20_480)
        runs.append(TupleBatch(first, np.asarray(r.stream, np.uint16), r.seqs, r.payloads))
        first += len(runs[-1])
    done = [_codec_pass(runs, bsize, codec) for _ in range(max(1, passes))]
    times = {k: min(d[k] for d in done) for k in ("enc", "dec", "floor_enc", "floor_dec", "batch")}
    us = 1e6 / first
    return {"tuples": first, "encode_us_per_tuple": round(times["enc"] * us, 3),
            "decode_us_per_tuple": round(times["dec"] * us, 3),
            "us_per_tuple": round((times["enc"] + times["dec"]) * us, 3),
            "floor_us_per_tuple": round((times["floor_enc"] + times["floor_dec"]) * us, 3),
            "floor_encode_us_per_tuple": round(times["floor_enc"] * us, 3),
            "batch_floor_encode_us_per_tuple": round(times["batch"] * us, 3),
            "raw_bytes_per_tuple": round(done[0]["raw"] / first, 1), "backend": done[0]["backend"],
            "compressed_vs_raw": round(done[0]["compressed"] / done[0]["raw"], 3), "passes": len(done)}


def _codec_pass(runs: list, bsize: int, codec: str) -> dict:
    """One pass of backup_codec_cost over `runs` with fresh encoders: each part's thread CPU seconds."""
    import zstandard as zstd

    from lazystandby import native
    from lazystandby.core.batching import RunEncoder
    from lazystandby.core.codec import BatchDecoder, BatchEncoder, CodecName
    from lazystandby.core.tuples import decode_runs, encode_runs, layout_runs

    # Nu's own compressor (lazystandby.native where it is built), as in the pipeline.
    enc, dec = RunEncoder(codec, bsize=bsize, native=native.compressor()), BatchDecoder("bench")
    t = time.thread_time()
    sent = [enc.encode(b) for b in runs]
    t_enc = time.thread_time() - t
    t = time.thread_time()
    for br in sent:
        raw, pos = dec.decode_run(br.encoded)
        dec.commit(pos)
        decode_runs(raw, br.first, br.counts[0], br.encoded.raw_sizes)
    t_dec = time.thread_time() - t
    joined = [b"".join(encode_runs(b, bsize, seq_deltas=True)) for b in runs]
    # The link's own encoder, so the floor's parameters are the link's by construction: each run as one batch.
    whole_enc = BatchEncoder(CodecName(codec), bsize=bsize, native=native.compressor())
    whole_enc.set_dictionary(enc.encoder.dictionary)
    t = time.thread_time()
    whole = [whole_enc.encode_run([j]).payload for j in joined]
    t_floor_enc = time.thread_time() - t
    do = zstd.ZstdDecompressor(dict_data=zstd.ZstdCompressionDict(enc.encoder.dictionary)).decompressobj()
    t = time.thread_time()
    back = [do.decompress(w) for w in whole]
    t_floor_dec = time.thread_time() - t
    if back != joined:
        raise RuntimeError("the floor's zstd round trip changed the bytes")
    # Each Bsize batch compressed and flushed on its own, as the backup must be, and nothing else: the link's
    # encoder over runs laid out beforehand (in one native call per run where it is built).
    batch_enc = BatchEncoder(CodecName(codec), bsize=bsize, native=native.compressor())
    batch_enc.set_dictionary(enc.encoder.dictionary)
    layouts = [layout_runs(b, bsize, seq_deltas=True) for b in runs]
    t = time.thread_time()
    for lay in layouts:
        batch_enc.encode_layout(lay)
    t_batch = time.thread_time() - t
    return {"enc": t_enc, "dec": t_dec, "floor_enc": t_floor_enc, "floor_dec": t_floor_dec, "batch": t_batch,
            "raw": sum(map(len, joined)), "compressed": sum(len(b.encoded.payload) for b in sent),
            "backend": enc.encoder.backend}


def cpu_us_per_tuple(run: dict) -> float:
    """CPU of every node per tuple through the pipeline (their cores times the run's seconds, over its tuples)."""
    return round(sum(run["cpu_cores_per_node"].values()) / run["tuples_per_s"] * 1e6, 3)


def ha_cost_bound(ha: dict, no_ha: dict, codec_cost: dict) -> dict:
    """What the standby costs in CPU per tuple, measured in the throughput runs, and the best `ha_cost_ratio`
    those cores allow given the codec's floor (backup_codec_cost): compressing every tuple once, since a
    lazy standby decompresses only what it needs."""
    ha_us, no_ha_us = cpu_us_per_tuple(ha), cpu_us_per_tuple(no_ha)
    floor = codec_cost["floor_encode_us_per_tuple"]
    return {"ha_cpu_us_per_tuple": ha_us, "no_ha_cpu_us_per_tuple": no_ha_us,
            "backup_codec_us_per_tuple": codec_cost["us_per_tuple"],
            "backup_codec_floor_us_per_tuple": codec_cost["floor_us_per_tuple"],
            "backup_codec_floor_encode_us_per_tuple": floor, "backup_codec_backend": codec_cost["backend"],
            "ha_cost_ratio_bound": round(no_ha_us / (no_ha_us + floor), 3),
            # The same with each batch compressed on its own (the backup's rule): the bound this codec allows.
            "backup_codec_batch_floor_encode_us_per_tuple": codec_cost["batch_floor_encode_us_per_tuple"],
            "ha_cost_ratio_bound_batched": round(no_ha_us / (no_ha_us + codec_cost["batch_floor_encode_us_per_tuple"]),
                                                 3)}


def cpu_us_per_tuple_by_node(run: dict) -> dict[str, float]:
    """Each node's CPU per tuple through the pipeline: where a standby's cost lands (Nu's encoding, N''s
    decoding) and what it does to the others on shared cores."""
    return {k: round(v / run["tuples_per_s"] * 1e6, 3) for k, v in run["cpu_cores_per_node"].items()}


def cost_rounds(ha_runs: list[dict], no_ha_runs: list[dict]) -> list[float]:
    """`ha_cost_ratio` (or any one side's rate over the other's, as `spark_pipeline_vs_direct`) within each
    round (the two run one after the other, so each pair shares the machine's state of that minute): the
    spread behind the median's single figure."""
    return [round(h["tuples_per_s"] / n["tuples_per_s"], 3) for h, n in zip(ha_runs, no_ha_runs, strict=True)]


def paced_keys(ha_runs: list[dict], no_ha_runs: list[dict], rate: float) -> dict:
    """The same two pipelines with the generator paced at `rate` (GOAL_RATE): whether each holds
    it, how even its seconds are, and what the standby costs there in CPU, which at full speed shows only
    as throughput. Rates from the median runs, as the full-speed keys. Cores are not: paced runs all go at
    the pace, so the median by rate is any run, while the machine's speed moves CPU per tuple by a fifth
    from one round to the next (a median by rate can pick the standby's run from one round and the other's
    from the other). The cores are each pipeline's median over its runs, and the standby's
    CPU ratio is taken within each round, as `ha_cost_ratio_rounds`, then the median of those."""
    ha, no_ha = median_run(ha_runs), median_run(no_ha_runs)

    def cores(run: dict) -> float:
        return sum(run["cpu_cores_per_node"].values())

    per_round = [round(cores(h) / cores(n), 3) if cores(n) else 0.0 for h, n in zip(ha_runs, no_ha_runs, strict=True)]
    return {"paced_rate_tuples_per_s": round(rate), "paced_tuples_per_s": ha["tuples_per_s"],
            "paced_no_ha_tuples_per_s": no_ha["tuples_per_s"],
            "paced_ha_cost_ratio": round(ha["tuples_per_s"] / no_ha["tuples_per_s"], 3),
            "paced_ha_cost_ratio_rounds": cost_rounds(ha_runs, no_ha_runs),
            "paced_worst_second_ratio": ha["worst_second_ratio"],
            "paced_no_ha_worst_second_ratio": no_ha["worst_second_ratio"],
            "paced_backup_coverage": ha["backup_coverage"],
            "paced_cpu_cores": {"ha": round(statistics.median(map(cores, ha_runs)), 3),
                                "no_ha": round(statistics.median(map(cores, no_ha_runs)), 3)},
            "paced_standby_cpu_ratio": round(statistics.median(per_round), 3),
            "paced_standby_cpu_ratio_rounds": per_round,
            "paced_max_rss_mb": ha["max_rss_mb"]}


def machine_share_keys(ha_runs: list[dict], no_ha_runs: list[dict]) -> dict:
    """What else the machine ran during each round's throughput runs (MachineShare), in cores: over each run,
    and in its busiest polled second; and the most any of them had stolen by the hypervisor. A round whose
    rate or slowest second stands out beside a busy neighbour is the machine's, not the pipeline's."""
    def each(f: Callable[[dict], float]) -> dict[str, list[float]]:
        return {"ha": [f(r) for r in ha_runs], "no_ha": [f(r) for r in no_ha_runs]}

    return {"other_cpu_cores_rounds": each(lambda r: r["other_cpu_cores"]),
            "other_cpu_cores_max_second_rounds": each(lambda r: max(r["other_cpu_cores_per_second"], default=0.0)),
            "steal_cpu_cores_max": max(r["steal_cpu_cores"] for r in (*ha_runs, *no_ha_runs))}


BUSY_MACHINE_CORES = 0.15  # other work beyond the accounting's skew (-0.07 to 0 here on an idle machine)


def busy_machine_warning(keys: dict) -> str | None:
    """A line for the reader when other work ran beside the throughput runs (machine_share_keys): their
    rates and ratios then read low, and the bench is better run again on a quiet machine than published."""
    worst = max((c for runs in keys["other_cpu_cores_max_second_rounds"].values() for c in runs), default=0.0)
    if worst <= BUSY_MACHINE_CORES:
        return None
    return (f"bench: WARNING: other work on this machine took up to {worst:.2f} cores in a second of the "
            f"throughput runs (other_cpu_cores_max_second_rounds): their rates and ratios read low")


def median_run(rs: list[dict]) -> dict:
    """The run with the median rate, with every run's rate alongside."""
    ordered = sorted(rs, key=lambda r: r["tuples_per_s"])
    return {**ordered[len(ordered) // 2], "runs_tuples_per_s": [r["tuples_per_s"] for r in rs]}


def summarize(rows: list[dict]) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault(r["bsize"], {}).setdefault(r["codec"], []).append(r)
    summary: dict = {}
    for b, per in out.items():
        summary[b] = {}
        for c, rs in per.items():
            def m(k, rs=rs):
                return round(statistics.mean(x[k] for x in rs), 4)

            def sd(k, rs=rs):
                return round(statistics.stdev(x[k] for x in rs), 4) if len(rs) > 1 else 0.0

            fo = sorted(x["failover_ms"] for x in rs)
            # The backup's bytes on the wire over the same bytes uncompressed, within each trial: the codec's
            # "x uncompressed" without the spread between two trials' timing (the run with codec none is
            # another trial, killed at another moment; at Bsize 10 its overhead ranged 0.85-1.00).
            vs_raw = [x["overhead"] / x["overhead_raw"] for x in rs if x["overhead_raw"]]
            summary[b][c] = {"overhead": m("overhead"), "overhead_sd": sd("overhead"),
                             "vs_uncompressed": round(statistics.mean(vs_raw), 4) if vs_raw else 0.0,
                             "recovery_ms": m("recovery_ms"), "recovery_ms_sd": sd("recovery_ms"),
                             "reconnection_ms": m("reconnection_ms"), "data_recovery_ms": m("data_recovery_ms"),
                             "failover_ms": m("failover_ms"),
                             "failover_ms_p95": fo[min(len(fo) - 1, int(0.95 * len(fo)))],
                             "resent_by_nu": m("resent_by_nu"), "replayed_from_oq": m("replayed_from_oq"),
                             "trials": len(rs)}
    return summary


def plot(rows: list[dict], thr: list[dict], name: str, spark: dict | None = None) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def save(fig, filename: str) -> Path:
        fig.tight_layout()
        path = RESULTS / filename
        fig.savefig(path, dpi=90)
        plt.close(fig)
        return path

    s = summarize(rows)
    bs = list(s)
    x = list(range(len(bs)))
    paths = []
    for fig_name, codec, title in (("fig6", "none", "Fig 6: no compression"),
                                   ("fig7", "zstd", "Fig 7: compressed (per-batch zstd)")):
        if not all(codec in s[b] for b in bs):
            continue
        fig, ax1 = plt.subplots(figsize=(7, 4))
        ax1.plot(x, [s[b][codec]["overhead"] for b in bs], "o-", label="bandwidth overhead")
        ax1.set_ylabel("overhead (backup/primary bytes)")
        ax2 = ax1.twinx()
        ax2.plot(x, [s[b][codec]["recovery_ms"] for b in bs], "s--", color="C1", label="recovery time")
        ax2.errorbar(x, [s[b][codec]["recovery_ms"] for b in bs], yerr=[s[b][codec]["recovery_ms_sd"] for b in bs],
                     fmt="none", ecolor="C1", alpha=0.5, capsize=3)
        ax2.set_ylabel("recovery ms (reconnection + data), mean ± sd")
        ax2.set_ylim(bottom=0)
        ax1.set_xticks(x, bs)
        ax1.set_xlabel("Bsize")
        ax1.set_title(f"{title} — this machine")
        fig.legend(loc="upper right", bbox_to_anchor=(0.85, 0.85), fontsize=8)
        paths.append(save(fig, f"{name}-{fig_name}.png"))
    fig, ax = plt.subplots(figsize=(7, 4))
    for codec in CODECS:
        if all(codec in s[b] for b in bs):
            ax.plot(x, [s[b][codec]["overhead"] for b in bs], "o-", label=codec)
    ax.set_xticks(x, bs)
    ax.set_xlabel("Bsize")
    ax.set_ylabel("overhead")
    ax.set_title("Fig 8: overhead by codec against Bsize")
    ax.legend(fontsize=8)
    paths.append(save(fig, f"{name}-fig8.png"))
    # Where the recovered tuples come from, against Bsize: the data side of seed 000's trade-off.
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ref = next(c for c in ("zstd-stream-dict", "zstd", "none", *CODECS) if all(c in s[b] for b in bs))
    ax.plot(x, [s[b][ref]["resent_by_nu"] for b in bs], "o-", label="resent by Nu (not in N''s backup)")
    ax.plot(x, [s[b][ref]["replayed_from_oq"] for b in bs], "s--", label="replayed from OQ' (N''s own outputs)")
    ax.set_xticks(x, bs)
    ax.set_xlabel("Bsize")
    ax.set_ylabel("tuples at failover (mean)")
    ax.set_title(f"Recovery sources against Bsize ({ref})")
    ax.legend(fontsize=8)
    paths.append(save(fig, f"{name}-sources.png"))
    if spark:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        fo = [max(v["failover_ms_p95"] for v in s[b].values()) for b in bs]
        labels = [*bs, "Spark\nrestart"]
        ax.bar(labels, [*fo, spark["restart"]["restart_recovery_ms"]], color=["C0"] * len(bs) + ["C3"])
        ax.set_xlabel("Bsize (worst codec's p95)")
        ax.set_yscale("log")
        ax.set_ylabel("kill -> live output, ms (log)")
        ax.set_title("Failover p95 (Lazy Standby) vs Spark's checkpoint restart")
        paths.append(save(fig, f"{name}-vs-spark.png"))
    if thr:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        labels = [("Bsize " + t["bsize"] if t["standby"] else "no HA")
                  + (" Spark op" if t["operator"] == "spark" else "") for t in thr]
        vals = [t["tuples_per_s"] for t in thr]
        if spark:
            labels.append("Spark direct")
            vals.append(spark["throughput"]["tuples_per_s"])
        ax.bar(labels, vals)
        ax.set_ylabel("tuples/s end to end")
        ax.set_title("Throughput end to end: with HA (Bsize), no standby, Spark alone")
        ax.tick_params(axis="x", labelsize=7)
        paths.append(save(fig, f"{name}-throughput.png"))
    return paths


def spark_peer(plan: Plan) -> dict:
    """Spark's restart recovery and direct throughput, and our pipeline's throughput on Kafka, on a broker
    of their own (or KAFKA_BOOTSTRAP)."""
    import os

    from bench import jvm_peers
    from bench.spark_peer import restart_recovery
    from lazystandby.harness.kafka_broker import LocalKafka

    def measure(b: str) -> dict:
        # A run over 300,000 records lasts about two seconds, so one run swings with the machine: the two
        # take turns, `plan.kafka_rounds` rounds (each round's topics fresh: a pipeline's topics hold its state),
        # and each side reports its median.
        runs, quix, jvm = [], [], {"kstreams": [], "flink": []}
        reps = plan.kafka_rounds
        for rep in range(reps):
            print(f"Kafka path {rep + 1}/{reps}: the pipeline with the Kafka source and the results topic",
                  file=sys.stderr, flush=True)
            runs.append(kafka_throughput(b))
            print(f"Kafka path {rep + 1}/{reps}: Quix Streams (exactly-once) over the same topics",
                  file=sys.stderr, flush=True)
            quix.append(quix_throughput(b, runs[-1]["topic_prefix"], runs[-1]["tuples"]))
            for peer, done in jvm.items():
                print(f"Kafka path {rep + 1}/{reps}: {jvm_peers.NAMES[peer]} (exactly-once) over the same "
                      f"topics", file=sys.stderr, flush=True)
                done.append(jvm_peers.select_throughput(peer, b, runs[-1]["topic_prefix"], runs[-1]["tuples"]))
                same_selection(quix[-1], done[-1], jvm_peers.NAMES[peer])
        kafka = median_run(runs)
        kafka["quix_eos"] = median_run(quix)
        kafka["kstreams_eos"] = median_run(jvm["kstreams"])
        kafka["flink_eos"] = median_run(jvm["flink"])
        fair = spark_fair(b, plan.spark_fair_rounds)
        ks_failovers, flink_failovers = [], []
        for rep in range(plan.jvm_kills):
            print(f"Kafka Streams failover {rep + 1}/{plan.jvm_kills}: two instances, the active one killed",
                  file=sys.stderr, flush=True)
            ks_failovers.append(jvm_peers.kstreams_failover(b))
            print(f"Flink failover {rep + 1}/{plan.jvm_kills}: killed, started again from its newest checkpoint",
                  file=sys.stderr, flush=True)
            flink_failovers.append(jvm_peers.flink_failover(b))
        return {"restart": restart_recovery(b), "throughput": fair["direct"], "fair": fair, "kafka": kafka,
                "kstreams_failover": ks_failovers, "flink_failover": flink_failovers}

    if os.environ.get("KAFKA_BOOTSTRAP"):
        return measure(os.environ["KAFKA_BOOTSTRAP"])
    broker = LocalKafka(ROOT / "run" / "bench-kafka")
    broker.start()
    try:
        return measure(broker.bootstrap)
    finally:
        broker.stop()


def replot(name: str) -> list[Path]:
    """Draw the plots again from a finished run's files (run/bench, or docs/bench with --publish)."""
    with open(RESULTS / f"{name}.csv", newline="") as f:
        rows = [{k: (v if k in ("bsize", "codec") else float(v)) for k, v in r.items()} for r in csv.DictReader(f)]
    d = json.loads((RESULTS / f"{name}.json").read_text())
    return plot(rows, d["throughput"], name, d.get("spark"))


MAIN_PAIR = (("10", "zstd-stream-dict", True), ("10", "zstd-stream-dict", False))  # the headline ratio's runs
SIDE_CONFIGS = (("1", "zstd-stream-dict", True), ("inf", "zstd-stream-dict", True), ("10", "zstd", True))


def full_speed_runs(plan: Plan) -> tuple[dict[tuple, list[dict]], list[dict]]:
    """Throughput at full speed, with mutual TLS (the default). On 2 cores it swings by up to 20 % between
    identical runs (thread scheduling in a GIL-bound Nu): the configurations take turns within each round,
    and each reports its median run. The side configurations run in the first `plan.side_rounds` rounds
    only, with the headline configuration plaintext right after its TLS run (`tls_cost_ratio`); those
    plaintext runs are returned apart."""
    runs: dict[tuple, list[dict]] = {c: [] for c in (*MAIN_PAIR, *SIDE_CONFIGS)}
    plain: list[dict] = []
    for rep in range(plan.throughput_rounds):
        for bsize, codec, standby in (*MAIN_PAIR, *(SIDE_CONFIGS if rep < plan.side_rounds else ())):
            print(f"throughput {rep + 1}/{plan.throughput_rounds}: Bsize {bsize} {codec} standby={standby}",
                  file=sys.stderr, flush=True)
            runs[(bsize, codec, standby)].append(throughput(bsize=bsize, codec=codec, standby=standby,
                                                            total=plan.throughput_tuples))
            if rep < plan.side_rounds and (bsize, codec, standby) == MAIN_PAIR[0]:
                print(f"throughput {rep + 1}/{plan.throughput_rounds}: the same, plaintext", file=sys.stderr,
                      flush=True)
                plain.append(throughput(bsize=bsize, codec=codec, standby=standby, total=plan.throughput_tuples,
                                        tls=False))
    return runs, plain


def tls_cost_keys(tls_runs: list[dict], plain_runs: list[dict]) -> dict:
    """Throughput with mutual TLS over plaintext, each round's pair run back to back (the first rounds')."""
    pairs = list(zip(tls_runs, plain_runs, strict=False))
    ratios = [round(t["tuples_per_s"] / p["tuples_per_s"], 3) for t, p in pairs]
    return {"tls_cost_ratio": statistics.median(ratios) if ratios else None, "tls_cost_ratio_rounds": ratios,
            "throughput_plaintext_tuples_per_s": statistics.median(p["tuples_per_s"] for p in plain_runs)
            if plain_runs else None}


def paced_runs(plan: Plan) -> dict[bool, list[dict]]:
    """The standby / no-standby pair with the generator paced at GOAL_RATE, taking turns."""
    paced: dict[bool, list[dict]] = {True: [], False: []}
    for rep in range(plan.paced_rounds):
        for standby in (True, False):
            print(f"paced at {GOAL_RATE:,.0f} tuples/s {rep + 1}/{plan.paced_rounds}: standby={standby}",
                  file=sys.stderr, flush=True)
            paced[standby].append(throughput(bsize="10", codec="zstd-stream-dict", standby=standby,
                                             total=PACED_TUPLES, rate=GOAL_RATE))
    return paced


class Phases:
    """Wall seconds of each phase of a run, in the order they ran (`phase_seconds` in the summary)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def run(self, name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.monotonic()
        try:
            return fn()
        finally:
            self.seconds[name] = round(time.monotonic() - t0, 1)


@dataclass
class Measured:
    """What one run measured, phase by phase, before it is summarised."""

    rows: list[dict]  # the trade-off's trials
    runs: dict[tuple, list[dict]]  # full speed, by (Bsize, codec, standby)
    thr: list[dict]  # each configuration's median run, the Spark operator's last
    paced: dict[bool, list[dict]]  # by standby
    spark_op: dict
    spark: dict  # spark_peer's: Spark's restart and direct query, the Kafka path and its peers
    spark_fo: dict  # failover-check --operator spark
    codec_cost: dict
    plain: list[dict]  # the headline configuration plaintext (tls_cost_ratio)


def measure(plan: Plan, codecs: list[str], phases: Phases) -> Measured:
    """Every phase of a run, in order, each timed in `phases`."""
    rows = phases.run("tradeoff", lambda: tradeoff(list(plan.bsizes), codecs, plan.trials, total=20_000,
                                                   rate=10_000.0, kill_after=1.0))
    runs, plain = phases.run("throughput", lambda: full_speed_runs(plan))
    thr = [median_run(rs) for rs in runs.values()]
    paced = phases.run("paced", lambda: paced_runs(plan))
    print("throughput: Bsize 10 zstd standby=True, Spark operator", file=sys.stderr, flush=True)
    spark_op = phases.run("spark_operator", lambda: throughput(bsize="10", codec="zstd", standby=True,
                                                               total=300_000, operator="spark"))
    thr.append(spark_op)
    print("Spark's own recovery and throughput, the Kafka path and its peers", file=sys.stderr, flush=True)
    spark = phases.run("kafka_and_peers", lambda: spark_peer(plan))
    print("Spark operator failovers: failover-check --operator spark", file=sys.stderr, flush=True)
    spark_fo = phases.run("spark_failover", lambda: spark_failover(plan.spark_kills))
    print("the backup codec's CPU per tuple, alone", file=sys.stderr, flush=True)
    codec_cost = phases.run("backup_codec", backup_codec_cost)
    return Measured(rows, runs, thr, paced, spark_op, spark, spark_fo, codec_cost, plain)


def result_of(m: Measured, summary: dict, plan: Plan, phases: Phases, seconds: float, pngs: list[Path]) -> dict:
    """The results file's content: every figure of the run, the summary's keys among them."""
    runs, thr, paced, spark_op, spark, spark_fo, codec_cost = (m.runs, m.thr, m.paced, m.spark_op, m.spark, m.spark_fo,
                                                                m.codec_cost)
    ha = next(t for t in thr if t["standby"] and t["bsize"] == "10" and t["codec"] == "zstd-stream-dict"
              and t["operator"] == "python")
    no_ha = next(t for t in thr if not t["standby"])
    worst_failover_ms = max(v["failover_ms_p95"] for per in summary.values() for v in per.values())
    result = {
        "name": plan.name, "machine": f"{platform.machine()} {platform.node()} cores=2", "seconds": round(seconds),
        "tradeoff": summary, "throughput": thr,
        "throughput_tuples_per_s": ha["tuples_per_s"], "throughput_no_ha_tuples_per_s": no_ha["tuples_per_s"],
        "ha_cost_ratio": round(ha["tuples_per_s"] / no_ha["tuples_per_s"], 3),
        "backup_coverage": ha["backup_coverage"], "worst_second_ratio": ha["worst_second_ratio"],
        "worst_second": ha["worst_second"],
        # Each round's run, as ha_cost_ratio_rounds: the published figure is one run's slowest second.
        "worst_second_ratio_rounds": [r["worst_second_ratio"] for r in runs[MAIN_PAIR[0]]],
        "no_ha_worst_second_ratio_rounds": [r["worst_second_ratio"] for r in runs[MAIN_PAIR[1]]],
        # The same measure without a standby: how much this machine's seconds vary with no backup to starve.
        "no_ha_worst_second_ratio": no_ha["worst_second_ratio"],
        # Counts polled each second from Nu's start, so the first second also holds the pipeline's fill,
        # `first_output_ms` (worst_second_ratio counts from N's first frame instead).
        "worst_second_ratio_from_start": ha["worst_second_ratio_from_start"],
        "worst_second_ratio_from_start_rounds": [r["worst_second_ratio_from_start"]
                                                 for r in runs[MAIN_PAIR[0]]],
        "no_ha_worst_second_ratio_from_start": no_ha["worst_second_ratio_from_start"],
        "first_output_ms": ha["first_output_ms"], "no_ha_first_output_ms": no_ha["first_output_ms"],
        "backup_skipped": ha["backup_skipped"], "backup_behind_at_end": ha["backup_behind_at_end"],
        "standby_decoded_ratio": ha["standby_decoded_ratio"],
        "max_rss_mb": ha["max_rss_mb"],
        "backup_codec": codec_cost,
        **ha_cost_bound(ha, no_ha, codec_cost),
        **tls_cost_keys(runs[MAIN_PAIR[0]], m.plain),
        "ha_cost_ratio_rounds": cost_rounds(runs[MAIN_PAIR[0]], runs[MAIN_PAIR[1]]),
        "cpu_us_per_tuple_by_node": {"ha": cpu_us_per_tuple_by_node(ha), "no_ha": cpu_us_per_tuple_by_node(no_ha)},
        **machine_share_keys(runs[MAIN_PAIR[0]], runs[MAIN_PAIR[1]]),
        **paced_keys(paced[True], paced[False], GOAL_RATE),
        "paced_runs": {"ha": paced[True], "no_ha": paced[False]},
        "minor_faults_per_s_by_node": {"ha": ha["minor_faults_per_s"], "no_ha": no_ha["minor_faults_per_s"]},
        "spark": spark,
        "spark_restart_recovery_ms": spark["restart"]["restart_recovery_ms"],
        "spark_restart_duplicated": spark["restart"]["duplicated"],
        "spark_direct_tuples_per_s": spark["throughput"]["tuples_per_s"],
        "spark_pipeline_tuples_per_s": spark["fair"]["pipeline"]["tuples_per_s"],
        "spark_generator_tuples_per_s": spark_op["tuples_per_s"],
        "spark_failover": spark_fo,
        "spark_failover_ms_p95": spark_fo["recovery_ms_p95"],
        "spark_failover_speedup": round(spark["restart"]["restart_recovery_ms"] / max(1.0, spark_fo["recovery_ms_p95"]),
                                        1),
        "kafka_throughput_tuples_per_s": spark["kafka"]["tuples_per_s"],
        "quix_eos_tuples_per_s": spark["kafka"]["quix_eos"]["tuples_per_s"],
        "kafka_vs_quix_eos": round(spark["kafka"]["tuples_per_s"] / spark["kafka"]["quix_eos"]["tuples_per_s"], 2),
        **{key: value for peer in ("kstreams", "flink")
           for key, value in jvm_failover_keys(peer, spark[f"{peer}_failover"], worst_failover_ms).items()},
        "flink_eos_tuples_per_s": spark["kafka"]["flink_eos"]["tuples_per_s"],
        "kafka_vs_flink_eos": round(spark["kafka"]["tuples_per_s"] / spark["kafka"]["flink_eos"]["tuples_per_s"], 2),
        "kstreams_eos_tuples_per_s": spark["kafka"]["kstreams_eos"]["tuples_per_s"],
        "kafka_vs_kstreams_eos": round(spark["kafka"]["tuples_per_s"] / spark["kafka"]["kstreams_eos"]["tuples_per_s"],
                                       2),
        "spark_pipeline_vs_direct": spark["fair"]["ratio"],
        "spark_pipeline_vs_direct_rounds": spark["fair"]["ratio_rounds"],
        "failover_speedup_vs_spark": round(spark["restart"]["restart_recovery_ms"] / worst_failover_ms, 1),
        "plots": [str(p.relative_to(ROOT)) for p in pngs],
        "rounds": plan.rounds(), "phase_seconds": phases.seconds,
        "cpu": cpu_model(), "cores": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2),
    }
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--trials", type=int, default=None, help="per Bsize and codec (quick 1, full 30)")
    ap.add_argument("--codecs", default="", help="comma-separated (default: every codec)")
    ap.add_argument("--replot", default="", help="only draw the plots of a finished run (quick or full)")
    ap.add_argument("--publish", action="store_true", help="write into docs/bench (the README's), not run/bench")
    a = ap.parse_args(argv)
    global RESULTS
    if a.publish:
        RESULTS = PUBLISHED
    if a.replot:
        print("\n".join(str(p) for p in replot(a.replot)))
        return 0
    codecs = a.codecs.split(",") if a.codecs else CODECS
    RESULTS.mkdir(parents=True, exist_ok=True)
    plan = QUICK if a.quick else FULL
    if a.trials:
        plan = replace(plan, trials=a.trials)
    name = plan.name
    t0 = time.time()
    phases = Phases()
    m = measure(plan, codecs, phases)
    summary = summarize(m.rows)
    with open(RESULTS / f"{name}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(m.rows[0]))
        w.writeheader()
        w.writerows(m.rows)
    pngs = plot(m.rows, m.thr, name, m.spark)
    result = result_of(m, summary, plan, phases, time.time() - t0, pngs)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=1))
    # The summary's keys are its declaration's (lazystandby.harness.results), in that order; the trade-off
    # keeps three figures per cell (the results file has them all).
    flat = {k: result[k] for k in results.SUMMARIES["bench"].names()}
    flat["tradeoff"] = {b: {c: {"overhead": v["overhead"], "recovery_ms": v["recovery_ms"],
                                "vs_uncompressed": v["vs_uncompressed"]} for c, v in per.items()}
                        for b, per in summary.items()}
    warning = busy_machine_warning(result)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    print(results.dumps("bench", flat))
    return 0


def guarded_main(argv: list[str] | None = None) -> int:
    """main, stopped cleanly by SIGTERM or Ctrl-C: the run under way stops its nodes, brokers and peers on
    the way out, and no process the bench started outlives it (operator_procs.no_process_left)."""
    with no_process_left():
        try:
            return main(argv)
        except KeyboardInterrupt:
            print("bench: stopped; every process it started was stopped", file=sys.stderr, flush=True)
            return 130


if __name__ == "__main__":
    sys.exit(guarded_main())
