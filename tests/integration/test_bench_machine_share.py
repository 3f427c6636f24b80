"""The bench's account of what else the machine ran during a run (bench.harness.MachineShare), on real
processes: a busy process that is no node shows as other work, and a busy node does not."""

import os
import signal
import subprocess
import sys
import time

from bench.harness import MachineShare, tree_usage
from lazystandby.harness.operator_procs import children_of, proc_table, subtree

SPIN = [sys.executable, "-c", "while True: pass"]


def _others(table: dict, pid: int) -> dict[int, float]:
    """CPU seconds of every process but the node's tree and this test's own: what `other` must add up to
    (the broker a session fixture keeps, kernel threads, anything else the machine runs, besides the hog)."""
    mine = {pid, *subtree(children_of(table), pid), os.getpid()}
    return {p: row.cpu_seconds for p, row in table.items() if p not in mine}


def _cores(a: dict[int, float], b: dict[int, float], seconds: float) -> float:
    return sum(b[p] - a[p] for p in a.keys() & b.keys()) / seconds


def test_a_neighbour_s_cpu_is_other_work_and_a_node_s_is_not():
    # A node whose work is done by a process it started, as a Spark operator's JVM.
    node = subprocess.Popen([sys.executable, "-c", f"import subprocess; subprocess.run({SPIN!r})"],
                            start_new_session=True)
    hog = subprocess.Popen(SPIN)
    try:
        time.sleep(0.3)  # both spinning
        share = MachineShare(lambda: [node.pid])
        seen = [_others(proc_table(), node.pid)]
        for _ in range(3):
            time.sleep(0.6)  # past MIN_WINDOW_S
            share.mark()
            seen.append(_others(proc_table(), node.pid))
        span = share.marks[-1][0] - share.marks[0][0]
        hog_cores = (seen[-1][hog.pid] - seen[0][hog.pid]) / span
        node_cpu_s = tree_usage(proc_table(), node.pid)[0]
    finally:
        os.killpg(node.pid, signal.SIGKILL)  # the node with its child: a spinner left behind spins on
        hog.kill()
        for p in (node, hog):
            p.wait()
    got = share.over_run()
    assert hog_cores > 0.3 and node_cpu_s > 0.3  # both ran (two cores, two spinning processes)
    # The neighbour's CPU and the rest of the machine's, and only those (the node's child is the node's):
    # within the accounting's skew, per-process times being exact and the machine's sampled at each tick.
    assert got["other"] > hog_cores - 0.15, (got, hog_cores)
    assert abs(got["other"] - _cores(seen[0], seen[-1], span)) < 0.15, (got, hog_cores)
    windows = [b[0] - a[0] for a, b in zip(share.marks, share.marks[1:], strict=False)]
    expected = [_cores(a, b, w) for a, b, w in zip(seen, seen[1:], windows, strict=False)]
    assert len(share.per_second()) == 3, share.marks
    assert all(abs(o - e) < 0.25 for o, e in zip(share.per_second(), expected, strict=True)), (share.marks, expected)
    assert 0 <= got["bench"] < 0.1 and got["steal"] >= 0 and got["irq"] >= 0, got
