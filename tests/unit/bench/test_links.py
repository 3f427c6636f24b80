"""bench-links' cells from trials (run_trial faked here; tests/integration/test_links.py runs the real one)."""
import pytest

from bench import links as bench_links


def _trial(failover, overhead, resent, ok=True):
    return {"ok": ok, "lost": 0, "duplicated": 0, "wrong": 0, "recovery_ms": failover, "workdir": "w",
            "recovery": {"detection_ms": 100.0, "reconnection_ms": 20.0, "data_recovery_ms": failover - 120,
                         "resent_by_nu": resent},
            "after": {"nu": {"overhead": overhead}},
            "link": {"link": "10mbit", "rate_bps": 10**7, "delay_ms": 5.0, "delay_applied": False}}


def test_a_cell_reports_medians_and_percentiles_over_its_trials_and_whether_all_were_exact(monkeypatch):
    got = iter([_trial(300.0, 0.5, 10), _trial(500.0, 0.7, 30), _trial(400.0, 0.6, 20, ok=False)])
    seen = []

    def fake(**kw):
        seen.append((kw["link"], kw["bsize"], kw["seed"]))
        return next(got)

    monkeypatch.setattr(bench_links, "run_trial", fake)
    c = bench_links.cell("10mbit", "inf", 3, seed=7)
    assert [s[2] for s in seen] == [7, 8, 9] and seen[0][:2] == ("10mbit", None)  # inf: no Bsize bound
    assert (c["failover_ms_p50"], c["failover_ms_p95"], c["overhead"], c["resent_by_nu"]) == (400.0, 500.0, 0.6, 20)
    assert c["data_recovery_ms"] == 280.0 and c["exact"] is False and len(c["trials"]) == 3


def test_ratios_are_none_where_a_cell_is_missing_or_zero():
    assert bench_links._ratio(900.0, 300.0) == 3.0
    assert bench_links._ratio(None, 300.0) is None and bench_links._ratio(900.0, 0) is None


def test_the_figures_are_drawn_per_link_and_one_for_data_recovery(tmp_path):
    row = {b: {"overhead": 0.4 / (i + 1), "failover_ms_p50": 190.0 + 100 * i, "failover_ms_p95": 200.0 + 100 * i,
               "data_recovery_ms": 50.0 + 100 * i} for i, b in enumerate(("1", "100", "inf"))}
    paths = bench_links.plot({"10mbit": row, "1gbit": row}, tmp_path)
    assert sorted(p.name for p in paths) == ["links-10mbit.png", "links-1gbit.png", "links-data.png"]
    assert all(p.stat().st_size > 5_000 and p.read_bytes()[:4] == b"\x89PNG" for p in paths)


def test_the_model_error_is_relative_to_the_measured_failover_and_a_missing_prediction_counts_one():
    from bench.links import model_error, model_errors

    assert model_error(150.0, 200.0) == pytest.approx(0.25)
    assert model_error(None, 200.0) is None and model_error(100.0, None) is None
    t = [{"failover_ms": 200.0, "model_error": 0.1}, {"failover_ms": 300.0, "model_error": None},
         {"failover_ms": None, "model_error": None}]  # the last did not fail over: not counted
    assert model_errors({"10mbit": {"1": {"trials": t}}}) == [0.1, 1.0]


def test_a_standby_state_cell_counts_the_backup_and_the_snapshots_on_the_wire(monkeypatch):
    def trial(cpu, failover, ok=True):
        return {"ok": ok, "recovery_ms": failover, "standby_cpu_ratio": cpu, "predicted_recovery_ms": 100.0,
                "workdir": "w", "before": {"nu": {"counters": {"backup_bytes": 3_000}},
                                           "n": {"counters": {"snapshot_bytes": 6_000, "snapshots_sent": 4,
                                                              "snapshot_deltas_sent": 2}}}}

    got = iter([trial(0.05, 300.0), trial(0.08, 500.0), trial(None, None, ok=False)])
    seen = []

    def fake(**kw):
        seen.append(kw["extra"]["standby_state"])
        return next(got)

    monkeypatch.setattr(bench_links, "run_trial", fake)
    c = bench_links.state_cell("snapshot", 3, seed=1)
    assert seen == ["snapshot"] * 3
    assert c["backup_bytes_per_s"] == round(9_000 / bench_links.STATES_KILL_AFTER_S)
    assert c["snapshot_bytes_per_s"] == round(6_000 / bench_links.STATES_KILL_AFTER_S)
    assert c["trials"][0]["snapshots"] == 4 and c["trials"][0]["snapshot_deltas"] == 2
    assert c["standby_cpu_ratio"] == pytest.approx(0.065) and c["failover_ms_p95"] == 500.0 and not c["exact"]


def test_seed_001s_passive_standby_is_the_snapshot_state_at_bsize_inf(monkeypatch):
    seen = []

    def fake(**kw):
        seen.append((kw["extra"]["standby_state"], kw["bsize"]))
        return {"ok": True, "recovery_ms": 200.0, "standby_cpu_ratio": 0.05, "predicted_recovery_ms": 150.0,
                "workdir": "w", "before": {"n": {"counters": {"snapshot_bytes": 900}}}}

    monkeypatch.setattr(bench_links, "run_trial", fake)
    c = bench_links.state_cell("snapshot_inf", 2, seed=1)
    assert seen == [("snapshot", None)] * 2 and c["exact"]
    assert c["backup_bytes_per_s"] == c["snapshot_bytes_per_s"] == round(900 / bench_links.STATES_KILL_AFTER_S)
    bench_links.state_cell("warm", 1, seed=1)
    assert seen[-1] == ("warm", bench_links.STATES_BSIZE)


def test_the_error_left_with_a_phase_measured_replaces_only_that_phases_terms():
    from bench.links import model_errors_measured

    p = {"detection_s": 0.08, "reconnection_s": 0.004, "resend_s": 0.006, "replay_s": 0.004, "restore_s": 0.0}
    t = {"failover_ms": 150.0, "predicted_ms": 94.0, "predicted": p, "data_recovery_ms": 50.0,
         "reconnection_ms": 6.0}
    late = {"failover_ms": 200.0, "predicted_ms": 94.0, "predicted": None, "data_recovery_ms": 10.0,
            "reconnection_ms": 5.0}
    grid = {"10mbit": {"1": {"trials": [t, late]}}}
    # 94 - 10 + 50 = 134 against 150; the trial without a prediction is left out
    assert model_errors_measured(grid, "data") == [pytest.approx(16 / 150)]
    # detection measured: 150 - 6 - 50 = 94 from the kill to the suspicion; 94 - 80 + 94 = 108 against 150
    assert model_errors_measured(grid, "detection") == [pytest.approx(42 / 150)]
