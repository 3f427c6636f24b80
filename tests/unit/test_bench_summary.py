from bench.harness import summarize


def row(bsize, codec, overhead, rec, fo):
    return {"bsize": bsize, "codec": codec, "trial": 0, "overhead": overhead, "overhead_raw": overhead,
            "compression_ratio": 1.0, "reconnection_ms": rec / 2, "data_recovery_ms": rec / 2, "recovery_ms": rec,
            "detection_ms": 300.0, "failover_ms": fo, "replayed_from_oq": 0, "resent_by_nu": 5}


def test_summary_means_deviations_and_p95():
    rows = [row("1", "none", 1.0, 10, 300 + i) for i in range(20)] + [row("inf", "none", 0.0, 50, 400)]
    s = summarize(rows)
    assert s["1"]["none"]["overhead"] == 1.0 and s["1"]["none"]["overhead_sd"] == 0.0
    assert s["1"]["none"]["failover_ms_p95"] == 319
    assert s["1"]["none"]["trials"] == 20
    assert s["inf"]["none"]["recovery_ms"] == 50 and s["inf"]["none"]["recovery_ms_sd"] == 0.0


def test_summary_compares_each_trial_with_its_own_uncompressed_bytes():
    """vs_uncompressed is the mean of overhead / overhead_raw per trial, not a ratio of two trials' means."""
    rows = [{**row("10", "zstd-stream-dict", 0.28, 50, 300), "overhead_raw": 1.0},
            {**row("10", "zstd-stream-dict", 0.24, 50, 300), "overhead_raw": 0.8},
            {**row("10", "none", 0.9, 50, 300), "overhead_raw": 0.0}]  # nothing batched yet: no ratio
    s = summarize(rows)
    assert s["10"]["zstd-stream-dict"]["vs_uncompressed"] == 0.29
    assert s["10"]["none"]["vs_uncompressed"] == 0.0


def test_bucket_quantiles_are_bucket_upper_bounds():
    from lazystandby.stats import Buckets

    b = Buckets((0.01, 0.1, 1.0))
    for v in [0.005] * 50 + [0.05] * 49 + [0.5]:
        b.observe(v)
    assert b.quantile(0.5) == 0.01 and b.quantile(0.99) == 0.1 and b.quantile(1.0) == 1.0
    assert b.cumulative()[-1] == ("+Inf", 100)


def test_recent_window_quantiles_are_exact_weighted_by_tuples_and_forget_old_values():
    from lazystandby.stats import RecentWindow

    w = RecentWindow(size=3)
    assert w.quantile(0.5) == 0.0
    w.observe(0.200, 1)
    w.observe(0.010, 98)  # one run of 98 tuples committed fast outweighs the slow single tuple
    w.observe(0.030, 1)
    w.observe(0.5, 0)  # an empty run stands for no tuple
    assert w.quantile(0.5) == 0.010 and w.quantile(0.99) == 0.030 and w.quantile(1.0) == 0.200
    w.observe(0.040, 1)  # the window holds 3 runs: the 0.200 run is gone
    assert w.quantile(1.0) == 0.040 and w.quantile(0.0) == 0.010


def test_nu_reports_commit_latency_from_its_window():
    from lazystandby.harness.inprocess import InProcessTopology

    with InProcessTopology("memory", total=4000, rate=8000.0, bsize="10") as t:
        nu = t.nodes["nu"]
        assert t.wait(lambda: nu.oqu.trimmed_through == 4000)
        s = nu.snapshot()
    assert 0 < s["e2e_commit_p50_ms"] <= s["e2e_commit_p99_ms"] < 5000
    assert nu.e2e_seconds.count == len(nu.e2e_recent._values)  # one observation per admitted run in both


def test_throughput_reports_the_median_run_with_all_rates():
    from bench.harness import median_run

    rs = [{"tuples_per_s": v, "cpu": i} for i, v in enumerate([59_000, 42_000, 49_000])]
    m = median_run(rs)
    assert m["tuples_per_s"] == 49_000 and m["cpu"] == 2
    assert m["runs_tuples_per_s"] == [59_000, 42_000, 49_000]


def test_the_bench_follows_the_primary_through_a_takeover():
    """A takeover during a measurement (a false suspicion on a loaded machine is one) moves the count to N';
    the bench used to wait on the fenced N until its 600 s deadline."""
    from bench.harness import Serving

    class Topo:
        procs = {"nu": 0, "n": 0, "n2": 0, "nd": 0}

        def __init__(self):
            self.now = {"n": {"role": "primary", "epoch": 1, "processed": [100, 40]},
                        "n2": {"role": "standby", "epoch": 1, "processed": [60, 20]}}
            self.polled = []

        def status(self, key):
            self.polled.append(key)
            return self.now[key]

    topo = Topo()
    s = Serving(topo)
    assert s.processed() == 100 and topo.polled == ["n"]  # only N while it serves
    topo.now["n"] = {"role": "fenced", "epoch": 1, "processed": [150, 60]}
    topo.now["n2"] = {"role": "promoting", "epoch": 2, "processed": [150, 60]}
    assert s.processed() == 150 and s.takeovers == 0  # N' not live yet: still N's count
    topo.now["n2"] = {"role": "primary", "epoch": 2, "processed": [400, 160]}
    assert s.processed() == 400 and s.takeovers == 1 and s.key == "n2"
    topo.polled.clear()
    assert s.processed() == 400 and topo.polled == ["n2"]
