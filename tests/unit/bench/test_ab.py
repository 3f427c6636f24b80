"""bench/ab.py: the pairing of two commits' rounds, and a base that cannot be checked out."""

import pytest

from bench import ab


def _runs(base_rates, head_rates, base_cpu=1.0, head_cpu=1.0):
    return ([{"tuples_per_s": r, "cpu_us_per_tuple": base_cpu} for r in base_rates],
            [{"tuples_per_s": r, "cpu_us_per_tuple": head_cpu} for r in head_rates])


def test_rounds_are_paired_in_order_not_sorted():
    base, head = _runs([100, 200, 400], [110, 180, 400])
    got = ab.paired(base, head, "tuples_per_s")
    assert got["rounds"] == [1.1, 0.9, 1.0]
    assert (got["median"], got["min"], got["max"]) == (1.0, 0.9, 1.1)


def test_a_round_without_its_pair_is_refused():
    base, head = _runs([100, 200], [110])
    with pytest.raises(ValueError, match="2 of the base, 1 of the head"):
        ab.paired(base, head, "tuples_per_s")
    with pytest.raises(ValueError):
        ab.paired([], [], "tuples_per_s")


def test_compare_names_each_configuration():
    ha = dict(zip(("base", "head"), _runs([1000, 1000], [900, 950], base_cpu=1.0, head_cpu=1.1), strict=True))
    no_ha = dict(zip(("base", "head"), _runs([2000, 2000], [2000, 2200]), strict=True))
    got = ab.compare({"ha": ha, "no_ha": no_ha})
    assert got["ratio_ha"] == 0.925 and got["ratio_ha_min"] == 0.9 and got["ratio_ha_max"] == 0.95
    assert got["cpu_ratio_ha"] == 1.1
    assert got["ratio_no_ha"] == 1.05 and got["head_no_ha_tuples_per_s"] == 2100
    assert got["base_ha_tuples_per_s"] == 1000


def test_a_base_that_is_no_commit_is_refused_before_anything_is_checked_out(tmp_path):
    where = tmp_path / "base"
    with pytest.raises(ab.ABError, match="no-such-revision"):
        ab.prepare_base("no-such-revision", where)
    assert not where.exists()


def test_every_configuration_reports_through_one_line():
    for config in ab.CONFIGS:
        code = ab.REPORT.format(run=ab.RUN[config].format(total=10, bootstrap="127.0.0.1:9", kafka_total=10),
                                mark=ab.MARK)
        compile(code, config, "exec")  # a template that lost a brace fails here, not minutes into a run


def test_the_kafka_paths_ticks_reach_its_run_and_no_other(monkeypatch, tmp_path):
    ran = []

    class Done:
        returncode = 0
        stdout = ab.MARK + '{"tuples_per_s": 1000, "cpu_cores_per_node": {"N": 0.5}}\n'
        stderr = ""

    monkeypatch.setattr(ab.subprocess, "run", lambda cmd, **kw: ran.append(cmd[-1]) or Done())
    r = ab.run_once(tmp_path, "kafka", total=6_000_000, bootstrap="127.0.0.1:9", kafka_total=2_500_000)
    ab.run_once(tmp_path, "ha", total=6_000_000, kafka_total=2_500_000)
    assert "total=2500000" in ran[0] and "6000000" not in ran[0]
    assert "total=6000000" in ran[1] and "2500000" not in ran[1]
    assert r["cpu_us_per_tuple"] == 500.0


@pytest.mark.parametrize("flag", ["--rounds", "--tuples", "--kafka-tuples"])
def test_a_count_below_one_is_refused_before_anything_runs(monkeypatch, flag, capsys):
    monkeypatch.setattr(ab, "prepare_base", lambda *a: pytest.fail("checked out"))
    with pytest.raises(SystemExit) as e:
        ab.main(["--base", "HEAD", flag, "0"])
    assert e.value.code == 2
    assert "--kafka-tuples must be at least 1" in capsys.readouterr().err


def test_a_stopped_run_removes_the_bases_worktree_on_its_way_out(tmp_path):
    """SIGTERM while the base is being built: the run ends and leaves no worktree of the repository."""
    import os
    import signal
    import subprocess
    import sys
    import time

    root = ab.ROOT
    listed = lambda: subprocess.run(["git", "-C", str(root), "worktree", "list"], capture_output=True,  # noqa: E731
                                    text=True, check=True).stdout
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(root / d) for d in ("services", "spark", "."))}
    proc = subprocess.Popen([sys.executable, "-m", "bench.ab", "--base", "HEAD", "--rounds", "1"], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while "lazystandby-ab-" not in listed():
            assert proc.poll() is None and time.monotonic() < deadline, "no worktree appeared"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) != 0
    finally:
        proc.kill()
    assert "lazystandby-ab-" not in listed()
