"""`make chaos-campaign RUNS=n`: faults drawn at random from the whole catalog, one at a time and in pairs,
against a running load on the Kafka source, with the truth table checked after each.

Every run starts Nu, N, N', Nd as processes on loopback over a fresh set of topics, writes a load of
`--total` ticks at `--rate`/s, injects its fault (or two, the second after a random delay) at a random
moment while the load flows, and then waits at most `--bound` seconds for Nd to hold every expected output.
A run is `stalled` if it did not; `lost` and `duplicated` add up over all runs. Every third run is a
double fault (a catalog sequence, or two faults composed at random); when a composition leaves no
operator alive, a new standby is started in N's place, as an operator would. With a pipeline of several
stages (`--pipeline`, CREATE VIEW), each fault hits a stage drawn at random, and half the double faults
are two faults at two stages at once. Last line: a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

from .. import config
from ..core.batching import format_bsize
from ..formats.pipeline import query_text
from . import results
from .faults import Fault, Runner, for_runner
from .launcher import pipeline_load_defaults, run_dir, run_trial
from .operator_procs import no_process_left
from .stages import count, first_stage_args, name_of
from .trial_spec import TrialSpec

# The node settings a campaign takes for all of its runs (flags or LS_* env vars, as `failover-check`).
CAMPAIGN_SETTINGS = ("codec", "bsize", "query", "pipeline")
# run_trial's verdicts besides lost, duplicated and wrong, named in a run's row when they fail.
FAILED_CHECKS = ("completed", "late_exact", "late_letters_exact", "dead_letters_exact",
                 "forged_refused", "unexpected", "out_of_order")

SINGLE_COMPOSABLE = ("kill-primary", "stop-primary", "pause-primary", "kill-standby", "kill-upstream-restart",
                     "kill-downstream-restart", "pause-downstream", "forged-deliver", "forged-push", "forged-backup",
                     "decompression-bomb", "partition-primary-standby", "isolate-primary", "partition-upstream-primary",
                     "partition-primary-downstream")


def compose(a: Fault, b: Fault, delay: float) -> Fault:
    """`a`, then `b` `delay` seconds later: a double fault. Whether a takeover happens depends on the
    timing, so only the output is required (complete and exact); forged calls must still be refused."""
    steps = (*a.steps, replace(b.steps[0], delay=delay + b.steps[0].delay), *b.steps[1:])
    return Fault(f"{a.name}+{b.name}", f"{a.expect}; then {b.expect}", steps, kafka=a.kafka or b.kafka)


def draw(rng: random.Random, i: int, catalog: dict[str, Fault]) -> Fault:
    # A campaign runs the Python operator: faults that need the Spark operator are not drawn.
    catalog = {n: f for n, f in catalog.items() if not f.unfit_for("python")}
    doubles = [f for f in catalog.values() if f.double]
    if i % 3 == 2:  # every third run: two faults
        if rng.random() < 0.5:
            return rng.choice(doubles)
        a, b = rng.sample(SINGLE_COMPOSABLE, 2)
        return compose(catalog[a], catalog[b], round(rng.uniform(0.0, 1.0), 2))
    return catalog[rng.choice(sorted(n for n, f in catalog.items() if not f.double))]


def draw_staged(rng: random.Random, i: int, catalog: dict[str, Fault], stages: int) -> dict[int, Fault]:
    """A fault per stage hit, for a pipeline of `stages` stages: `draw`'s fault at a stage drawn at random,
    except half the double faults, which are two composable faults at two stages at once (the composable
    ones all run on the Python operator, as `draw`'s do)."""
    if i % 3 == 2 and stages > 1 and rng.random() < 0.5:
        a, b = rng.sample(SINGLE_COMPOSABLE, 2)
        k, m = rng.sample(range(1, stages + 1), 2)
        return {k: catalog[a], m: catalog[b]}
    return {rng.randint(1, stages): draw(rng, i, catalog)}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str]) -> int:
    """The campaign; SIGTERM or Ctrl-C stops it, its broker and the run under way, and leaves no process."""
    with no_process_left():
        try:
            return _campaign(argv)
        except KeyboardInterrupt:
            print("lazystandby chaos-campaign: stopped", file=sys.stderr)
            return 130


def _campaign(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="lazystandby chaos-campaign", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=None, help="draws are random; a seed repeats a campaign")
    ap.add_argument("--total", type=int, default=None, help="ticks (records) of load per run (default 20,000; a "
                    "pipeline's: enough for its windows to close, launcher.pipeline_load_defaults)")
    ap.add_argument("--rate", type=float, default=None, help="ticks (records)/s of load (default 10,000; a "
                    "pipeline's: what its stages keep up with)")
    ap.add_argument("--bound", type=float, default=60.0, help="seconds a run may take to complete its output")
    ap.add_argument("--insecure", action="store_true", help="plaintext nodes (default: mutual TLS, a CA per run)")
    for name in CAMPAIGN_SETTINGS:
        ap.add_argument(f"--{name}", default=None, help=f"node setting {name} of every run (env LS_{name.upper()})")
    # (`--query window`: every run a keyed window aggregation, its results against the pandas truth table.)
    a = ap.parse_args(argv)
    try:  # typed and checked as the nodes would, before any broker starts
        given = [f"--{n}={getattr(a, n)}" for n in CAMPAIGN_SETTINGS if getattr(a, n) is not None]
        pipeline = a.pipeline or os.environ.get("LS_PIPELINE", "")
        staged = count(pipeline)
        cfg = config.load(given + first_stage_args(pipeline), env=os.environ)  # as stage 1 takes them
    except ValueError as e:
        print(f"lazystandby chaos-campaign: {e}", file=sys.stderr, flush=True)
        return 2
    load = pipeline_load_defaults(config.pipeline_stages(pipeline)) if pipeline else {"total": 20_000, "rate": 10_000.0}
    a.total = a.total if a.total is not None else load["total"]
    a.rate = a.rate if a.rate is not None else load["rate"]
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    catalog = {n: f for n, f in for_runner(Runner.PROCESSES).items() if f.steps}  # "none" is no fault to draw
    broker = None
    bootstrap = config.kafka_bootstrap_from_env()
    if not bootstrap:
        from .kafka_broker import LocalKafka

        print("starting a local Kafka broker ...", file=sys.stderr, flush=True)
        broker = LocalKafka(run_dir() / "campaign-kafka").start()
        bootstrap = broker.bootstrap
    base = _base_spec(a, cfg, bootstrap)
    t0 = time.monotonic()
    runs: list[dict] = []
    try:
        for i in range(a.runs):
            fault = draw_staged(rng, i, catalog, staged) if staged > 1 else draw(rng, i, catalog)
            at = round(rng.uniform(0.3, 0.6 * a.total / a.rate), 2)
            row = _one_run(i, fault, at, base, rng)
            runs.append(row)
            print(f"run {i + 1}/{a.runs}: {row['fault']}{' (double)' if row['double'] else ''} at {at}s: "
                  f"{row['got']}/{row['expected']} lost={row['lost']} dup={row['duplicated']} "
                  f"stalled={row['stalled']} ok={row['ok']} ({time.monotonic() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
    finally:
        if broker is not None:
            broker.stop()
    summary = _summary(runs, cfg, a, seed, t0)
    out = run_dir() / "chaos-campaign.json"
    out.write_text(json.dumps({"summary": summary, "runs": runs}, indent=1))
    print(f"details: {out}", file=sys.stderr)
    print(results.dumps("chaos-campaign", summary))
    return 0 if summary["failed_runs"] == 0 and summary["stalled"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def _base_spec(a, cfg, bootstrap: str) -> TrialSpec:
    """What every run of the campaign runs; each adds its fault, moment and seed. Supervised, as launch and
    the stack run them: a node that exits to be replaced (70: a dead loop, 75: fenced) is started again."""
    return TrialSpec(total=a.total, rate=a.rate, timeout=a.bound, pipeline=cfg.pipeline, kafka=bootstrap,
                     bsize=cfg.bsize, codec=str(cfg.codec), tls=not a.insecure,
                     extra={"heartbeat_interval": 0.2, "heartbeat_misses": 5, "exit_when_fenced": True,
                            **({"query": cfg.query} if cfg.query else {})})


def _one_run(i: int, fault: Fault | dict[int, Fault], at: float, base: TrialSpec, rng: random.Random) -> dict:
    """Run i of the campaign: a trial of `base` under `fault` (a fault per stage hit, for a pipeline of
    several stages) at `at` s, as a row of the campaign's details."""
    try:
        r = run_trial(base, fault=fault, kill_after=at, seed=rng.randrange(1000))
    except Exception as e:  # the harness itself failed: a failed run, and the campaign goes on
        r = {"ok": False, "lost": 0, "duplicated": 0, "expected": 0, "got": 0, "delivered_all": True,
             "failovers": 0, "workdir": "", "error": f"{type(e).__name__}: {e}"[:300]}
    name, double = (name_of(fault), len(fault) > 1 or any(f.double for f in fault.values())) \
        if isinstance(fault, dict) else (fault.name, fault.double)
    row = {"run": i + 1, "fault": name, "double": double, "across_stages": isinstance(fault, dict) and len(fault) > 1,
           "at_s": at, "ok": r["ok"],
           "lost": r["lost"], "duplicated": r["duplicated"], "wrong": r.get("wrong", 0),
           "expected": r["expected"], "got": r["got"],
           "stalled": not r["delivered_all"], "failovers": r["failovers"],
           "recovery_ms": round(r["recovery_ms"], 1) if "recovery_ms" in r else None,
           "workdir": r["workdir"] if not r["ok"] else "", "error": r.get("error", ""),
           # Which of the trial's checks failed, where the counts above do not say why it is not ok.
           "failed_checks": [k for k in FAILED_CHECKS if r.get(k) is False or (
               k in ("unexpected", "out_of_order") and r.get(k, 0))]}
    return row


def _summary(runs: list[dict], cfg, a, seed: int, t0: float) -> dict:
    """The campaign's JSON summary (harness/results.py, "chaos-campaign")."""
    summary = {
        "runs": len(runs), "lost": sum(r["lost"] for r in runs), "duplicated": sum(r["duplicated"] for r in runs),
        "wrong": sum(r["wrong"] for r in runs),
        "query": query_text(config.pipeline_stages(cfg.pipeline)) if cfg.pipeline else cfg.parsed_query.text(),
        "pipeline": cfg.pipeline or None,
        "stalled": sum(r["stalled"] for r in runs), "double_faults": sum(r["double"] for r in runs),
        "across_stages": sum(r["across_stages"] for r in runs),
        "failed_runs": sum(not r["ok"] for r in runs), "harness_errors": sum(bool(r["error"]) for r in runs),
        "bound_s": a.bound, "seed": seed, "bsize": format_bsize(cfg.bsize), "codec": str(cfg.codec),
        "faults": {n: sum(r["fault"] == n for r in runs) for n in sorted({r["fault"] for r in runs})},
        "seconds": round(time.monotonic() - t0), "cpu": cpu_model(), "cores": os.cpu_count(),
        "load_1m": round(os.getloadavg()[0], 2),
    }
    return summary
