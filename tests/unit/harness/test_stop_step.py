import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest

from lazystandby.harness import launcher

# A node that ends neither on SIGTERM nor on SIGUSR1, and dumps its stacks on SIGQUIT as cli.run_node makes
# a node do.
DEAF = ("import faulthandler, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "signal.signal(signal.SIGUSR1, signal.SIG_IGN); "
        "faulthandler.register(signal.SIGQUIT, all_threads=True); print('up', flush=True); time.sleep(60)")


@pytest.mark.parametrize(("step", "wait", "sent"), [(launcher._stop, "STOP_WAIT_S", "SIGTERM"),
                                                 (launcher._loop_dies, "LOOP_DIES_WAIT_S", "SIGUSR1")])
def test_a_node_that_outlives_its_step_leaves_its_stacks_in_its_log(tmp_path, monkeypatch, step, wait, sent):
    monkeypatch.setattr(launcher, wait, 0.5)
    log = open(tmp_path / "n.log", "wb")  # noqa: SIM115 - the child's
    p = subprocess.Popen([sys.executable, "-c", DEAF], stdout=subprocess.PIPE, stderr=log)
    try:
        assert p.stdout.readline() == b"up\n"
        topo = SimpleNamespace(procs={"n": p}, workdir=tmp_path)
        with pytest.raises(RuntimeError, match=f"had not exited 0 s after {sent}; its threads' stacks are in"):
            step(topo, "n", None)
        assert p.poll() is None  # asked for its stacks, not killed: the teardown stops it
        assert "most recent call first" in (tmp_path / "n.log").read_text()
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
        log.close()


def test_a_node_that_exits_on_sigterm_gives_its_code_and_time(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                         stdout=subprocess.PIPE)
    assert p.stdout.readline() == b"up\n"
    r = launcher._stop(SimpleNamespace(procs={"n": p}, workdir=tmp_path), "n", None)
    assert r["exit_code"] == -signal.SIGTERM and r["stopped_ms"] < 5000


def test_a_node_whose_loop_dies_gives_its_code_and_time(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                         stdout=subprocess.PIPE)
    assert p.stdout.readline() == b"up\n"
    r = launcher._loop_dies(SimpleNamespace(procs={"nu": p}, workdir=tmp_path), "nu", None)
    assert r["exit_code"] == -signal.SIGUSR1 and r["exited_ms"] < 5000
