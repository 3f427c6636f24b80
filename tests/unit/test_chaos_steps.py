"""The container chaos runner's step sequencer (deploy/chaos/chaos.py) against a fake docker client: the
steps of a double fault in order, with their delays, on the right containers; a spare for START; the
takeover a step waits for. The real stack runs these in tests/system."""

import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "deploy" / "chaos"))

import chaos  # noqa: E402

from lazystandby.harness.faults import CATALOG, Action, Fault, Step  # noqa: E402


class FakeContainer:
    def __init__(self, log: list, service: str, status: str = "running") -> None:
        self.log, self.service, self.status = log, service, status

    def _do(self, what: str) -> None:
        self.log.append((time.monotonic(), what, self.service))

    def kill(self):
        self._do("kill")

    def pause(self):
        self._do("pause")

    def unpause(self):
        self._do("unpause")

    def start(self):
        self._do("start")


@pytest.fixture
def fake(monkeypatch):
    log: list = []
    running = {"nu", "n", "n-standby", "nd"}
    monkeypatch.setattr(chaos, "container", lambda client, service: FakeContainer(
        log, service, "running" if service in running else "exited"))

    def compose(*args, **kw):
        log.append((time.monotonic(), "compose " + " ".join(args), args[-1]))
        running.add(args[-1])

    monkeypatch.setattr(chaos, "compose", compose)
    return log, running


def test_a_double_fault_runs_its_steps_in_order_with_their_delays(fake):
    log, _ = fake
    fault = Fault("t", "", (Step("standby", Action.PAUSE, duration=0.2), Step("primary", Action.KILL, delay=0.1)))
    t0, events = chaos.inject(fault, client=None)
    assert [(w, s) for _, w, s in log] == [("pause", "n-standby"), ("unpause", "n-standby"), ("kill", "n")]
    assert log[1][0] - log[0][0] >= 0.2 and log[2][0] - log[1][0] >= 0.1
    assert [(e["action"], e["target"]) for e in events] == [("pause", "standby"), ("kill", "primary")]
    assert events[0]["at"] == t0 and events[1]["at"] - t0 >= 0.3


def test_start_brings_up_the_first_spare_not_running_and_refuses_when_none_is_left(fake):
    log, running = fake
    start = Step("primary", Action.START)
    assert chaos.apply(start, None, 0.0) == {"started": "n-standby-2"}
    assert chaos.apply(start, None, 0.0) == {"started": "n-standby-3"}
    assert [w for _, w, _ in log] == ["compose up -d --no-deps n-standby-2", "compose up -d --no-deps n-standby-3"]
    with pytest.raises(RuntimeError, match="every spare standby is running already"):
        chaos.apply(start, None, 0.0)


def test_a_step_after_the_takeover_waits_for_nu_to_accept_one(fake, monkeypatch):
    log, _ = fake
    polls = iter([{"takeovers": []}, {"takeovers": []}, {"takeovers": [{"epoch": 2}]}])
    monkeypatch.setattr(chaos, "node_status", lambda service: next(polls))
    chaos.inject(CATALOG["kill-primary-then-upstream"], client=None)
    assert [(w, s) for _, w, s in log] == [("kill", "n"), ("kill", "nu"), ("start", "nu")]
    with pytest.raises(StopIteration):
        next(polls)  # the restart came only after the poll that saw the takeover


def test_a_takeover_that_never_comes_fails_the_run_instead_of_hanging(fake, monkeypatch):
    monkeypatch.setattr(chaos, "node_status", lambda service: {"takeovers": []})
    with pytest.raises(TimeoutError, match="Nu to accept a takeover"):
        chaos.inject(CATALOG["kill-primary-then-upstream"], client=None, timeout=0.2)


def test_the_new_primary_is_the_one_of_the_highest_epoch():
    nodes = {"N'": {"role": "primary", "epoch": 2, "recovery": {"live_at": 11.0}},
             "N2": {"role": "primary", "epoch": 3, "recovery": {"live_at": 12.5}},
             "Nu": {"role": "upstream"}, "N3": {"error": "unreachable"}}
    assert chaos.took_over_last(nodes, 10.0) == ("N2", 2500.0)
    assert chaos.took_over_last({"Nu": {"role": "upstream"}}, 10.0) == (None, None)
