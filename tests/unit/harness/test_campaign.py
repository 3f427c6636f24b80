"""The chaos campaign's settings: codec and Bsize for every run, bad ones refused."""



def test_a_chaos_campaign_takes_codec_and_bsize_for_every_run_and_refuses_bad_ones(monkeypatch, tmp_path, capsys):
    import json

    from lazystandby.harness import campaign

    trials = []

    def fake_trial(**kw):
        trials.append(kw)
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
    assert [(t["codec"], t["bsize"]) for t in trials] == [("zstd-dict", None)] * 2
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["codec"], summary["bsize"], summary["runs"]) == ("zstd-dict", "inf", 2)


def test_a_run_that_is_not_ok_names_the_checks_that_failed(monkeypatch, tmp_path, capsys):
    """Exact output, yet not ok: the row says which of the trial's checks failed."""
    import json

    from lazystandby.harness import campaign

    def fake_trial(**kw):
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
