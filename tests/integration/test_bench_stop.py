"""`make bench-quick` stopped mid-run with SIGTERM (make passes it on to the bench) leaves no process it
started: its nodes, and whatever they started."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from lazystandby.harness import operator_procs
from lazystandby.harness.operator_procs import descendants

from .procs import cmdline

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    return operator_procs._alive(pid, Path("/proc")) is not None  # the guard's own reading: not gone, no zombie


def test_sigterm_to_the_quick_bench_mid_trial_leaves_no_process(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "bench.harness", "--quick"], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": f"{ROOT / 'services'}:{ROOT / 'spark'}:{ROOT}",
                              "LS_RUN_DIR": str(tmp_path)}, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        seen: set[int] = set()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # the trade-off's first trial: its four nodes up
            tree = descendants(p.pid)
            seen.update(tree)
            if sum("lazystandby.cli" in cmdline(c) for c in tree) >= 4:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"the bench started no four nodes within 90 s: {p.stderr.read()[-2000:]}")
        time.sleep(0.5)
        seen.update(descendants(p.pid))
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == 130
        assert "every process it started was stopped" in p.stderr.read()
        time.sleep(0.5)
        assert [c for c in seen if _alive(c)] == []
    finally:
        if p.poll() is None:
            p.kill()
