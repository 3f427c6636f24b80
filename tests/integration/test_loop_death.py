"""A node whose loop ends by an exception must not live on half dead: it is NOT_SERVING, exits 70 within
a second, and is replaced by the supervisor, with Nd's output exact. One test per role that has loops (Nd
has none: it answers Deliver calls). The loop is made to raise by SIGUSR1 (cli.run_node)."""

import pytest

from lazystandby.harness.launcher import run_trial
from lazystandby.node.common import EXIT_FAILED


def died_and_was_replaced(r: dict, key: str) -> None:
    assert r["ok"] and r["lost"] == 0 and r["duplicated"] == 0, (r["diff"], r["workdir"])
    died = [e for e in r["events"] if e["action"] == "loop-dies"]
    assert len(died) == 1 and died[0]["exit_code"] == EXIT_FAILED, died
    assert died[0]["exited_ms"] < 1000, died  # from the signal to the process gone
    assert r["restarted"] == [key] and r["settled"], r["restarted"]


@pytest.mark.parametrize("fault, key, failovers", [("loop-dies-primary", "n", 1), ("loop-dies-standby", "n2", 0)])
def test_an_operator_node_whose_loop_dies_exits_and_is_replaced(fault, key, failovers):
    r = run_trial(fault=fault, total=20_000, rate=10_000, kill_after=0.8, timeout=60,
                  extra={"exit_when_fenced": True})
    died_and_was_replaced(r, key)
    assert r["failovers"] == failovers


def test_an_upstream_whose_source_loop_dies_exits_and_restarts_where_it_was(kafka):
    r = run_trial(fault="loop-dies-upstream", kafka=kafka, total=12_000, rate=6_000, kill_after=0.8, timeout=90,
                  extra={"exit_when_fenced": True})
    died_and_was_replaced(r, "nu")
    assert "restored_tuples" in r["after"]["nu"]["counters"]  # the new Nu rebuilt OQu from the link log
    assert r["failovers"] == 0
