"""The actions of `hang-operator` and `kill-operator`, for both runners: a node's operator stops, or dies,
while the node runs.

The Spark operator's work happens in processes the node started (its driver JVM, and the Python workers
the JVM starts in turn): stopping those, and not the node, leaves a node that answers heartbeats and Nd's
calls but processes nothing, as a JVM that deadlocks or waits on an executor that never comes back does;
killing them is a JVM that crashed (or that the kernel's OOM killer chose). `proc_table` and `subtree`
are also how the benchmarks count a node's CPU and memory with its JVM's: one reader of /proc for both.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple


class NothingToHang(RuntimeError):
    """The node started no process of its own: its operator runs inside it (the Python operator)."""


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")  # the unit of /proc's CPU times


class ProcRow(NamedTuple):
    ppid: int
    cpu_seconds: float  # user and system
    minor_faults: int


def proc_table(proc: Path = Path("/proc")) -> dict[int, ProcRow]:
    """Every live process, from one pass over /proc (Linux): pid -> its parent, CPU seconds, minor faults."""
    table = {}
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            # The name, in parentheses, may hold spaces: the fields after its last ')' are state, ppid, ...
            f = (d / "stat").read_text().rsplit(")", 1)[1].split()
            table[int(d.name)] = ProcRow(int(f[1]), (int(f[11]) + int(f[12])) / CLOCK_TICKS, int(f[7]))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile, or a stat line cut short
    return table


def children_of(table: dict[int, ProcRow]) -> dict[int, list[int]]:
    """Parent pid -> the pids it started, from a `proc_table`: built once, walked for as many trees as needed."""
    children: dict[int, list[int]] = {}
    for p, row in table.items():
        children.setdefault(row.ppid, []).append(p)
    return children


def subtree(children: dict[int, list[int]], pid: int) -> list[int]:
    """Every process `pid` started, and those they started, in a `children_of` map; not `pid` itself."""
    found, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, []))
    return sorted(found)


def descendants(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """Every live process `pid` started, and those they started, from /proc (Linux); not `pid` itself."""
    return subtree(children_of(proc_table(proc)), pid)


def _operator_processes(pid: int, proc: Path) -> list[int]:
    pids = descendants(pid, proc)
    if not pids:
        raise NothingToHang(f"process {pid} started no process: hang-operator and kill-operator need an operator "
                            f"that runs in processes of its own (the Spark operator: --operator spark, "
                            f"LS_OPERATOR=spark)")
    return pids


def kill_all(pid: int, *, proc: Path = Path("/proc"), kill: Callable[[int, int], None] = os.kill) -> int:
    """SIGKILL every process node `pid` started; how many were killed. NothingToHang when there is none."""
    killed = 0
    for p in _operator_processes(pid, proc):
        try:
            kill(p, signal.SIGKILL)
        except ProcessLookupError:
            continue
        killed += 1
    return killed


def hang(pid: int, seconds: float, *, proc: Path = Path("/proc"), kill: Callable[[int, int], None] = os.kill,
         sleep: Callable[[float], None] = time.sleep) -> int:
    """Stop every process node `pid` started for `seconds`, then continue them (also when interrupted);
    how many were stopped. NothingToHang when there is none."""
    pids = _operator_processes(pid, proc)
    stopped = []
    try:
        for p in pids:
            try:
                kill(p, signal.SIGSTOP)
            except ProcessLookupError:
                continue
            stopped.append(p)
        sleep(seconds)
    finally:
        for p in stopped:
            try:
                kill(p, signal.SIGCONT)
            except ProcessLookupError:
                pass
    return len(stopped)


def _alive(pid: int, proc: Path) -> int | None:
    """`pid`'s parent while it runs; None once it is gone or a zombie."""
    try:
        f = (proc / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if f[0] in ("Z", "X") else int(f[1])


@contextmanager
def no_process_left(*, proc: Path = Path("/proc"), kill: Callable[[int, int], None] = os.kill):
    """Run a command that starts processes (nodes, brokers, JVMs, other commands) so that none outlives it.

    Inside, SIGTERM raises KeyboardInterrupt, as Ctrl-C does, so that every context manager on the way out
    stops what it started, in order. The processes it had started are noted when the signal comes, before
    any cleanup: a child killed during cleanup (subprocess.run kills its child on an exception) leaves its
    own children to init (or to a subreaper above this process), out of this process's tree. On the way
    out, whatever is still running of those noted, or of this process's tree, gets SIGKILL. A noted pid is
    killed only while its parent is one of the noted, this process or one of its ancestors (where orphans
    go), so a pid the kernel gave to an unrelated process meanwhile is left alone. Processes that ran
    before the command started (a caller's own children) are never touched.
    """
    me = os.getpid()
    before = set(descendants(me, proc))
    noted: set[int] = set()
    adopters = {1}
    up = _alive(me, proc)
    while up and up not in adopters:
        adopters.add(up)
        up = _alive(up, proc)

    def interrupt(signum, frame):
        noted.update(descendants(me, proc))
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        noted.update(descendants(me, proc))
        for p in sorted(noted - before):
            parent = _alive(p, proc)
            if parent is not None and (parent in noted or parent == me or parent in adopters):
                try:
                    kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
