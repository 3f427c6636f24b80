"""Two commits' headline throughput on one machine, taking turns: whether a change moved bench-quick's
selection figures.

    make bench-ab BASE=<rev> [ROUNDS=8] [TUPLES=6000000] [KAFKA_TUPLES=300000]

bench-quick runs its headline pair (Bsize 10, zstd-stream-dict, with and without a standby) twice, and
on 2 cores a rate moves by up to 20 % between identical runs, so two runs at each commit cannot tell a
change's cost from the machine's spread. Here the base commit's tree (a git worktree, removed at the
end) and this tree run `bench.harness.throughput` in turn, the order swapped each round; each round's
pair ran within seconds of each other, so their ratio cancels most of what the machine did meanwhile.
The Kafka path's run (300,000 ticks by default, from fresh topics of one broker through the four nodes
to the results topic, with a standby) takes turns the same way. That run lasts about a second on 2
cores and each node's CPU is read to 10 ms, so a fixed cost per run weighs on its CPU per tuple: more
ticks (`--kafka-tuples`) tell a cost per tuple from one per run. The key figure is the median over
rounds of head / base (`ratio_ha`, `ratio_no_ha`, `ratio_kafka`; below 1: the head is slower), with
the rounds' least and greatest beside it, and the same for CPU per tuple.

No library runs an A/B of two source trees of a Python service; what is written here is the worktree,
the turns and the ratios. The base must have `bench.harness.throughput` with the keywords this calls
(every commit since the Kafka-free throughput run does).

Results: run/bench/ab-<base>-<head>.json (docs/bench with --publish); the JSON summary as the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import machine_keys, write_details
from lazystandby.harness.kafka_broker import LocalKafka
from lazystandby.harness.operator_procs import no_process_left

ROOT = Path(__file__).resolve().parent.parent
PROTO = Path("proto") / "lazystandby" / "v1" / "lazystandby.proto"
CONFIGS = ("ha", "no_ha", "kafka")
KAFKA_TUPLES = 300_000  # bench-quick's Kafka path
# What each run prints, after the marker, for this side to read: the run's own keys, nothing recomputed.
MARK = "AB-RESULT "
RUN = {"ha": "r = throughput(bsize='10', codec='zstd-stream-dict', standby=True, total={total})",
       "no_ha": "r = throughput(bsize='10', codec='zstd-stream-dict', standby=False, total={total})",
       "kafka": "r = kafka_throughput({bootstrap!r}, total={kafka_total})"}
REPORT = ("import json; from bench.harness import kafka_throughput, throughput; {run}; "
          "cpu = r.get('cpu_cores_per_node') or {{k: v / r['tuples'] * r['tuples_per_s'] "
          "for k, v in r['cpu_seconds_run'].items()}}; "
          "print({mark!r} + json.dumps({{'tuples_per_s': r['tuples_per_s'], 'cpu_cores_per_node': cpu}}))")


class ABError(RuntimeError):
    """A base that cannot be checked out or built, or a run that did not finish."""


def git(*args: str, cwd: Path = ROOT) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        raise ABError(f"git {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def head_label() -> str:
    """This tree's commit, marked `-dirty` when it has changes not committed (they run too)."""
    sha = git("rev-parse", "--short", "HEAD")
    return sha + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def prepare_base(rev: str, where: Path) -> tuple[str, Path]:
    """Check `rev` out at `where` (a detached worktree of this repository) and build what a checkout lacks:
    the protocol's modules and the native compressor, with this tree's interpreter. Returns (short sha,
    tree)."""
    sha = git("rev-parse", "--verify", "--short", f"{rev}^{{commit}}")
    git("worktree", "add", "--detach", str(where), sha)
    protoc = [sys.executable, "-m", "grpc_tools.protoc", "-Iproto", "--python_out=services",
              "--grpc_python_out=services", "--pyi_out=services", str(PROTO)]
    for cmd in (protoc, [sys.executable, "services/lazystandby/native/build.py"]):
        done = subprocess.run(cmd, cwd=where, capture_output=True, text=True)
        if done.returncode:
            raise ABError(f"building {sha}: {' '.join(cmd[1:3])} failed:\n{done.stderr[-2000:]}")
    return sha, where


def run_once(tree: Path, config: str, *, total: int, bootstrap: str = "", kafka_total: int = KAFKA_TUPLES) -> dict:
    """One run of `config` with `tree`'s code, its nodes started from that tree (the launcher's PYTHONPATH
    is its own tree's): `total` tuples in memory, `kafka_total` on the Kafka path. The Kafka path's CPU is
    its CPU seconds over the run's seconds, as cores."""
    run = RUN[config].format(total=total, bootstrap=bootstrap, kafka_total=kafka_total)
    code = REPORT.format(run=run, mark=MARK)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(tree / p) for p in ("services", "spark", ".")))
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True)
    found = [line for line in done.stdout.splitlines() if line.startswith(MARK)]
    if done.returncode or not found:
        raise ABError(f"the {config} run of {tree} ended with {done.returncode} and no "
                      f"result:\n{done.stderr[-3000:]}")
    r = json.loads(found[-1][len(MARK):])
    r["cpu_us_per_tuple"] = round(sum(r["cpu_cores_per_node"].values()) * 1e6 / r["tuples_per_s"], 4)
    r["load_1m"] = round(os.getloadavg()[0], 2)
    return r


def paired(base: list[dict], head: list[dict], key: str) -> dict:
    """head / base of `key`, round by round: the median and the rounds' least and greatest."""
    if not base or len(base) != len(head):
        raise ValueError(f"rounds to pair: {len(base)} of the base, {len(head)} of the head")
    ratios = [round(h[key] / b[key], 4) for b, h in zip(base, head, strict=True)]
    return {"median": round(statistics.median(ratios), 4), "min": min(ratios), "max": max(ratios),
            "rounds": ratios}


def compare(runs: dict[str, dict[str, list[dict]]]) -> dict:
    """The summary keys of each configuration's rounds (`runs[config][side]`)."""
    out: dict = {}
    for config, sides in runs.items():
        base, head = sides["base"], sides["head"]
        rate, cpu = paired(base, head, "tuples_per_s"), paired(base, head, "cpu_us_per_tuple")
        out.update({f"ratio_{config}": rate["median"], f"ratio_{config}_min": rate["min"],
                    f"ratio_{config}_max": rate["max"], f"cpu_ratio_{config}": cpu["median"],
                    f"base_{config}_tuples_per_s": statistics.median(r["tuples_per_s"] for r in base),
                    f"head_{config}_tuples_per_s": statistics.median(r["tuples_per_s"] for r in head)})
    return out


def turns(trees: dict[str, Path], rounds: int, total: int, bootstrap: str,
          kafka_total: int = KAFKA_TUPLES) -> dict[str, dict[str, list[dict]]]:
    """Every configuration, both sides, `rounds` times; the side that runs first alternates."""
    runs: dict[str, dict[str, list[dict]]] = {c: {"base": [], "head": []} for c in CONFIGS}
    for rnd in range(rounds):
        for config in CONFIGS:
            for side in ("base", "head") if rnd % 2 == 0 else ("head", "base"):
                r = run_once(trees[side], config, total=total, bootstrap=bootstrap, kafka_total=kafka_total)
                runs[config][side].append(r)
                print(f"round {rnd + 1}/{rounds} {config} {side}: {r['tuples_per_s']:,} tuples/s",
                      file=sys.stderr, flush=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the commit to compare this tree with (any git revision)")
    ap.add_argument("--rounds", type=int, default=8, help="pairs per configuration (each about 10 s a side)")
    ap.add_argument("--tuples", type=int, default=6_000_000, help="per run; bench-quick's is 6,000,000")
    ap.add_argument("--kafka-tuples", type=int, default=KAFKA_TUPLES,
                    help="per Kafka path run; more make its CPU per tuple less a matter of each run's fixed costs")
    ap.add_argument("--publish", action="store_true")
    a = ap.parse_args(argv)
    if a.rounds < 1 or a.tuples < 1 or a.kafka_tuples < 1:
        ap.error("--rounds, --tuples and --kafka-tuples must be at least 1")
    t0 = time.monotonic()
    head = head_label()
    with tempfile.TemporaryDirectory(prefix="lazystandby-ab-") as tmp:
        where = Path(tmp) / "base"
        broker = LocalKafka(Path(tmp) / "kafka")
        try:
            base, tree = prepare_base(a.base, where)
            broker.start()
            runs = turns({"base": tree, "head": ROOT}, a.rounds, a.tuples, broker.bootstrap, a.kafka_tuples)
        finally:
            broker.stop()
            if where.exists():
                git("worktree", "remove", "--force", str(where))
    summary = {"name": "ab", "base": base, "head": head, "rounds": a.rounds, "tuples": a.tuples,
               "kafka_tuples": a.kafka_tuples,
               **compare(runs), **machine_keys(t0)}
    path = write_details(f"ab-{base}-{head}.json", a.publish, {**summary, "runs": runs})
    summary["results"] = str(path.relative_to(ROOT))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    # SIGTERM or Ctrl-C: the broker is stopped and the base's worktree removed on the way out.
    with no_process_left():
        sys.exit(main())
