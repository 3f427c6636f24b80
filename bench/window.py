"""`make bench-window`: the keyed window query, measured apart from `make bench-quick` (which it leaves
as it is).

- `window_throughput_tuples_per_s`: the `window` example query (one-second windows by symbol) with the
  Python operator, a standby on, Kafka source and results topic: ticks/s from Nu's first admission to the
  last result in Nd, over ticks written to the topics first; `window_throughput_no_ha_tuples_per_s` the
  same without a standby.
- `window_failover_ms_by_keys`: N killed while the state holds many keys. The query is FAILOVER_QUERY
  (one-minute windows, so that one window holds about a minute of ticks), the generator draws from 1,000,
  100,000 or 1,000,000 symbols (`--keys`), N is killed after KILL_AFTER_S seconds of load, and the
  failover is the launcher's (fault to the new primary live). `window_live_keys_at_kill` is the standby's
  state at the kill (partial groups held). Every trial is checked against the truth table.

Flink's and Kafka Streams' window peers are not part of it yet. Results: run/bench/window.json (docs/bench
with --publish), a JSON summary as the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from lazystandby.harness import results
from lazystandby.harness.campaign import cpu_model
from lazystandby.harness.kafka_broker import LocalKafka
from lazystandby.harness.launcher import run_dir, run_trial
from lazystandby.harness.operator_procs import no_process_left

from .harness import PUBLISHED, RESULTS, kafka_throughput

FAILOVER_QUERY = "window 1m by symbol agg count, avg(price), max(price)"
KEYS = (1_000, 100_000, 1_000_000)
RATE = 20_000.0
KILL_AFTER_S = 70.0  # past the first minute: the first window is full when N is killed


def failover_by_keys(keys: int, trials: int) -> dict:
    out = []
    for t in range(trials):
        r = run_trial(fault="kill-primary", bsize=10, total=int(RATE * (KILL_AFTER_S + 8)), rate=RATE,
                      kill_after=KILL_AFTER_S, seed=7 + t, timeout=300,
                      extra={"query": FAILOVER_QUERY, "keys": keys, "exit_when_fenced": True})
        if not r["ok"]:
            raise RuntimeError(f"window failover with {keys:,} keys was not exact: logs in {r['workdir']}")
        out.append({"failover_ms": round(r["recovery_ms"], 1),
                    "live_keys": r["before"]["n2"].get("state_keys", 0),
                    "results": r["expected"]})
    return {"failover_ms": round(statistics.median(o["failover_ms"] for o in out), 1),
            "live_keys": max(o["live_keys"] for o in out), "trials": out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench-window", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=1, help="kills per key count (the median is reported)")
    ap.add_argument("--tuples", type=int, default=300_000, help="ticks of the throughput runs")
    ap.add_argument("--publish", action="store_true", help="write into docs/bench, not run/bench")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    broker = LocalKafka(run_dir() / "bench-window-kafka").start()
    try:
        ha = kafka_throughput(broker.bootstrap, total=a.tuples, extra={"query": "window"})
        no_ha = kafka_throughput(broker.bootstrap, total=a.tuples, standby=False, extra={"query": "window"})
    finally:
        broker.stop()
    by_keys = {k: failover_by_keys(k, a.trials) for k in KEYS}
    f1k, f1m = by_keys[1_000]["failover_ms"], by_keys[1_000_000]["failover_ms"]
    summary = {
        "window_query": "window", "window_throughput_tuples_per_s": ha["tuples_per_s"],
        "window_throughput_no_ha_tuples_per_s": no_ha["tuples_per_s"],
        "window_failover_query": FAILOVER_QUERY,
        "window_failover_ms_by_keys": {str(k): v["failover_ms"] for k, v in by_keys.items()},
        "window_live_keys_at_kill": {str(k): v["live_keys"] for k, v in by_keys.items()},
        "window_failover_ratio_1m_over_1k": round(f1m / f1k, 2) if f1k else None,
        "window_failover_trials": a.trials, "window_throughput_tuples": a.tuples,
        "seconds": round(time.monotonic() - t0), "cpu": cpu_model(), "cores": os.cpu_count(),
        "load_1m": round(os.getloadavg()[0], 2),
    }
    out = (PUBLISHED if a.publish else RESULTS) / "window.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"summary": summary, "throughput": [ha, no_ha],
                               "failover": {str(k): v for k, v in by_keys.items()}}, indent=1))
    print(f"details: {out}", file=sys.stderr)
    print(results.dumps("bench-window", summary))
    return 0


if __name__ == "__main__":
    with no_process_left():
        sys.exit(main())
