"""Passive Standby with real node processes: N' holds the primary's snapshots (a full one and the deltas
after it) and does no operator work; N killed, N' loads them and the output is exact."""

from lazystandby.harness.launcher import run_trial

QUERY = "SELECT symbol, count(*), avg(price), max(price) FROM ticks GROUP BY window(ts, '20 seconds'), symbol"


def test_a_passive_standby_does_no_operator_work_and_takes_over_exactly_from_its_snapshot():
    r = run_trial(fault="kill-primary", bsize=100, total=16_000, rate=4_000, kill_after=2.5, seed=11, timeout=120,
                  extra={"query": QUERY, "exit_when_fenced": True, "standby_state": "snapshot",
                         "snapshot_interval": 0.5})
    assert r["ok"] and r["lost"] == 0 and r["duplicated"] == 0 and r.get("wrong", 0) == 0, r
    n, n2 = r["before"]["n"]["counters"], r["before"]["n2"]["counters"]
    assert n.get("snapshots_sent", 0) >= 2 and n.get("snapshot_bytes", 0) > 0, n
    assert n2.get("snapshots", 0) >= 2 and n2.get("snapshot_dropped", 0) > 0, n2
    assert n.get("snapshot_deltas_sent", 0) >= 1 and n2.get("snapshot_deltas", 0) >= 1, (n, n2)  # incremental
    assert n2.get("processed_tuples", 0) == 0, n2  # no operator work as a standby
    after = r["after"]["n2"]["counters"]
    assert after.get("snapshot_loads") == 1 and after.get("processed_tuples", 0) > 0, after
    assert r["predicted_recovery"]["restore_s"] > 0, r["predicted_recovery"]
