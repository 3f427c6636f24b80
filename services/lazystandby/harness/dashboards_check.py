"""`make dashboards-check`: a small pipeline, a real Prometheus scraping it, one failover, then every panel
query of every dashboard run against Prometheus. Last line: a JSON summary with `dashboards`, `panels`,
`queries`, `empty`, `errors`. Also renders each dashboard's panels to a PNG from the same data."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

from . import results
from .launcher import ROOT, Topology, scratch
from .local_prometheus import LocalPrometheus
from .places import N2, ND, ROLE_AT_START, N
from .wait import wait_until

DASHBOARDS = ROOT / "grafana" / "dashboards"
JOBS = ROLE_AT_START


def concrete(expr: str) -> str:
    """An expression with Grafana's variables as Grafana would fill them (every node, every stage)."""
    return (expr.replace("$__rate_interval", "10s").replace('node=~"$node"', 'node=~".*"')
            .replace('pipeline_stage=~"$stage"', 'pipeline_stage=~".*"'))


def panel_queries(path: Path) -> list[tuple[str, str]]:
    """(panel or annotation title, expression) for every target and annotation, variables made concrete."""
    d = json.loads(path.read_text())
    return ([(p["title"], concrete(t["expr"])) for p in d["panels"] for t in p["targets"]]
            + [(f"annotation {a['name']}", concrete(a["expr"])) for a in d.get("annotations", {}).get("list", [])])


def run(render: Path | None = None, settle: float = 12.0) -> dict:
    with scratch("lazystandby-dash-") as work:  # the nodes' and Prometheus's files; kept if the check raises
        return _run(work, render, settle)


def _run(work: Path, render: Path | None, settle: float) -> dict:
    settings = {"total": 0, "rate": 5000.0, "bsize": 10}
    summary: dict = {"dashboards": 0, "panels": 0, "queries": 0, "empty": 0, "errors": 0, "failovers": 0,
                     "empty_queries": [], "error_queries": []}
    def say(msg: str) -> None:
        print(f"dashboards-check: {msg}", file=sys.stderr, flush=True)

    with Topology(settings, work) as topo:
        say("starting a pipeline and a real Prometheus scraping it")
        topo.start_all()
        targets = {JOBS[k]: f"127.0.0.1:{p}" for k, p in topo.metrics_ports.items()}
        with LocalPrometheus(work / "prometheus", targets) as prom:
            t0 = time.time()
            time.sleep(settle / 2)
            say("killing N; waiting for N' to take over")
            topo.signal(N, signal.SIGKILL)
            wait_until(lambda: bool(topo.status(N2)["recovery"].get("live_at")), 30)
            # N back as the new primary's standby: the predicted-recovery panels then have a standby to show.
            topo.procs[N].wait()
            topo.start(N, role="standby", name="N-2")
            topo.wait_ready(N)
            say(f"failed over; letting Prometheus scrape for {settle:g} s")
            time.sleep(settle)
            say("running every panel query")
            summary["failovers"] = int(topo.status(ND)["counters"].get("takeovers", 0))
            files = sorted(DASHBOARDS.glob("*.json"))
            summary["dashboards"] = len(files)
            for f in files:
                d = json.loads(f.read_text())
                summary["panels"] += len(d["panels"])
                for title, expr in panel_queries(f):
                    summary["queries"] += 1
                    r = prom.query(expr)
                    if r.get("status") != "success":
                        summary["errors"] += 1
                        summary["error_queries"].append(f"{f.stem}/{title}: {r.get('error')}")
                    elif not r["data"]["result"]:
                        summary["empty"] += 1
                        summary["empty_queries"].append(f"{f.stem}/{title}: {expr}")
            if render is not None:
                summary["pngs"] = [str(p) for p in render_pngs(prom, files, t0, time.time(), render)]
    return summary


UNITS = {"ops": "per second", "s": "seconds", "Bps": "bytes/s", "bytes": "bytes", "percentunit": "ratio",
         "short": "count"}
ROLE_ORDER = ("upstream", "downstream", "standby", "promoting", "primary", "fenced")


def _draw_states(ax, series: list, start: float) -> None:
    """Roles drawn as states: one step line per node, its role on the y axis (not every role at 1.0)."""
    by_node: dict[str, dict[float, str]] = {}
    for _, ser in series:
        node, role = ser["metric"].get("node", "?"), ser["metric"].get("role", "?")
        for t, v in ser["values"]:
            if float(v) == 1.0:
                by_node.setdefault(node, {})[float(t)] = role
    for node, states in sorted(by_node.items()):
        ts = sorted(states)
        ax.step([t - start for t in ts], [ROLE_ORDER.index(states[t]) if states[t] in ROLE_ORDER else -1 for t in ts],
                where="post", label=node)
    ax.set_yticks(range(len(ROLE_ORDER)), ROLE_ORDER)
    ax.set_ylim(-0.5, len(ROLE_ORDER) - 0.5)


def failover_times(prom: LocalPrometheus, start: float, end: float) -> list[float]:
    """The moment the dashboards' failover annotation marks: when the last takeover went live."""
    res = prom.query("max(lazystandby_last_failover_time_seconds) > 0")["data"]["result"]
    return [float(res[0]["value"][1])] if res else []


def render_pngs(prom: LocalPrometheus, files: list[Path], start: float, end: float, out: Path) -> list[Path]:
    """One PNG per dashboard: each panel drawn from Prometheus range queries (Grafana cannot run here)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for f in files:
        d = json.loads(f.read_text())
        annotations = failover_times(prom, start, end) if d.get("annotations", {}).get("list") else []
        panels = d["panels"]
        cols = 2
        rows = (len(panels) + 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(12, 3 * rows), squeeze=False)
        for ax, p in zip(axes.flat, panels, strict=False):
            unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
            series = [(t, ser) for t in p["targets"]
                      for ser in prom.query_range(concrete(t["expr"]), start, end, "1s")["data"]["result"]]
            if p["title"].startswith("Role"):
                _draw_states(ax, series, start)
            else:
                for t, ser in series:  # every series, as Grafana would
                    label = t.get("legendFormat", "")
                    for k, v in ser["metric"].items():
                        label = label.replace("{{" + k + "}}", v)
                    ax.plot([float(v[0]) - start for v in ser["values"]], [float(v[1]) for v in ser["values"]],
                            label=label or t["expr"][:40])
                ax.set_ylabel(UNITS.get(unit, unit), fontsize=8)
            for at in annotations:
                ax.axvline(at - start, color="red", linestyle=":", linewidth=1)
            ax.set_title(p["title"], fontsize=9)
            ax.set_xlabel("s since start (red: failover)", fontsize=8)
            ax.tick_params(labelsize=7)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=6, ncol=2 if len(series) > 6 else 1)
        for ax in list(axes.flat)[len(panels):]:
            ax.axis("off")
        fig.suptitle(f"{d['title']} (N killed mid-run; rendered from Prometheus)", fontsize=11)
        fig.tight_layout()
        path = out / f"{f.stem}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written.append(path)
    return written


def summary_of(run_result: dict) -> dict:
    """The JSON summary of a check: its counts, without the lists of the queries that failed."""
    return {k: v for k, v in run_result.items() if not k.endswith("_queries")}


def main(argv: list[str]) -> int:
    render = Path(argv[argv.index("--render") + 1]) if "--render" in argv else None
    s = run(render)
    if s["errors"] or s["empty"]:
        print(json.dumps({"empty": s["empty_queries"], "errors": s["error_queries"]}, indent=1), file=sys.stderr)
    print(results.dumps("dashboards-check", summary_of(s)))
    return 0 if not (s["errors"] or s["empty"]) else 1
