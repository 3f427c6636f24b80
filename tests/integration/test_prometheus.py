"""Against a real Prometheus (Debian's package): the rules pass promtool, an alert really fires, and
`make dashboards-check`'s run finds every panel query answered with data."""

import json
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from lazystandby.harness import dashboards_check
from lazystandby.harness.launcher import Topology
from lazystandby.harness.local_prometheus import RULES, LocalPrometheus, install

JOBS = {"nu": "upstream", "n": "primary", "n2": "standby", "nd": "downstream"}


def test_rules_pass_promtool():
    install()
    out = subprocess.run([shutil.which("promtool") or "promtool", "check", "rules", str(RULES)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_standby_down_alert_fires_when_the_standby_is_killed():
    work = Path(tempfile.mkdtemp())
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


def test_every_panel_query_returns_data_after_a_failover():
    s = dashboards_check.run(settle=8.0)
    assert s["failovers"] == 1
    assert s["dashboards"] == 4 and s["queries"] >= s["panels"] > 15
    assert s["errors"] == 0, json.dumps(s["error_queries"], indent=1)
    assert s["empty"] == 0, json.dumps(s["empty_queries"], indent=1)
