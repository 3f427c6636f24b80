"""Markdown tables from a results file, for the README: `python -m bench.report docs/bench/quick.json`."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _n(x: float, digits: int = 0) -> str:
    if x != x or x in (float("inf"), float("-inf")):
        return "beyond the last bucket"
    return f"{x:,.{digits}f}" if digits else f"{round(x):,}"


def tradeoff_table(d: dict) -> str:
    out = ["| Bsize | codec | overhead (sd) | recovery ms (sd) | reconnection | data recovery | failover p95 ms | "
           "resent by Nu | replayed from OQ' | trials |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for b, per in d["tradeoff"].items():
        for c, v in per.items():
            out.append(f"| {b} | {c} | {v['overhead']:.3f} ({v['overhead_sd']:.3f}) | {_n(v['recovery_ms'])} "
                       f"({_n(v['recovery_ms_sd'])}) | {_n(v['reconnection_ms'])} | {_n(v['data_recovery_ms'])} | "
                       f"{_n(v['failover_ms_p95'])} | {_n(v['resent_by_nu'])} | {_n(v['replayed_from_oq'])} | "
                       f"{v['trials']} |")
    return "\n".join(out)


def _coverage(t: dict) -> str:
    if not t["standby"]:
        return "—"
    return f"{t['backup_coverage']:.0%}" if "backup_coverage" in t else "not measured"


def throughput_table(d: dict) -> str:
    out = ["| pipeline | end-to-end tuples/s (median; every run) | worst second / mean | "
           "commit latency p50 / p99 ms | backed up to N' | CPU cores Nu / N / N' / Nd (with children) |",
           "|---|---|---|---|---|---|"]
    for t in d["throughput"]:
        what = (f"Bsize {t['bsize']}, {t['codec']}" if t["standby"] else "no standby") + \
            f", {t.get('operator', 'python')} operator"
        cpu = t["cpu_cores_per_node"]
        cores = " / ".join(f"{cpu[k]:.2f}" if k in cpu else "—" for k in ("nu", "n", "n2", "nd"))
        runs = "; ".join(_n(r) for r in t.get("runs_tuples_per_s", []))
        rate = _n(t["tuples_per_s"]) + (f" ({runs})" if runs else "")
        out.append(f"| {what} | {rate} | {t['worst_second_ratio']:.2f} | "
                   f"{_n(t['e2e_commit_p50_ms'])} / {_n(t['e2e_commit_p99_ms'])} | {_coverage(t)} | {cores} |")
    if "spark" in d:
        s = d["spark"]
        out.append(f"| Spark alone: the query reading Kafka directly, no HA layer | "
                   f"{_n(s['throughput']['tuples_per_s'])} | — | — | — | — |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    d = json.loads(Path(argv[0] if argv else "docs/bench/quick.json").read_text())
    print(f"`{d['name']}` on {d['machine']}, {d['seconds']} s\n")
    print(tradeoff_table(d))
    print()
    print(throughput_table(d))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
