import pytest

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
        assert t.wait(lambda: nu.outbound.oqu.trimmed_through == 4000)
        s = nu.snapshot()
    assert 0 < s["e2e_commit_p50_ms"] <= s["e2e_commit_p99_ms"] < 5000
    out = nu.outbound
    assert out.e2e_seconds.count == len(out.e2e_recent._values)  # one observation per admitted run in both


def test_throughput_reports_the_median_run_with_all_rates():
    from bench.harness import median_run

    rs = [{"tuples_per_s": v, "cpu": i} for i, v in enumerate([59_000, 42_000, 49_000])]
    m = median_run(rs)
    assert m["tuples_per_s"] == 49_000 and m["cpu"] == 2
    assert m["runs_tuples_per_s"] == [59_000, 42_000, 49_000]


def test_the_bench_follows_the_primary_through_a_takeover():
    """A takeover during a measurement (a false suspicion on a loaded machine is one) moves the count to N';
    a bench that kept reading the fenced N would wait until its 600 s deadline."""
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


def test_per_second_rates_divide_by_each_window_as_it_was_measured():
    """A mark taken 80 ms late makes one window 1.08 s and the next 0.92 s: at a steady 100,000 tuples/s
    both are 100,000/s, where counting tuples per window would read 92,000 as a dip."""
    from bench.harness import per_second_rates

    marks = [(0.0, 0), (1.08, 108_000), (2.0, 200_000), (3.0, 300_000), (3.0, 300_000), (3.4, 340_000)]
    assert per_second_rates(marks) == [100_000, 100_000, 100_000, 100_000]
    assert per_second_rates([(0.0, 0), (1.0, 50_000), (2.0, 150_000)]) == [50_000, 100_000]


def test_backup_codec_cost_measures_the_codec_and_its_floor_on_the_same_ticks():
    from bench.harness import backup_codec_cost

    c = backup_codec_cost(total=60_000)
    assert c["tuples"] == 60_000
    assert 0 < c["floor_encode_us_per_tuple"] < c["floor_us_per_tuple"] < c["us_per_tuple"]
    # Batch by batch costs more than one call over a run's bytes, and no more than the link's whole encoding.
    assert c["floor_encode_us_per_tuple"] < c["batch_floor_encode_us_per_tuple"] <= c["encode_us_per_tuple"] * 1.2
    assert abs(c["us_per_tuple"] - c["encode_us_per_tuple"] - c["decode_us_per_tuple"]) <= 0.002  # rounding
    assert 0.1 < c["compressed_vs_raw"] < 0.35 and c["raw_bytes_per_tuple"] > 20
    from lazystandby import native

    assert c["backend"] == native.backend()  # Nu's own compressor, native where it is built


def test_ha_cost_bound_is_the_pipeline_cpu_over_itself_plus_the_codec_floors_compression():
    from bench.harness import ha_cost_bound

    ha = {"cpu_cores_per_node": {"nu": 0.7, "n": 0.5, "n2": 0.3, "nd": 0.3}, "tuples_per_s": 600_000}
    no_ha = {"cpu_cores_per_node": {"nu": 0.6, "n": 0.6, "nd": 0.4}, "tuples_per_s": 1_000_000}
    b = ha_cost_bound(ha, no_ha, {"us_per_tuple": 0.5, "floor_us_per_tuple": 0.3, "floor_encode_us_per_tuple": 0.2,
                                  "batch_floor_encode_us_per_tuple": 0.4, "backend": "libzstd 1.5.4 via zrun.c"})
    assert b["ha_cpu_us_per_tuple"] == 3.0 and b["no_ha_cpu_us_per_tuple"] == 1.6
    assert b["ha_cost_ratio_bound"] == round(1.6 / 1.8, 3)  # a lazy standby: compressing is the floor
    assert b["backup_codec_floor_us_per_tuple"] == 0.3
    assert b["backup_codec_backend"] == "libzstd 1.5.4 via zrun.c"
    assert b["ha_cost_ratio_bound_batched"] == 0.8 and b["backup_codec_batch_floor_encode_us_per_tuple"] == 0.4


def test_the_cost_per_round_pairs_the_runs_of_each_round_and_each_node_gets_its_cpu_per_tuple():
    from bench.harness import cost_rounds, cpu_us_per_tuple_by_node

    ha = [{"tuples_per_s": t} for t in (600_000, 520_000, 720_000)]
    no_ha = [{"tuples_per_s": t} for t in (800_000, 700_000, 960_000)]
    assert cost_rounds(ha, no_ha) == [0.75, 0.743, 0.75]
    with pytest.raises(ValueError):
        cost_rounds(ha, no_ha[:2])  # a round without its pair is not a round
    run = {"cpu_cores_per_node": {"nu": 0.6, "n2": 0.24}, "tuples_per_s": 600_000}
    assert cpu_us_per_tuple_by_node(run) == {"nu": 1.0, "n2": 0.4}


def test_paced_keys_compare_the_median_runs_and_price_the_standby_in_cores_within_each_round():
    from bench.harness import paced_keys

    def run(rate, cores, worst, coverage=0.0):
        return {"tuples_per_s": rate, "cpu_cores_per_node": cores, "worst_second_ratio": worst,
                "backup_coverage": coverage, "max_rss_mb": {"nu": 100.0}}

    ha = [run(490_000, {"nu": 0.6, "n2": 0.1, "n": 0.4}, 0.9, 1.0), run(498_000, {"nu": 0.5, "n2": 0.1, "n": 0.4},
                                                                       0.95, 0.99)]
    no_ha = [run(499_000, {"nu": 0.4, "n": 0.4}, 0.97), run(500_000, {"nu": 0.4, "n": 0.4}, 0.98)]
    k = paced_keys(ha, no_ha, 500_000.0)
    assert k["paced_tuples_per_s"] == 498_000 and k["paced_no_ha_tuples_per_s"] == 500_000
    assert k["paced_ha_cost_ratio"] == 0.996 and k["paced_ha_cost_ratio_rounds"] == [0.982, 0.996]
    assert k["paced_worst_second_ratio"] == 0.95 and k["paced_backup_coverage"] == 0.99
    assert k["paced_cpu_cores"] == {"ha": 1.05, "no_ha": 0.8} and k["paced_standby_cpu_ratio"] == 1.312
    assert k["paced_standby_cpu_ratio_rounds"] == [1.375, 1.25]
    assert k["paced_rate_tuples_per_s"] == 500_000
    # A slow round and a fast one, all at the pace. The median by rate would take the
    # standby's run from the fast round and the other from the slow one: 1.182 against 1.226 cores.
    ha = [run(498_912, {"nu": 1.182}, 0.99), run(498_577, {"nu": 1.347}, 0.99)]
    no_ha = [run(498_482, {"nu": 0.995}, 0.99), run(498_902, {"nu": 1.226}, 0.99)]
    k = paced_keys(ha, no_ha, 500_000.0)
    assert k["paced_standby_cpu_ratio_rounds"] == [1.188, 1.099] and k["paced_standby_cpu_ratio"] == 1.143


def test_the_kafka_peers_must_have_done_the_same_work():
    from bench.harness import same_selection

    same_selection({"tuples": 300, "selected": 147}, {"tuples": 300, "selected": 147, "committed": True}, "Flink")
    with pytest.raises(RuntimeError, match="Kafka Streams read 300 and kept 146"):
        same_selection({"tuples": 300, "selected": 147}, {"tuples": 300, "selected": 146}, "Kafka Streams")
    with pytest.raises(RuntimeError, match="Quix Streams read 299"):
        same_selection({"tuples": 299, "selected": 147}, {"tuples": 300, "selected": 147}, "Flink")


def test_a_jvm_peer_s_failover_keys_are_its_median_its_duplicates_and_the_median_over_our_worst_p95():
    from bench.harness import jvm_failover_keys

    runs = [{"failover_ms": 7000.0, "duplicated": 0}, {"failover_ms": 5000.0, "duplicated": 2},
            {"failover_ms": 9000.0, "duplicated": 0}]
    assert jvm_failover_keys("flink", runs, 200.0) == {"flink_failover_ms": 7000.0, "flink_failover_duplicated": 2,
                                                      "failover_speedup_vs_flink": 35.0}


def test_a_run_s_scratch_directory_goes_when_the_run_ends_and_stays_when_it_fails(tmp_path):
    """A throughput run leaves 130 MB of Nd output: bench runs that kept theirs filled the disk."""
    from lazystandby.harness.launcher import scratch

    with scratch("ok-", under=tmp_path) as d:
        (d / "nd-output.tsv").write_text("x")
    assert not d.exists()
    with pytest.raises(RuntimeError), scratch("failed-", under=tmp_path) as kept:
        (kept / "nu.log").write_text("why")
        raise RuntimeError("run failed")
    assert (kept / "nu.log").read_text() == "why"  # its logs stay for whoever looks into it
    with scratch("kept-", under=tmp_path, keep=True) as asked:
        pass
    assert asked.is_dir()


def test_the_slowest_second_is_taken_over_the_full_seconds_and_says_which_it_was():
    from bench.harness import slowest_second

    # The last window is a partial second: slower, and not counted.
    s = slowest_second([900, 1_000, 1_100, 1_000, 100])
    assert s == {"mean_per_s": 1_000, "worst_second_ratio": 0.9, "worst_second": 1}
    assert slowest_second([1_000, 1_000, 700, 1_300, 5])["worst_second"] == 3
    assert slowest_second([800])["worst_second_ratio"] == 1.0  # a run shorter than a second: its only window


def test_a_run_starts_when_nu_says_not_when_its_status_first_answered():
    """Nu's server answers status before Nu starts: a run's clock starts at Nu's own time of the event."""
    import time

    from bench.harness import nu_time
    from lazystandby.core.errors import PeerError

    class Topo:
        calls = 0

        def status(self, key):
            assert key == "nu"
            self.calls += 1
            if self.calls == 1:
                raise PeerError("UNAVAILABLE", "connection refused", refused=True)  # not yet, not an error
            return {"started_at": None if self.calls < 3 else at, "first_admitted_at": at}

    at = time.time() - 0.3
    t0 = nu_time(Topo(), "started_at")
    assert abs((time.monotonic() - t0) - 0.3) < 0.1  # 0.3 s ago, though reported only now
    assert abs((time.monotonic() - nu_time(Topo(), "first_admitted_at")) - 0.3) < 0.1
    at = time.time() + 5  # a clock that says it happens later: the run starts now, not then
    assert abs(nu_time(Topo(), "started_at") - time.monotonic()) < 0.1


def test_a_nu_that_answers_but_never_starts_is_an_error_not_a_run():
    from bench.harness import nu_time

    class Topo:
        def status(self, key):
            return {"started_at": None}

    with pytest.raises(RuntimeError, match="did not report started_at within 0.05 s"):
        nu_time(Topo(), "started_at", timeout=0.05)


def test_nus_usage_at_start_is_what_it_reports_and_an_error_before_it_starts():
    from bench.harness import usage_at_start

    class Topo:
        snapshot = {"cpu_seconds_at_start": None, "minor_faults_at_start": None}

        def status(self, key):
            assert key == "nu"
            return self.snapshot

    with pytest.raises(RuntimeError, match="has not started"):
        usage_at_start(Topo())
    Topo.snapshot = {"cpu_seconds_at_start": 1.25, "minor_faults_at_start": 4321}
    assert usage_at_start(Topo()) == (1.25, 4321)


def test_the_bench_polls_the_primary_through_the_status_it_is_given():
    """The throughput runs poll through a kept channel (Topology.poller), not a fresh one per call."""
    from bench.harness import Serving

    class Topo:
        procs = {"nu": 0, "n": 0, "nd": 0}

        def status(self, key):
            raise AssertionError("polled through a fresh channel")

    asked = []
    s = Serving(Topo(), lambda key: asked.append(key) or {"role": "primary", "epoch": 1, "processed": [7, 3]})
    assert s.processed() == 7 and asked == ["n"]


def test_backup_codec_cost_reports_each_parts_least_cpu_over_its_passes(monkeypatch):
    """A pass slowed by something beside it (1.76x once, just after the bench's Spark runs) must not raise
    the floor: each part's figure is its least over the passes."""
    import bench.harness as h

    slow = {"enc": 0.8, "dec": 0.4, "floor_enc": 0.3, "floor_dec": 0.2, "batch": 0.7, "raw": 100, "compressed": 27,
            "backend": "b"}
    quick = {**slow, "enc": 0.5, "floor_enc": 0.2, "batch": 0.4}
    passes = iter([slow, quick, {**slow, "dec": 0.3}])
    monkeypatch.setattr(h, "_codec_pass", lambda runs, bsize, codec: next(passes))
    c = h.backup_codec_cost(total=20_480, passes=3)
    us = 1e6 / 20_480
    assert c["passes"] == 3 and c["tuples"] == 20_480
    assert c["encode_us_per_tuple"] == round(0.5 * us, 3) and c["decode_us_per_tuple"] == round(0.3 * us, 3)
    assert c["batch_floor_encode_us_per_tuple"] == round(0.4 * us, 3)
    assert c["floor_us_per_tuple"] == round(0.4 * us, 3) and c["compressed_vs_raw"] == 0.27


def test_frame_marks_are_the_node_s_own_frame_times_a_second_apart_from_its_first_frame():
    """A count polled between frames is up to a frame old: the rates run between the times the node
    finished a frame, and start at its first, not at Nu's start (the pipeline's fill is no slow second)."""
    import time

    from bench.harness import FrameMarks, per_second_rates

    wall = time.time()
    f = FrameMarks()
    f.see({"processed": [0, 0], "processed_at": None})  # nothing done yet
    f.see({"processed": [5, 2], "processed_at": None})  # a node that does not say when: no point
    for ago, done in ((3.0, 32_768), (2.5, 98_304), (1.9, 163_840), (1.0, 229_376), (0.6, 262_144)):
        f.see({"processed": [done, 0], "processed_at": wall - ago})
    # 2.5 s ago is under a second after the first point, 1.0 s ago under a second after the second one
    assert [d for _, d in f.marks] == [32_768, 163_840, 262_144]
    f.see({"processed": [262_144, 0], "processed_at": wall - 0.6}, final=True)  # no new frame: no new point
    f.see({"processed": [300_000, 0], "processed_at": wall - 0.5}, final=True)  # the run's end, however soon
    assert [d for _, d in f.marks] == [32_768, 163_840, 262_144, 300_000]
    rates = per_second_rates(f.marks)
    assert [round(r, -3) for r in rates] == [round(131_072 / 1.1, -3), round(98_304 / 1.3, -3), round(37_856 / 0.1, -3)]


def stat_line(pid: int, ppid: int, utime: int, stime: int, minflt: int) -> str:
    """A /proc/<pid>/stat line: a name with spaces and parentheses, then state, ppid, ... (fields 4-15)."""
    return f"{pid} (a (b) c) S {ppid} {pid} {pid} 0 -1 4194304 {minflt} 0 0 0 {utime} {stime} 0 0 20 0 1 0\n"


def test_a_node_s_usage_is_its_own_and_what_it_started_from_one_pass_over_proc(tmp_path):
    from bench.harness import tree_usage
    from lazystandby.harness.operator_procs import CLOCK_TICKS, children_of, proc_table

    # 10 the node, 11 its JVM, 12 the JVM's worker; 20 another process; 13 vanished between list and read.
    for pid, ppid, ut, st, mf in ((10, 1, 100, 50, 7), (11, 10, 300, 100, 5), (12, 11, 20, 0, 1), (20, 1, 999, 1, 9)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(stat_line(pid, ppid, ut, st, mf))
    (tmp_path / "13").mkdir()
    (tmp_path / "self").mkdir()
    table = proc_table(tmp_path)
    assert set(table) == {10, 11, 12, 20}
    assert tree_usage(table, 10) == pytest.approx(((100 + 50 + 300 + 100 + 20) / CLOCK_TICKS, 13))
    assert tree_usage(table, 12) == pytest.approx((20 / CLOCK_TICKS, 1))
    assert tree_usage(table, 99) == (0.0, 0)  # a node already gone counts nothing
    children = children_of(table)  # one map for every node of a mark
    assert [tree_usage(table, p, children) for p in (10, 12, 99)] == [tree_usage(table, p) for p in (10, 12, 99)]


def test_the_machine_s_cpu_splits_processes_interrupts_and_steal_and_refuses_another_file():
    from bench.harness import machine_cpu
    from lazystandby.harness.operator_procs import CLOCK_TICKS

    # user nice system idle iowait irq softirq steal guest guest_nice
    got = machine_cpu("cpu  1000 10 200 5000 30 4 6 50 0 0\ncpu0 500 5 100 2500 15 2 3 25 0 0\n")
    assert got == pytest.approx((1210 / CLOCK_TICKS, 10 / CLOCK_TICKS, 50 / CLOCK_TICKS))
    with pytest.raises(ValueError, match="not /proc/stat"):
        machine_cpu("intr 12345 0 0\n")
    with pytest.raises(ValueError, match="not /proc/stat"):
        machine_cpu("cpu  1 2 3\n")  # cut short


def test_other_work_is_the_machine_s_process_cpu_less_the_nodes_and_the_bench_s_own():
    from bench.harness import machine_share_keys, other_cores

    # (time, processes, interrupts, steal, nodes, bench): over 2 s the machine's processes took 3.0 s of
    # CPU, the nodes 2.4 and the bench 0.2: 0.4 s of other work, 0.2 cores.
    a, b = (10.0, 100.0, 5.0, 1.0, 50.0, 3.0), (12.0, 103.0, 5.1, 1.0, 52.4, 3.2)
    assert other_cores(a, b) == {"other": 0.2, "bench": 0.1, "irq": 0.05, "steal": 0.0}

    def run(other, per_second, steal):
        return {"other_cpu_cores": other, "other_cpu_cores_per_second": per_second, "steal_cpu_cores": steal}

    keys = machine_share_keys([run(0.01, [0.0, 0.6], 0.0), run(0.02, [], 0.01)], [run(0.5, [0.5, 0.4], 0.2)])
    assert keys == {"other_cpu_cores_rounds": {"ha": [0.01, 0.02], "no_ha": [0.5]},
                    "other_cpu_cores_max_second_rounds": {"ha": [0.6, 0.0], "no_ha": [0.5]},
                    "steal_cpu_cores_max": 0.2}


def test_a_window_too_short_for_the_machine_s_ticks_is_not_read_as_a_second_of_other_work():
    from bench.harness import MachineShare

    share = MachineShare(lambda: [])
    # Two seconds with 0.1 cores of other work each, then a run's last mark a poll later, where a tick of
    # the machine's (10 ms) and none of the nodes' read as 0.2 cores over 50 ms.
    share.marks = [(0.0, 0.0, 0.0, 0.0, 0.0, 0.0), (1.0, 1.5, 0.0, 0.0, 1.4, 0.0), (2.0, 3.0, 0.0, 0.0, 2.8, 0.0),
                   (2.05, 3.01, 0.0, 0.0, 2.8, 0.0)]
    assert share.per_second() == [0.1, 0.1]
    assert share.over_run()["other"] == pytest.approx(0.21 / 2.05, abs=0.001)  # the run as a whole keeps it


def test_other_work_beside_the_throughput_runs_is_said_and_the_accounting_s_skew_is_not():
    from bench.harness import busy_machine_warning

    def keys(ha, no_ha):
        return {"other_cpu_cores_max_second_rounds": {"ha": ha, "no_ha": no_ha}}

    assert busy_machine_warning(keys([-0.036, -0.007, 0.1], [-0.039, 0.15])) is None  # an idle machine's skew
    said = busy_machine_warning(keys([-0.01, 0.02], [0.05, 0.846]))
    assert said is not None and "0.85 cores" in said and "read low" in said
