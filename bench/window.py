"""`make bench-window`: the keyed window query, measured apart from `make bench-quick` (which it leaves
as it is).

- `window_throughput_tuples_per_s`: the `window` example query (one-second windows by symbol) with the
  Python operator, a standby on, Kafka source and results topic: ticks/s from Nu's first admission to the
  last result in Nd, over ticks written to the topics first; `window_throughput_no_ha_tuples_per_s` the
  same without a standby.
- `flink_window_eos_tuples_per_s`, `kstreams_window_eos_tuples_per_s`: the same query by Flink and Kafka
  Streams with exactly-once (bench/jvm/WindowQuery.java, bench.jvm_peers.window_throughput) over the same
  pre-filled topics, after ours, in the same run.
- `window_failover_ms_by_keys`: N killed while the state holds many keys. The query is FAILOVER_QUERY (one
  window of 30 minutes of event time, about 1.44 M ticks, so that the state at the kill holds about every
  key drawn), the generator draws from 1,000, 100,000 or 1,000,000 symbols (`--keys`), N is killed after
  KILL_AFTER_S seconds of load at RATE, and the failover is the launcher's (fault to the new primary
  live). The window closes after the kill, so every trial's results, all of the state, are checked against
  the truth table. `window_live_keys_at_kill` is the standby's state at the kill (groups held).
- `flink_window_failover_ms_by_keys`, `kstreams_window_failover_ms_by_keys`: the peers under the same
  query, keys, rate and kill time (bench.jvm_peers.window_failover): Flink restarted from its newest
  checkpoint, Kafka Streams' standby replica taking over; timed from the kill to the first input that
  arrived after it applied to the state of the instance that took over.

- `window_throughput_bound_tuples_per_s`: the most a pipeline with a warm standby can reach on this
  machine's cores. The standby applies every input to its state, so the pipeline costs at least what the
  run without a standby cost per tuple (`window_no_ha_cpu_us_per_tuple`, every node's CPU from Nu's first
  admission to the last result) plus the operator's own cost per tick (`window_operator_us_per_tuple`:
  the query alone over generated ticks in calls of OPERATOR_CALL, one thread, the least of 3 passes);
  cores over that sum is the bound, and `window_throughput_bound_over_flink` / `_over_kstreams` what it
  allows against the peers' figures.

Results: run/bench/window.json (docs/bench with --publish), a JSON summary as the last line.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from lazystandby.harness import results
from lazystandby.harness.kafka_broker import LocalKafka
from lazystandby.harness.launcher import run_dir, run_trial
from lazystandby.harness.operator_procs import no_process_left
from lazystandby.harness.places import N2

from . import jvm_peers
from .harness import kafka_throughput, machine_keys, write_details

FAILOVER_QUERY = "SELECT symbol, count(*), avg(price), max(price) FROM ticks GROUP BY window(ts, '30 minutes'), symbol"
FAILOVER_WINDOW_MS = 30 * 60_000  # the peers' window: FAILOVER_QUERY's
KEYS = (1_000, 100_000, 1_000_000)
RATE = 20_000.0
KILL_AFTER_S = 65.0  # 1.3 M ticks in: the one window (1.25 ms of event time a tick) closes after the kill
PEERS = ("flink", "kstreams")
OPERATOR_CALL = 32_768  # ticks per call in window_operator_us_per_tuple: a standby's bulk calls (frame_max)


def _say(what: str) -> None:
    print(f"bench-window: {what}", file=sys.stderr, flush=True)


def failover_by_keys(keys: int, trials: int) -> dict:
    out = []
    for t in range(trials):
        r = run_trial(fault="kill-primary", bsize=10, total=int(RATE * (KILL_AFTER_S + 10)), rate=RATE,
                      kill_after=KILL_AFTER_S, seed=7 + t, timeout=300,
                      extra={"query": FAILOVER_QUERY, "keys": keys, "exit_when_fenced": True})
        if not r["ok"]:
            raise RuntimeError(f"window failover with {keys:,} keys was not exact: logs in {r['workdir']}")
        rec = r["recovery"]
        out.append({"failover_ms": round(r["recovery_ms"], 1),
                    "live_keys": r["before"][N2].get("state_keys", 0),
                    "state_lag_tuples": r["before"][N2].get("state_lag_tuples", 0),
                    "results": r["expected"],
                    # The phases, to tell what grows with the state (launcher.failover_check's names).
                    **{k: round(rec.get(k, 0.0), 1) for k in ("detection_ms", "reconnection_ms",
                                                                "data_recovery_ms", "catch_up_ms")},
                    **{k: rec.get(k, 0) for k in ("resent_by_nu", "backlog_at_takeover")}})
    return {"failover_ms": round(statistics.median(o["failover_ms"] for o in out), 1),
            "live_keys": max(o["live_keys"] for o in out), "trials": out}


def peer_failover_by_keys(peer: str, bootstrap: str, keys: int, trials: int) -> dict:
    out = [jvm_peers.window_failover(peer, bootstrap, keys=keys, size_ms=FAILOVER_WINDOW_MS, rate=RATE,
                                     kill_after=KILL_AFTER_S) for _ in range(trials)]
    return {"failover_ms": round(statistics.median(o["failover_ms"] for o in out), 1), "trials": out}


def operator_us_per_tuple(ticks: int = 400_000, passes: int = 3) -> float:
    """CPU microseconds per tick of the `window` query's Python operator alone, in one thread: generated
    ticks of two streams with a watermark record every `NodeConfig.watermark_every` positions (the newest
    tick's event time, as Nu's placer gives when the streams keep pace), in calls of OPERATOR_CALL. The
    least of `passes` passes, each with a fresh operator: the floor of what applying the ticks costs."""
    import numpy as np
    import pyarrow as pa

    from lazystandby.config import NodeConfig
    from lazystandby.core.tuples import TupleBatch
    from lazystandby.formats import control
    from lazystandby.formats.query import parse_query
    from lazystandby.operators.window import WindowAggregate
    from lazystandby.sources.generator import Interleaved

    every = NodeConfig.watermark_every - 1
    streams, seqs, payloads = Interleaved(["I1", "I2"]).take(ticks)
    event = np.array([int(p.split(b",")[3]) for p in payloads.to_pylist()], np.int64)
    cols: tuple[list, list, list] = ([], [], [])
    for i in range(0, ticks, every):
        cols[0].extend([streams[i:i + every] + 1, np.zeros(1, np.int64)])
        cols[1].extend([seqs[i:i + every], np.zeros(1, np.int64)])
        cols[2].extend([payloads.slice(i, every),
                        pa.array([control.encode_watermark(int(event[i:i + every].max()))], pa.binary())])
    all_streams, all_seqs, all_payloads = np.concatenate(cols[0]), np.concatenate(cols[1]), pa.concat_arrays(cols[2])
    best = float("inf")
    for _ in range(max(1, passes)):
        op = WindowAggregate(parse_query("window"))
        t0 = time.thread_time()
        for i in range(0, len(all_payloads), OPERATOR_CALL):
            op.process(TupleBatch(i + 1, all_streams[i:i + OPERATOR_CALL], all_seqs[i:i + OPERATOR_CALL],
                                  all_payloads.slice(i, OPERATOR_CALL)))
        best = min(best, time.thread_time() - t0)
    return round(best / ticks * 1e6, 3)


def bound_keys(no_ha: dict, operator_us: float, peers: dict, cores: int) -> dict:
    """`window_throughput_bound_*` (see the module's docstring) from the run without a standby."""
    no_ha_us = sum(no_ha["cpu_seconds_run"].values()) / no_ha["tuples"] * 1e6
    bound = round(cores * 1e6 / (no_ha_us + operator_us)) if no_ha_us + operator_us > 0 else 0
    return {"window_no_ha_cpu_us_per_tuple": round(no_ha_us, 3), "window_operator_us_per_tuple": operator_us,
            "window_throughput_bound_tuples_per_s": bound,
            **{f"window_throughput_bound_over_{peer}": round(bound / max(1, peers[peer]["tuples_per_s"]), 2)
               for peer in PEERS}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench-window", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=1, help="kills per key count (the median is reported)")
    ap.add_argument("--tuples", type=int, default=1_000_000, help="ticks of the throughput runs")
    ap.add_argument("--publish", action="store_true", help="write into docs/bench, not run/bench")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    broker = LocalKafka(run_dir() / "bench-window-kafka").start()
    try:
        b = broker.bootstrap
        _say("throughput: the pipeline, standby on")
        ha = kafka_throughput(b, total=a.tuples, extra={"query": "window"})
        _say("throughput: the pipeline, no standby")
        no_ha = kafka_throughput(b, total=a.tuples, standby=False, extra={"query": "window"})
        peers = {}
        for peer in PEERS:
            _say(f"throughput: {jvm_peers.NAMES[peer]} (exactly-once) over the same topics")
            peers[peer] = jvm_peers.window_throughput(peer, b, ha["topic_prefix"], a.tuples)
        _say("the operator alone, one thread")
        operator_us = operator_us_per_tuple()
        by_keys, peer_keys = {}, {peer: {} for peer in PEERS}
        for k in KEYS:
            _say(f"failover with {k:,} keys: the pipeline")
            by_keys[k] = failover_by_keys(k, a.trials)
            for peer in PEERS:
                _say(f"failover with {k:,} keys: {jvm_peers.NAMES[peer]}")
                peer_keys[peer][k] = peer_failover_by_keys(peer, b, k, a.trials)
    finally:
        broker.stop()
    f1k, f1m = by_keys[1_000]["failover_ms"], by_keys[1_000_000]["failover_ms"]
    ours = ha["tuples_per_s"]
    summary = {
        "window_query": "window", "window_throughput_tuples_per_s": ha["tuples_per_s"],
        "window_throughput_no_ha_tuples_per_s": no_ha["tuples_per_s"],
        "window_failover_query": FAILOVER_QUERY,
        "window_failover_ms_by_keys": {str(k): v["failover_ms"] for k, v in by_keys.items()},
        "window_live_keys_at_kill": {str(k): v["live_keys"] for k, v in by_keys.items()},
        "window_failover_ratio_1m_over_1k": round(f1m / f1k, 2) if f1k else None,
        **{f"{peer}_window_eos_tuples_per_s": peers[peer]["tuples_per_s"] for peer in PEERS},
        **{f"window_throughput_over_{peer}": round(ours / max(1, peers[peer]["tuples_per_s"]), 2)
           for peer in PEERS},
        **{f"{peer}_window_failover_ms_by_keys": {str(k): v["failover_ms"] for k, v in peer_keys[peer].items()}
           for peer in PEERS},
        **{f"{peer}_window_failover_over_ours_1m": round(peer_keys[peer][1_000_000]["failover_ms"] / f1m, 1)
           if f1m else None for peer in PEERS},
        **bound_keys(no_ha, operator_us, peers, os.cpu_count() or 1),
        "window_failover_trials": a.trials, "window_throughput_tuples": a.tuples,
        **machine_keys(t0),
    }
    out = write_details("window.json", a.publish, {
        "summary": summary, "throughput": [ha, no_ha], "peer_throughput": peers,
        "failover": {str(k): v for k, v in by_keys.items()},
        "peer_failover": {p: {str(k): v for k, v in d.items()} for p, d in peer_keys.items()}})
    print(f"details: {out}", file=sys.stderr)
    print(results.dumps("bench-window", summary))
    return 0


if __name__ == "__main__":
    with no_process_left():
        sys.exit(main())
