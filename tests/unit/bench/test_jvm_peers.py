"""A Flink peer's kill and restart from its newest checkpoint (bench.jvm_peers.kill_at_checkpoint), with
fake processes and a fake reader: which checkpoint it restores, and the ways it refuses."""

from __future__ import annotations

import time

import pytest

from bench.jvm_peers import kill_at_checkpoint


class FakeJob:
    def __init__(self, exited: bool = False) -> None:
        self.killed = False
        self.exited = exited

    def poll(self):
        return -9 if self.killed or self.exited else None

    def kill(self) -> None:
        self.killed = True

    def wait(self, timeout: float | None = None) -> int:
        return -9


class FakeReader:
    """Hands out nothing until its `results` are due, then them once."""

    def __init__(self, results: list, after_calls: int = 0) -> None:
        self.records: list = []
        self._results = results
        self._calls = 0
        self._after = after_calls

    def more(self) -> list:
        self._calls += 1
        if self._calls <= self._after or not self._results:
            return []
        new, self._results = self._results, []
        self.records.extend(new)
        return new


def checkpoint(root, n: int) -> None:
    done = root / "job" / f"chk-{n}"
    done.mkdir(parents=True)
    (done / "_metadata").write_bytes(b"")


def test_the_job_is_killed_and_started_again_from_its_newest_complete_checkpoint(tmp_path):
    checkpoint(tmp_path, 3)
    checkpoint(tmp_path, 12)
    (tmp_path / "job" / "chk-13").mkdir()  # under way: no _metadata yet
    started = []
    procs = [FakeJob()]

    def start(name, *restore):
        started.append((name, *restore))
        return FakeJob()

    t0 = time.time()
    t_kill, newest = kill_at_checkpoint(procs, start, FakeReader(["r"], after_calls=2), tmp_path,
                                        kill_after=0.0, timeout=5.0, failed="never")
    assert newest.name == "chk-12"
    assert started == [("restarted", str(tmp_path / "job" / "chk-12"))]
    assert procs[0].killed and len(procs) == 2 and not procs[1].killed
    assert t0 <= t_kill <= time.time()


def test_no_checkpoint_within_the_timeout_fails_without_a_kill(tmp_path):
    procs = [FakeJob()]
    with pytest.raises(RuntimeError, match="no checkpoint here"):
        kill_at_checkpoint(procs, lambda *a: pytest.fail("restarted"), FakeReader(["r"]), tmp_path,
                           kill_after=0.0, timeout=0.2, failed="no checkpoint here")
    assert not procs[0].killed and len(procs) == 1


def test_a_job_that_exits_before_its_first_result_fails_at_once(tmp_path):
    checkpoint(tmp_path, 1)
    procs = [FakeJob(exited=True)]
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="exited"):
        kill_at_checkpoint(procs, lambda *a: pytest.fail("restarted"), FakeReader([]), tmp_path,
                           kill_after=0.0, timeout=60.0, failed="exited")
    assert time.monotonic() - t0 < 5
