"""The lazy standby's sealed backup on real node processes: at full speed N' decodes little of what it
receives, and a takeover with a large sealed backlog is still exact."""

from bench.harness import throughput
from lazystandby import native
from lazystandby.config import NodeConfig
from lazystandby.harness.launcher import run_trial


def test_at_full_speed_the_standby_receives_everything_and_decodes_little_of_it():
    r = throughput(bsize="10", codec="zstd-stream-dict", standby=True, total=1_000_000)
    assert r["takeovers"] == 0
    assert r["backup_coverage"] >= 0.9, r  # the backup kept up: a cheap standby is not a starved one
    assert r["backup_behind_at_end"] <= NodeConfig().backup_lag_max, r  # the source waited for it
    assert r["standby_decoded_ratio"] < 0.5, r  # what Nd's acks covered was left sealed
    assert r["codec_backend"] == native.backend(), r  # Nu compressed through the native library where built
    assert 1 <= r["worst_second"] <= max(1, len(r["per_second"]) - 1), r  # a full second of this run
    # The rates run from N's first frame done, which comes after Nu's start and within the run.
    assert 0 < r["first_output_ms"] < 1000 * r["tuples"] / r["tuples_per_s"], r
    assert 0 < r["worst_second_ratio"] <= 1 and 0 < r["worst_second_ratio_from_start"] <= 1, r
    # Each node's CPU over the run's clock (Nu's own reading at its start, the others' just after): on two
    # cores, none above two, and Nu, which made every tuple, busy.
    cores = r["cpu_cores_per_node"]
    assert set(cores) == {"nu", "n", "n2", "nd"} and all(0 <= c <= 2.05 for c in cores.values()), r
    assert cores["nu"] > 0.2, r
    # What else the machine ran (bench.harness.MachineShare): never less than nothing beyond the accounting's
    # skew in a run this short (the nodes counted twice would read about a core and a half below nothing).
    assert -0.25 <= r["other_cpu_cores"] <= 2.05 and r["bench_cpu_cores"] > 0, r


def test_a_takeover_at_a_high_rate_unseals_the_backlog_and_is_exact():
    r = run_trial(fault="kill-primary", total=400_000, rate=200_000.0, kill_after=1.0, timeout=120)
    assert r["delivered_all"] and r["took_over"], f"logs in {r['workdir']}"
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["unexpected"] == 0 and r["ok"], r["diff"]
    n2 = r["after"]["n2"]["counters"]
    assert n2.get("backup_unreadable", 0) == 0
    # Before the kill N' left the covered backup sealed; after it, it decoded what it had to process.
    assert 0 < n2["backup_decoded_tuples"] < n2["backup_tuples"], n2
