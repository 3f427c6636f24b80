"""`make bench-ab`: a base commit checked out and built beside this tree, both run for real in turns (the
Kafka path on a real broker), the worktree and the broker gone at the end."""

import json
import os
import subprocess
import sys
from pathlib import Path

from .procs import cmdline

ROOT = Path(__file__).resolve().parents[2]


def _worktrees() -> list[str]:
    out = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return [line for line in out.splitlines() if line.startswith("worktree ")]


def test_head_beside_itself_runs_both_sides_and_leaves_no_worktree():
    before = _worktrees()
    p = subprocess.run([sys.executable, "-m", "bench.ab", "--base", "HEAD", "--rounds", "1", "--tuples", "40000"],
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": f"{ROOT / 'services'}:{ROOT / 'spark'}:{ROOT}"},
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["base"] == summary["head"].removesuffix("-dirty")
    for config in ("ha", "no_ha", "kafka"):
        assert summary[f"base_{config}_tuples_per_s"] > 0 and summary[f"head_{config}_tuples_per_s"] > 0
        assert summary[f"ratio_{config}_min"] <= summary[f"ratio_{config}"] <= summary[f"ratio_{config}_max"]
    details = json.loads((ROOT / summary["results"]).read_text())
    # Each side ran its nodes, the standby where asked.
    assert set(details["runs"]["ha"]["base"][0]["cpu_cores_per_node"]) == {"nu", "n", "n2", "nd"}
    assert set(details["runs"]["no_ha"]["head"][0]["cpu_cores_per_node"]) == {"nu", "n", "nd"}
    assert set(details["runs"]["kafka"]["base"][0]["cpu_cores_per_node"]) == {"nu", "n", "n2", "nd"}
    assert _worktrees() == before
    pids = (int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit())
    assert not [pid for pid in pids if "lazystandby-ab-" in cmdline(pid)]  # the broker, in the run's temp dir
