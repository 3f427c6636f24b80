"""`make bench-links`: seed 000's trade-off on shaped links. Each node runs in a network namespace of its own
behind a link of a preset's rate (harness.links); the `window` query runs with the Python operator at a fixed
source rate, N is killed in every trial, and each cell (link, Bsize) reports:

- `overhead`: backup bytes over primary-path bytes at Nu (what the standby costs on the wire);
- `failover_ms` (p50, p95 over the trials) and its phases, `detection_ms`, `reconnection_ms`,
  `data_recovery_ms` (medians), as the launcher measures them: kill to the new primary live;
- `resent_by_nu` (median): the tuples Nu sent the new primary again, which cross the link at its rate;
- `predicted_ms` (median): the standby's predicted recovery just before the kill (core/recovery_model.py),
  and over every trial `model_error_p95` and `model_error_p50`: |predicted - measured| / measured.

A larger Bsize sends less backup (the overhead falls) and leaves the standby further behind, so at the
takeover more must be resent and applied (the failover rises), the more so the slower the link. QUERY
makes that resend a known size: a standby without the backup rebuilds the one window open at the kill from
Nu's held inputs, and with 20-second windows (16,000 ticks of the generator's event time) killed 12,000
ticks in, that is about 12,000 ticks. With the one-second `window` example the open window is at most
800 ticks, and on 10mbit the failover rose only from 189 to 307 ms between Bsize 1 and inf: the fixed
detection (about 150 ms) dominates. `failover_ratio_inf_over_1` and `overhead_ratio_1_over_10000` are per
link.

Needs root and iproute2 (the namespaces). Results: run/bench/links.json (docs/bench with --publish) with
the figures beside it (`plot`), a JSON summary as the last line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from lazystandby.core.batching import format_bsize, parse_bsize
from lazystandby.harness import links, results
from lazystandby.harness.launcher import run_trial
from lazystandby.harness.operator_procs import no_process_left
from lazystandby.harness.places import NU, N

from .harness import machine_keys, write_details

BSIZES = ("1", "10", "100", "1000", "10000", "100000", "inf")
# Passive Standby beside the warm standby: the window query over a million keys, paced, on one preset.
# `snapshot` runs at STATES_BSIZE as `warm` does (the snapshots and the backup on the standby's link);
# `snapshot_inf` at Bsize inf, seed 001's Passive Standby: only the snapshots reach the standby, and Nu
# keeps the backup (from the first input of the open windows) to resend at a takeover.
STATES_BSIZE = 100
STATES = ("warm", "snapshot", "snapshot_inf")
STATE_SETTINGS = {"warm": ("warm", STATES_BSIZE), "snapshot": ("snapshot", STATES_BSIZE),
                  "snapshot_inf": ("snapshot", None)}
STATES_LINK = "100mbit"
STATES_KEYS = 1_000_000
STATES_RATE = 20_000.0
# Seconds of load per standby-state trial, and when N is killed: several snapshot intervals before the
# kill, so that what a Passive Standby's snapshots cost in steady state (deltas, no tail) shows.
STATES_SECONDS = 12.0
STATES_KILL_AFTER_S = 9.0
SNAPSHOT_INTERVAL = 2.0
PRESETS = ("10mbit", "100mbit", "1gbit")
RATE = 4_000.0  # ticks/s: the primary path and the backup at Bsize 1 fit the 10mbit link together
SECONDS = 6.0  # of load per trial; N is killed halfway
QUERY = "SELECT symbol, count(*), avg(price), max(price) FROM ticks GROUP BY window(ts, '20 seconds'), symbol"


def _say(what: str) -> None:
    print(f"bench-links: {what}", file=sys.stderr, flush=True)


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q / 100 * (len(xs) - 1))))]


def cell(link: str, bsize: str, trials: int, seed: int) -> dict:
    """One (link, Bsize) cell: `trials` kills of N, each checked exact."""
    rows = []
    for t in range(trials):
        r = run_trial(fault="kill-primary", bsize=parse_bsize(bsize), total=int(RATE * SECONDS), rate=RATE,
                      kill_after=SECONDS / 2, seed=seed + t, timeout=120, link=link,
                      extra={"query": QUERY, "exit_when_fenced": True})
        rec = r.get("recovery") or {}
        rows.append({"ok": r["ok"], "lost": r["lost"], "duplicated": r["duplicated"], "wrong": r.get("wrong", 0),
                     "failover_ms": r.get("recovery_ms"), "detection_ms": rec.get("detection_ms"),
                     "reconnection_ms": rec.get("reconnection_ms"), "data_recovery_ms": rec.get("data_recovery_ms"),
                     "notice_to_suspicion_ms": rec.get("notice_to_suspicion_ms"),
                     "resent_by_nu": rec.get("resent_by_nu"),
                     "predicted_ms": r.get("predicted_recovery_ms"), "predicted": r.get("predicted_recovery"),
                     "overhead": (r.get("after", {}).get(NU) or {}).get("overhead"), "link": r.get("link"),
                     "workdir": r["workdir"]})
    done = [x for x in rows if x["failover_ms"] is not None]

    def med(k: str) -> float | None:
        xs = [x[k] for x in done if x[k] is not None]
        return round(statistics.median(xs), 4 if k == "overhead" else 1) if xs else None

    fo = [x["failover_ms"] for x in done]
    for x in done:
        x["model_error"] = model_error(x["predicted_ms"], x["failover_ms"])
    return {"overhead": med("overhead"), "failover_ms_p50": round(_pct(fo, 50), 1) if fo else None,
            "failover_ms_p95": round(_pct(fo, 95), 1) if fo else None, "detection_ms": med("detection_ms"),
            "reconnection_ms": med("reconnection_ms"), "data_recovery_ms": med("data_recovery_ms"),
            "resent_by_nu": med("resent_by_nu"), "predicted_ms": med("predicted_ms"),
            "exact": all(x["ok"] for x in rows), "trials": rows}


def state_cell(state: str, trials: int, seed: int) -> dict:
    """One standby state (a key of STATE_SETTINGS): `trials` kills of N with the window query over
    STATES_KEYS keys at STATES_RATE on STATES_LINK. Per trial: the backup link's bytes per second before
    the kill (Nu's backup and the primary's snapshots; the snapshots apart, with how many were deltas), the
    standby's CPU over the primary's since their first input, and the failover."""
    rows = []
    kill_after = STATES_KILL_AFTER_S
    standby_state, bsize = STATE_SETTINGS[state]
    for t in range(trials):
        r = run_trial(fault="kill-primary", bsize=bsize, total=int(STATES_RATE * STATES_SECONDS),
                      rate=STATES_RATE,
                      kill_after=kill_after, seed=seed + t, timeout=180, link=STATES_LINK,
                      extra={"query": QUERY, "exit_when_fenced": True, "keys": STATES_KEYS,
                             "standby_state": standby_state, "snapshot_interval": SNAPSHOT_INTERVAL})
        b = r.get("before", {})
        primary = (b.get(N) or {}).get("counters", {})
        snapshots = primary.get("snapshot_bytes", 0)
        wire = (b.get(NU) or {}).get("counters", {}).get("backup_bytes", 0) + snapshots
        rows.append({"ok": r["ok"], "failover_ms": r.get("recovery_ms"),
                     "standby_cpu_ratio": r.get("standby_cpu_ratio"),
                     "backup_bytes_per_s": round(wire / kill_after),
                     "snapshot_bytes_per_s": round(snapshots / kill_after),
                     "snapshots": primary.get("snapshots_sent", 0),
                     "snapshot_deltas": primary.get("snapshot_deltas_sent", 0),
                     "predicted_ms": r.get("predicted_recovery_ms"), "workdir": r["workdir"]})
    done = [x for x in rows if x["failover_ms"] is not None]
    fo = [x["failover_ms"] for x in done]
    ratios = [x["standby_cpu_ratio"] for x in rows if x["standby_cpu_ratio"] is not None]
    return {"backup_bytes_per_s": round(statistics.median(x["backup_bytes_per_s"] for x in rows)),
            "snapshot_bytes_per_s": round(statistics.median(x["snapshot_bytes_per_s"] for x in rows)),
            "standby_cpu_ratio": round(statistics.median(ratios), 4) if ratios else None,
            "failover_ms_p50": round(_pct(fo, 50), 1) if fo else None,
            "failover_ms_p95": round(_pct(fo, 95), 1) if fo else None,
            "exact": all(x["ok"] for x in rows), "trials": rows}


def model_error(predicted_ms: float | None, measured_ms: float | None) -> float | None:
    """|predicted - measured| / measured for one trial; None when either is missing."""
    if predicted_ms is None or not measured_ms:
        return None
    return abs(predicted_ms - measured_ms) / measured_ms


def model_errors(grid: dict[str, dict[str, dict]]) -> list[float]:
    """Every trial's model error, over every cell; a trial without a prediction counts as an error of 1."""
    return [1.0 if t.get("model_error") is None else t["model_error"]
            for row in grid.values() for c in row.values() for t in c["trials"] if t["failover_ms"] is not None]


def model_errors_measured(grid: dict[str, dict[str, dict]], phase: str) -> list[float]:
    """Every trial's model error with one phase's terms taken as measured: `data` (the resend and replay
    terms replaced by the measured data recovery) or `detection` (the detection term replaced by the
    measured time from the kill to the suspicion: the failover less reconnection and data recovery). What
    the other terms leave: a bound on the model's error where that phase is what varies. Trials without
    a prediction are left out."""
    out = []
    for row in grid.values():
        for c in row.values():
            for t in c["trials"]:
                p = t.get("predicted")
                if t["failover_ms"] is None or not p or t.get("data_recovery_ms") is None:
                    continue
                if phase == "data":
                    term, measured = (p["resend_s"] + p["replay_s"]) * 1000, t["data_recovery_ms"]
                else:
                    term = p["detection_s"] * 1000
                    measured = t["failover_ms"] - t["reconnection_ms"] - t["data_recovery_ms"]
                out.append(model_error(t["predicted_ms"] - term + measured, t["failover_ms"]))
    return out


def _ratio(a: float | None, b: float | None, digits: int = 2) -> float | None:
    return round(a / b, digits) if a is not None and b else None


def plot(table: dict[str, dict[str, dict]], out_dir) -> list:
    """Per link, seed 000's Figs 6-7 on that link: the overhead and the failover (p50, p95) against Bsize
    (`links-<preset>.png`); and the data-recovery phase of every link against Bsize (`links-data.png`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for preset, row in table.items():
        bs = list(row)
        x = list(range(len(bs)))
        fig, ax1 = plt.subplots(figsize=(7, 4))
        ax1.plot(x, [row[b]["overhead"] for b in bs], "o-", label="bandwidth overhead")
        ax1.set_ylabel("overhead (backup/primary bytes)")
        ax2 = ax1.twinx()
        ax2.plot(x, [row[b]["failover_ms_p50"] for b in bs], "s--", color="C1", label="failover p50")
        ax2.plot(x, [row[b]["failover_ms_p95"] for b in bs], "^:", color="C3", label="failover p95")
        ax2.set_ylabel("kill -> live, ms")
        ax2.set_ylim(bottom=0)
        ax1.set_xticks(x, bs)
        ax1.set_xlabel("Bsize")
        ax1.set_title(f"Overhead and failover against Bsize on {preset}")
        fig.legend(loc="center", bbox_to_anchor=(0.5, 0.72), fontsize=8)
        fig.tight_layout()
        path = out_dir / f"links-{preset}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for preset, row in table.items():
        bs = list(row)
        ax.plot(range(len(bs)), [row[b]["data_recovery_ms"] for b in bs], "o-", label=preset)
        ax.set_xticks(range(len(bs)), bs)
    ax.set_xlabel("Bsize")
    ax.set_ylabel("data recovery, ms (median)")
    ax.set_title("Data recovery against Bsize, per link")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / "links-data.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return [*paths, path]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench-links", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=3, help="kills per cell")
    ap.add_argument("--links", default=",".join(PRESETS), help="link presets, comma-separated")
    ap.add_argument("--bsizes", default=",".join(BSIZES), help="Bsizes, comma-separated")
    ap.add_argument("--states", default=",".join(STATES),
                    help="standby states to weigh beside each other (empty: none), comma-separated")
    ap.add_argument("--publish", action="store_true", help="write into docs/bench, not run/bench")
    ap.add_argument("--plot", metavar="JSON", help="only draw the figures of a results file, beside it")
    a = ap.parse_args(argv)
    if a.plot:
        for path in plot(json.loads(Path(a.plot).read_text())["summary"]["links"], Path(a.plot).parent):
            print(path, file=sys.stderr)
        return 0
    if why := links.available():
        print(f"bench-links: {why}", file=sys.stderr)
        return 2
    presets = [p for p in a.links.split(",") if p]
    bsizes = [format_bsize(parse_bsize(b)) for b in a.bsizes.split(",") if b]
    for p in presets:
        links.parse_link(p)
    t0 = time.monotonic()
    grid: dict[str, dict[str, dict]] = {}
    for p in presets:
        for b in bsizes:
            _say(f"{p}, Bsize {b}: {a.trials} kill(s) of N")
            grid.setdefault(p, {})[b] = cell(p, b, a.trials, seed=7)
    states = {}
    for s in [s for s in a.states.split(",") if s]:
        _say(f"{STATES_LINK}, {s} standby, {STATES_KEYS:,} keys at {STATES_RATE:,.0f}/s: {a.trials} kill(s) of N")
        states[s] = state_cell(s, a.trials, seed=17)
    table = {p: {b: {k: v for k, v in c.items() if k != "trials"} for b, c in row.items()} for p, row in grid.items()}
    errors = model_errors(grid)
    summary = {
        "links": table, "query": QUERY, "rate": RATE, "trials": a.trials,
        "failover_ratio_inf_over_1": {p: _ratio(row.get("inf", {}).get("failover_ms_p50"),
                                                row.get("1", {}).get("failover_ms_p50")) for p, row in table.items()},
        "overhead_ratio_1_over_10000": {p: _ratio(row.get("1", {}).get("overhead"),
                                                  row.get("10000", {}).get("overhead"), 1) for p, row in table.items()},
        "model_error_p95": round(_pct(errors, 95), 3) if errors else None,
        "model_error_p50": round(_pct(errors, 50), 3) if errors else None,
        **{f"model_error_p95_{phase}_measured": round(_pct(bound, 95), 3)
           if (bound := model_errors_measured(grid, phase)) else None for phase in ("data", "detection")},
        "standby_states": {s: {k: v for k, v in c.items() if k != "trials"} for s, c in states.items()},
        "standby_states_setup": {"link": STATES_LINK, "keys": STATES_KEYS, "rate": STATES_RATE,
                                 "bsize": STATES_BSIZE, "snapshot_interval": SNAPSHOT_INTERVAL,
                                 "seconds": STATES_SECONDS, "kill_after_s": STATES_KILL_AFTER_S},
        "exact": (all(c["exact"] for row in table.values() for c in row.values())
                  and all(c["exact"] for c in states.values())),
        "delay_applied": all(t["link"]["delay_applied"] for row in grid.values() for c in row.values()
                             for t in c["trials"] if t["link"]),
        **machine_keys(t0),
    }
    out = write_details("links.json", a.publish, {"summary": summary, "cells": grid, "states": states})
    plot(table, out.parent)
    print(f"details: {out} and links-*.png beside it", file=sys.stderr)
    print(results.dumps("bench-links", summary))
    return 0 if summary["exact"] else 1


if __name__ == "__main__":
    with no_process_left():
        sys.exit(main())
