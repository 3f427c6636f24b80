"""no_process_left: a command stopped by SIGTERM (or Ctrl-C) leaves no process it started, those its
children started included, even when cleanup kills a child before its own children."""

import os
import signal
import subprocess
import sys
import time

import pytest

from lazystandby.harness.operator_procs import _alive, descendants, no_process_left

PROC = __import__("pathlib").Path("/proc")

# A child in a session of its own (as the harness starts nodes) that starts a grandchild and waits.
PARENT = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
          "time.sleep(60)")


def _wait_for_tree(n: int, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tree = descendants(os.getpid())
        if len(tree) >= n:
            return tree
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} descendants: {descendants(os.getpid())}")


def _gone(pids: list[int], timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p, PROC) is not None]
        if not left:
            return []
        time.sleep(0.05)
    return left


def test_sigterm_becomes_keyboard_interrupt_and_every_process_started_is_gone():
    with pytest.raises(KeyboardInterrupt), no_process_left():
        child = subprocess.Popen([sys.executable, "-c", PARENT], start_new_session=True)
        tree = _wait_for_tree(2)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the signal interrupts this
    child.wait(5)
    assert _gone(tree) == [], tree
    assert signal.getsignal(signal.SIGTERM) is not None  # the previous handler is back


def test_a_grandchild_orphaned_during_cleanup_is_still_killed():
    """subprocess.run kills its child with SIGKILL when interrupted: the grandchild goes to init, out of
    this process's tree, and only the pids noted at the signal find it."""
    with pytest.raises(KeyboardInterrupt), no_process_left():
        child = subprocess.Popen([sys.executable, "-c", PARENT])
        tree = _wait_for_tree(2)
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        finally:
            child.kill()  # as subprocess.run does on the way out
            child.wait(5)
            orphan = [p for p in tree if p != child.pid]
            assert orphan and _alive(orphan[0], PROC) is not None  # still running, now init's
    assert _gone(tree) == [], tree


def test_a_clean_exit_leaves_nothing_running_either():
    with no_process_left():
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
        tree = _wait_for_tree(1)
    assert _gone(tree) == [], tree


def test_a_process_that_ran_before_the_command_is_left_alone():
    """A caller's own child (a broker a test session started) outlives a command run in-process."""
    older = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        _wait_for_tree(1)
        with no_process_left():
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
            tree = [p for p in _wait_for_tree(2) if p != older.pid]
        assert _gone(tree) == [], tree
        assert older.poll() is None  # still running
    finally:
        older.kill()
        older.wait(5)
