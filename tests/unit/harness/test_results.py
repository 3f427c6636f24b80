"""The declaration of every JSON summary (lazystandby.harness.results): docs/results.md is generated from
it, and each summary a command prints is built through it, so a key cannot reach a user undeclared."""

import json
from pathlib import Path

import pytest

from lazystandby.harness import campaign, launcher, results

ROOT = Path(__file__).resolve().parents[3]


def test_docs_results_md_is_generated_from_the_declaration():
    assert (ROOT / "docs" / "results.md").read_text() == results.markdown(), (
        "docs/results.md is stale: python -m lazystandby.harness.results > docs/results.md")


def test_a_summary_with_an_undeclared_key_is_refused_and_a_declared_one_passes():
    assert json.loads(results.dumps("launch", {"lost": 0, "ok": True})) == {"lost": 0, "ok": True}
    with pytest.raises(results.UndeclaredResultKey, match="launch's summary has undeclared keys \\['lossed'\\]"):
        results.dumps("launch", {"lost": 0, "lossed": 0})
    with pytest.raises(KeyError):
        results.dumps("no-such-command", {})


def test_every_key_has_one_row_and_a_meaning():
    for name, s in results.SUMMARIES.items():
        assert len(set(s.names())) == len(s.names()), name
        assert all(meaning.strip() for _, meaning in s.keys), name


def fake_trial(**kw) -> dict:
    """What run_trial returns, as far as the summaries read it: one exact trial with a takeover."""
    recovery = {"cause": "detector", "detection_ms": 30.0, "reconnection_ms": 5.0, "data_recovery_ms": 20.0,
                "replayed_from_oq": 3, "resent_by_nu": 7, "backlog_at_takeover": 9, "catch_up_ms": 4.0}
    return {"expected": 100, "got": 100, "lost": 0, "duplicated": 0, "out_of_order": 0, "failovers": 1,
            "recovery": recovery, "recovery_ms": 61.5, "ok": True, "workdir": "w", "delivered_all": True,
            "malformed": 0, "restarted": [], "takeovers_declined": 0,
            "after": {"nu": {"overhead": 0.25, "standby": "", "standby_in_sync": False}}}


@pytest.mark.parametrize("argv, command", [(["launch"], "launch"),
                                           (["failover-check", "--kills", "2"], "failover-check")])
def test_launch_and_failover_check_print_only_declared_keys(monkeypatch, capsys, argv, command):
    monkeypatch.setattr(launcher, "run_trial", lambda *spec, **kw: fake_trial())
    assert launcher.main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(summary) <= set(results.SUMMARIES[command].names())
    assert summary["lost"] == 0 and summary["duplicated"] == 0


def test_the_campaign_prints_only_declared_keys(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("KAFKA_BOOTSTRAP", "127.0.0.1:9")  # handed to run_trial only: no broker starts
    monkeypatch.setattr(campaign, "run_trial", lambda *spec, **kw: fake_trial())
    monkeypatch.setattr(campaign, "run_dir", lambda: tmp_path)
    assert campaign.main(["--runs", "3", "--seed", "1"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(summary) == set(results.SUMMARIES["chaos-campaign"].names())
    assert summary["runs"] == 3 and (tmp_path / "chaos-campaign.json").exists()
