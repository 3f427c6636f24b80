"""Planned handovers on real node processes: a primary asked to stop (SIGTERM, as `docker stop` and a
rolling upgrade send it) hands over to its standby before it exits (handover_on_stop), and the output is
exact. The in-memory twin of these is tests/unit/node/test_handover.py."""

from lazystandby.harness.launcher import run_trial

# The stack's Spark settings: a 1 s detector timeout, heartbeats 0.2 s apart.
DETECTOR = {"heartbeat_interval": 0.2, "heartbeat_misses": 5}


def exact(r):
    assert r["ok"], {k: r.get(k) for k in ("lost", "duplicated", "got", "expected", "diff", "events", "workdir")}
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["got"] == r["expected"] > 1000


def test_a_primary_asked_to_stop_hands_over_and_exits_zero():
    r = run_trial(fault="stop-primary", total=30_000, rate=10_000, kill_after=0.8, timeout=90, extra=DETECTOR)
    exact(r)
    stop = r["events"][0]
    assert stop["action"] == "stop" and stop["exit_code"] == 0, stop
    assert r["exited"] == {"n": 0} and r["failovers"] == 1 and r["takeovers_declined"] == 0
    assert r["recovery"]["cause"] == "handover", r["recovery"]
    nd = r["after"]["nd"]
    assert nd["counters"]["lease_released"] == 1 and nd["takeovers"][-1]["handed_over"] is True
    # N told N' to heartbeat at once (over gRPC, at the address N' gave in its heartbeats). N''s own
    # heartbeat may hear LEAVING first: the notice then reaches a node taking over, which ignores it.
    n2 = r["after"]["n2"]["counters"]
    assert n2.get("handover_notices", 0) + n2.get("handover_notices_ignored", 0) == 1, n2
    # From the signal to N' live: a round trip and the catch-up, not the detector's 1 s (the margin is
    # for a loaded machine: about 30-50 ms here).
    assert r["recovery_ms"] < 700, (r["recovery_ms"], r["recovery"])


def test_a_rolling_restart_of_both_operator_nodes_hands_over_twice_and_is_exact():
    r = run_trial(fault="rolling-restart", total=60_000, rate=10_000, kill_after=1.0, timeout=120, extra=DETECTOR)
    exact(r)
    assert [e["action"] for e in r["events"]] == ["stop", "restart", "stop"]
    assert [e["exit_code"] for e in r["events"] if e["action"] == "stop"] == [0, 0]
    n = r["after"]["n"]
    assert r["failovers"] == 2 and (n["role"], n["epoch"]) == ("primary", 3), n
    assert n["counters"]["rejoined"] == 1 and r["recovery"]["cause"] == "handover", r["recovery"]
    assert r["after"]["nd"]["counters"]["lease_released"] == 2


def test_with_handover_off_a_stopped_primary_is_found_by_the_detector_and_the_output_is_still_exact():
    r = run_trial(fault="stop-primary", total=30_000, rate=10_000, kill_after=0.8, timeout=90,
                  extra={**DETECTOR, "handover_on_stop": False})
    exact(r)
    assert r["exited"] == {"n": 0} and r["failovers"] == 1
    assert r["recovery"]["cause"] == "detector", r["recovery"]
    assert not r["after"]["nd"]["counters"].get("lease_released")
