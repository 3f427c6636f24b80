"""The chaos campaign's settings: codec and Bsize for every run, bad ones refused."""

from dataclasses import replace


def test_a_chaos_campaign_takes_codec_and_bsize_for_every_run_and_refuses_bad_ones(monkeypatch, tmp_path, capsys):
    import json

    from lazystandby.harness import campaign

    trials = []

    def fake_trial(spec, **kw):
        trials.append(replace(spec, **kw))
        return {"ok": True, "lost": 0, "duplicated": 0, "expected": 10, "got": 10, "delivered_all": True,
                "failovers": 1, "workdir": ""}

    monkeypatch.setattr(campaign, "run_trial", fake_trial)
    monkeypatch.setattr(campaign, "run_dir", lambda: tmp_path)
    monkeypatch.setattr(campaign.config, "kafka_bootstrap_from_env", lambda: "127.0.0.1:9")  # no broker started
    assert campaign.main(["--codec", "lz4"]) == 2
    assert "codec" in capsys.readouterr().err
    assert campaign.main(["--bsize", "0"]) == 2
    assert "bsize" in capsys.readouterr().err
    assert not trials
    assert campaign.main(["--runs", "2", "--seed", "1", "--codec", "zstd-dict", "--bsize", "inf"]) == 0
    assert [(t.codec, t.bsize) for t in trials] == [("zstd-dict", None)] * 2
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["codec"], summary["bsize"], summary["runs"]) == ("zstd-dict", "inf", 2)


def test_a_run_that_is_not_ok_names_the_checks_that_failed(monkeypatch, tmp_path, capsys):
    """Exact output, yet not ok: the row says which of the trial's checks failed."""
    import json

    from lazystandby.harness import campaign

    def fake_trial(spec, **kw):
        return {"ok": False, "lost": 0, "duplicated": 0, "wrong": 0, "expected": 10, "got": 10,
                "delivered_all": True, "failovers": 1, "workdir": str(tmp_path), "completed": True,
                "late_exact": False, "dead_letters_exact": True, "out_of_order": 2}

    monkeypatch.setattr(campaign, "run_trial", fake_trial)
    monkeypatch.setattr(campaign, "run_dir", lambda: tmp_path)
    monkeypatch.setattr(campaign.config, "kafka_bootstrap_from_env", lambda: "127.0.0.1:9")
    assert campaign.main(["--runs", "1", "--seed", "1"]) != 0
    capsys.readouterr()
    rows = json.loads((tmp_path / "chaos-campaign.json").read_text())["runs"]
    assert rows[0]["failed_checks"] == ["late_exact", "out_of_order"]


def test_a_campaign_over_stages_hits_a_stage_per_fault_and_pairs_across_stages(monkeypatch, tmp_path, capsys):
    """Over three stages: each run's faults are given per stage, all within 1..3, and some pairs hit two
    stages at once; the summary counts those."""
    import json
    from pathlib import Path

    from lazystandby.harness import campaign

    hot = str(Path(__file__).parents[3] / "examples" / "nexmark-hot-auctions.sql")
    faults, loads = [], []

    def fake_trial(spec, **kw):
        faults.append(kw["fault"])
        loads.append((spec.total, spec.rate))
        return {"ok": True, "lost": 0, "duplicated": 0, "expected": 10, "got": 10, "delivered_all": True,
                "failovers": 1, "workdir": ""}

    monkeypatch.delenv("LS_PIPELINE", raising=False)
    monkeypatch.setattr(campaign, "run_trial", fake_trial)
    monkeypatch.setattr(campaign, "run_dir", lambda: tmp_path)
    monkeypatch.setattr(campaign.config, "kafka_bootstrap_from_env", lambda: "127.0.0.1:9")
    assert campaign.main(["--runs", "30", "--seed", "3", "--pipeline", hot]) == 0
    assert all(isinstance(f, dict) and f and set(f) <= {1, 2, 3} for f in faults)
    assert {k for f in faults for k in f} == {1, 2, 3}
    across = [f for f in faults if len(f) == 2]
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["across_stages"] == len(across) > 0 and summary["double_faults"] >= len(across)
    assert summary["query"].count("; ") == 2  # the three stages' queries
    # A load whose windows close in every stage: three of each window stage's size and delay of bids.
    assert set(loads) == {(3 * (14_000 + 2_000) * 10, 40_000.0 / 3)}
    rows = json.loads((tmp_path / "chaos-campaign.json").read_text())["runs"]
    assert all("@" in r["fault"] for r in rows)
