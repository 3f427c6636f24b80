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


def test_bucket_quantiles_are_bucket_upper_bounds():
    from lazystandby.stats import Buckets

    b = Buckets((0.01, 0.1, 1.0))
    for v in [0.005] * 50 + [0.05] * 49 + [0.5]:
        b.observe(v)
    assert b.quantile(0.5) == 0.01 and b.quantile(0.99) == 0.1 and b.quantile(1.0) == 1.0
    assert b.cumulative()[-1] == ("+Inf", 100)


def test_throughput_reports_the_median_run_with_all_rates():
    from bench.harness import median_run

    rs = [{"tuples_per_s": v, "cpu": i} for i, v in enumerate([59_000, 42_000, 49_000])]
    m = median_run(rs)
    assert m["tuples_per_s"] == 49_000 and m["cpu"] == 2
    assert m["runs_tuples_per_s"] == [59_000, 42_000, 49_000]
