"""The window query on real node processes: N killed at Bsize 10 and inf (the standby's state warm, or
rebuilt from Nu's trim point), and N started again empty after its takeover, re-seeded by Nu as the
standby, taking back over: every trial's results checked against the pandas truth table."""

import pytest

from lazystandby.harness.launcher import run_trial

TOTAL, RATE = 24_000, 16_000.0
# A valid tick ten minutes older than the generator's first (formats/ticks.py; sources/generator.py starts
# at 1,764,000,000,000 ms): once the watermark has moved, every window it lies in is final.
OLD_TICK = b"ACME,101.50,100,1763999400000,XNYS"


def trial(fault, bsize="10", **kw):
    r = run_trial(fault=fault, bsize=bsize, total=TOTAL, rate=RATE, kill_after=0.7, timeout=60,
                  extra={"query": "window", "exit_when_fenced": True, **kw})
    assert r["delivered_all"] and r["took_over"], f"logs in {r['workdir']}"
    assert (r["lost"], r["duplicated"], r["wrong"], r["unexpected"]) == (0, 0, 0, 0), r
    assert r["same_order"] and r["oseq_gaps"] == 0 and r["late_exact"] and r["ok"], r
    assert r["expected"] > 100
    return r


@pytest.mark.parametrize("bsize", ["10", "inf"])
def test_kill_primary_window_results_exact(bsize):
    r = trial("kill-primary", bsize)
    assert r["failovers"] == 1
    n2 = r["after"]["n2"]["counters"]
    assert n2.get("skipped_tuples", 0) == 0  # a stateful standby skips nothing
    if bsize == "inf":
        assert n2.get("rebuilds", 0) >= 1  # no backup: rebuilt from what Nu still holds
    else:
        assert n2.get("backup_tuples", 0) > 0


def test_a_primary_started_again_empty_rebuilds_as_the_standby_and_takes_back_over_exactly():
    r = trial("kill-primary-then-restart")
    assert r["failovers"] == 2
    assert r["after"]["n"]["counters"].get("rebuilds", 0) >= 1


@pytest.mark.parametrize("fault", ["kill-primary", "kill-primary-then-upstream"])
def test_window_through_kafka_with_late_ticks_and_a_restarted_nu(kafka, fault):
    """Source and results topics on a real broker, bad records among the ticks: the results exact, every
    late tick in the late-data topic once (by key), every bad record in the dead letters. A restarted Nu
    resumes its watermark, and each stream's part in it, from its link log. A stream quiet for 64 positions
    stops holding the watermark back (Nu's polls take one partition's records at a time), so ticks may come
    late by the timing of the polls; three ticks ten minutes old among the load are late whatever it is."""
    r = run_trial(fault=fault, total=30_000, rate=10_000, kill_after=1.5, timeout=90, kafka=kafka,
                  malformed_every=997, bad_records=[OLD_TICK] * 3,
                  extra={"query": "window", "exit_when_fenced": True, "watermark_idle": 64})
    assert (r["lost"], r["duplicated"], r["wrong"], r["unexpected"]) == (0, 0, 0, 0), r
    assert r["late"] >= 3 and r["late_letters_exact"] and r["late_exact"], r
    assert r["dead_letters_exact"] and r["ok"], r


def test_kill_a_spark_primary_of_a_window_query_through_kafka(kafka):
    """Spark's aggregation on N and N' (RocksDB state store), the source and results topics on a real
    broker, N killed under load: the standby's warm Spark state takes over, the results exact."""
    r = run_trial(fault="kill-primary", total=20_000, rate=5_000, kill_after=2.0, timeout=120, kafka=kafka,
                  extra={"query": "window", "operator": "spark", "spark_state_store": "rocksdb",
                         "spark_partitions": 1, "exit_when_fenced": True})
    assert r["took_over"] and r["failovers"] == 1, f"logs in {r['workdir']}"
    assert (r["lost"], r["duplicated"], r["wrong"], r["unexpected"]) == (0, 0, 0, 0), r
    assert r["expected"] > 50 and r["late_exact"] and r["ok"], r
    assert r["after"]["n2"]["counters"].get("skipped_tuples", 0) == 0
