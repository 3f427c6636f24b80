"""The bench's account of what else the machine ran during a run (bench.harness.MachineShare), on real
processes: a busy process that is no node shows as other work, and a busy node does not."""

import os
import signal
import subprocess
import sys
import time

from bench.harness import MachineShare, tree_usage
from lazystandby.harness.operator_procs import proc_table

SPIN = [sys.executable, "-c", "while True: pass"]


def test_a_neighbour_s_cpu_is_other_work_and_a_node_s_is_not():
    # A node whose work is done by a process it started, as a Spark operator's JVM.
    node = subprocess.Popen([sys.executable, "-c", f"import subprocess; subprocess.run({SPIN!r})"],
                            start_new_session=True)
    hog = subprocess.Popen(SPIN)
    try:
        time.sleep(0.3)  # both spinning
        share = MachineShare(lambda: [node.pid])
        hog0 = proc_table()[hog.pid].cpu_seconds
        for _ in range(3):
            time.sleep(0.6)  # past MIN_WINDOW_S
            share.mark()
        hog_cores = (proc_table()[hog.pid].cpu_seconds - hog0) / (share.marks[-1][0] - share.marks[0][0])
        node_cpu_s = tree_usage(proc_table(), node.pid)[0]
    finally:
        os.killpg(node.pid, signal.SIGKILL)  # the node with its child: a spinner left behind spins on
        hog.kill()
        for p in (node, hog):
            p.wait()
    got = share.over_run()
    assert hog_cores > 0.3 and node_cpu_s > 0.3  # both ran (two cores, two spinning processes)
    # The neighbour's CPU, and only it (the node's child is the node's): within the accounting's skew,
    # per-process times being exact and the machine's sampled at each tick.
    assert abs(got["other"] - hog_cores) < 0.15, (got, hog_cores)
    assert len(share.per_second()) == 3 and all(abs(o - hog_cores) < 0.25 for o in share.per_second()), share.marks
    assert 0 <= got["bench"] < 0.1 and got["steal"] >= 0 and got["irq"] >= 0, got
