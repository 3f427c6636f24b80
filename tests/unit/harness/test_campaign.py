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
