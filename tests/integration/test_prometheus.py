"""Against a real Prometheus (Debian's package): the rules pass promtool, an alert really fires, and
`make dashboards-check`'s run finds every panel query answered with data."""

import json
import shutil
import signal
import subprocess
import time

from lazystandby.harness import dashboards_check, results
from lazystandby.harness.launcher import Topology
from lazystandby.harness.local_prometheus import RULES, LocalPrometheus, install

JOBS = {"nu": "upstream", "n": "primary", "n2": "standby", "nd": "downstream"}


def test_rules_pass_promtool():
    install()
    out = subprocess.run([shutil.which("promtool") or "promtool", "check", "rules", str(RULES)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_operator_stalled_fires_only_while_a_primary_says_it_is_stalled(tmp_path):
    """promtool's rule tests: the rule as Prometheus evaluates it, over series written here."""
    install()
    (tmp_path / "t.yml").write_text(json.dumps({
        "rule_files": [str(RULES)], "evaluation_interval": "1s",
        "tests": [{"interval": "1s",
                   "input_series": [{"series": 'lazystandby_operator_stalled{node="N", job="primary"}',
                                     "values": "0 0 0 1 1 1 1 1 1 1 1 1 0 0"},
                                    {"series": 'lazystandby_operator_stalled{node="N\'", job="standby"}',
                                     "values": "0x13"}],
                   "alert_rule_test": [
                       {"eval_time": "6s", "alertname": "OperatorStalled", "exp_alerts": []},  # pending
                       {"eval_time": "9s", "alertname": "OperatorStalled",
                        "exp_alerts": [{"exp_labels": {"severity": "critical", "node": "N"},
                                        "exp_annotations": {"summary": "A primary's operator has stopped "
                                                            "answering; its standby should take over"}}]},
                       {"eval_time": "13s", "alertname": "OperatorStalled", "exp_alerts": []}]}]}))
    out = subprocess.run([shutil.which("promtool") or "promtool", "test", "rules", str(tmp_path / "t.yml")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_recovery_target_at_risk_fires_while_the_prediction_stays_above_the_target(tmp_path):
    """promtool's rule tests: a standby whose predicted recovery rises past recovery_target_ms for 30 s
    fires; one that knows nothing yet (NaN), and a node with no target, do not."""
    install()
    pred = 'lazystandby_predicted_recovery_seconds{node="%s", job="%s"}'
    target = 'lazystandby_recovery_target_seconds{node="%s", job="%s"}'
    (tmp_path / "t.yml").write_text(json.dumps({
        "rule_files": [str(RULES)], "evaluation_interval": "1s",
        "tests": [{"interval": "1s",
                   "input_series": [{"series": pred % ("N'", "standby"), "values": "NaN 0.3x20 0.8x60 0.3x20"},
                                    {"series": target % ("N'", "standby"), "values": "0.5x100"},
                                    {"series": pred % ("N", "primary"), "values": "5x100"},
                                    {"series": target % ("N", "primary"), "values": "0x100"}],
                   "alert_rule_test": [
                       {"eval_time": "15s", "alertname": "RecoveryTargetAtRisk", "exp_alerts": []},
                       {"eval_time": "40s", "alertname": "RecoveryTargetAtRisk", "exp_alerts": []},  # pending
                       {"eval_time": "60s", "alertname": "RecoveryTargetAtRisk",
                        "exp_alerts": [{"exp_labels": {"severity": "warning", "node": "N'"},
                                        "exp_annotations": {"summary": "A takeover now would take longer than "
                                                            "recovery_target_ms: lower Bsize, or give the link "
                                                            "or the operator more room"}}]},
                       {"eval_time": "95s", "alertname": "RecoveryTargetAtRisk", "exp_alerts": []}]}]}))
    out = subprocess.run([shutil.which("promtool") or "promtool", "test", "rules", str(tmp_path / "t.yml")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_standby_cut_off_fires_on_declines_that_go_on_and_not_on_a_crash(tmp_path):
    """promtool's rule tests: Nd declining a takeover every second (a standby cut off from a primary that
    delivers) fires after 30 s; the one decline a crash can cause never does."""
    install()
    summary = ("Nd keeps declining the standby's takeovers: the standby is cut off from a primary that still "
               "delivers")
    series = 'lazystandby_takeovers_declined_total{node="Nd", job="downstream", reason="%s"}'
    (tmp_path / "t.yml").write_text(json.dumps({
        "rule_files": [str(RULES)], "evaluation_interval": "1s",
        "tests": [
            {"interval": "1s",
             "input_series": [{"series": series % "unheard", "values": "0+1x90"},
                              {"series": series % "lease", "values": "0x90"}],
             "alert_rule_test": [
                 {"eval_time": "20s", "alertname": "StandbyCutOffFromPrimary", "exp_alerts": []},  # pending
                 {"eval_time": "45s", "alertname": "StandbyCutOffFromPrimary",
                  "exp_alerts": [{"exp_labels": {"severity": "warning"},
                                  "exp_annotations": {"summary": summary}}]}]},
            {"interval": "1s",
             "input_series": [{"series": series % "lease", "values": "0 0 0 1x90"}],
             "alert_rule_test": [
                 {"eval_time": "45s", "alertname": "StandbyCutOffFromPrimary", "exp_alerts": []},
                 {"eval_time": "80s", "alertname": "StandbyCutOffFromPrimary", "exp_alerts": []}]}]}))
    out = subprocess.run([shutil.which("promtool") or "promtool", "test", "rules", str(tmp_path / "t.yml")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_standby_down_alert_fires_when_the_standby_is_killed(tmp_path):
    work = tmp_path
    with Topology({"total": 0, "rate": 2000.0}, work) as topo:
        topo.start_all()
        targets = {JOBS[k]: f"127.0.0.1:{p}" for k, p in topo.metrics_ports.items()}
        with LocalPrometheus(work / "prom", targets, short_for=True) as prom:
            time.sleep(3)
            assert not [a for a in prom.alerts() if a["labels"]["alertname"] == "StandbyDown"]
            topo.signal("n2", signal.SIGKILL)
            deadline = time.monotonic() + 30
            firing = []
            while time.monotonic() < deadline and not firing:
                firing = [a for a in prom.alerts()
                          if a["labels"]["alertname"] == "StandbyDown" and a["state"] == "firing"]
                time.sleep(0.5)
            assert firing, prom.alerts()
            assert not [a for a in prom.alerts() if a["labels"]["alertname"] == "PrimaryDownNoFailover"]


def test_standby_out_of_sync_fires_while_a_paused_standby_holds_a_call_and_clears_when_it_answers(tmp_path):
    """rpc_timeout 30 s: the paused standby's call hangs without failing, so Nu still counts the link up
    (no NoStandby) while it no longer waits for the standby (out of sync)."""
    work = tmp_path
    with Topology({"total": 0, "rate": 2000.0, "rpc_timeout": 30.0}, work) as topo:
        topo.start_all()
        targets = {JOBS[k]: f"127.0.0.1:{p}" for k, p in topo.metrics_ports.items()}
        with LocalPrometheus(work / "prom", targets, short_for=True) as prom:
            def firing(name: str) -> list:
                return [a for a in prom.alerts() if a["labels"]["alertname"] == name and a["state"] == "firing"]

            time.sleep(3)
            assert not firing("StandbyOutOfSync")
            topo.signal("n2", signal.SIGSTOP)
            try:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and not firing("StandbyOutOfSync"):
                    time.sleep(0.5)
                assert firing("StandbyOutOfSync"), prom.alerts()
                assert not firing("NoStandby") and topo.status("nu")["standby_in_sync"] is False
            finally:
                topo.signal("n2", signal.SIGCONT)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and firing("StandbyOutOfSync"):
                time.sleep(0.5)
            assert not firing("StandbyOutOfSync") and topo.status("nu")["standby_in_sync"] is True


def test_every_panel_query_returns_data_after_a_failover():
    s = dashboards_check.run(settle=8.0)
    results.declared("dashboards-check", dashboards_check.summary_of(s))
    assert s["failovers"] == 1
    assert s["dashboards"] == 4 and s["queries"] >= s["panels"] > 15
    assert s["errors"] == 0, json.dumps(s["error_queries"], indent=1)
    assert s["empty"] == 0, json.dumps(s["empty_queries"], indent=1)
