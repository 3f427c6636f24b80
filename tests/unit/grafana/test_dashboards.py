"""Dashboards reference only metrics that nodes export, and the committed JSON is what the builder makes."""

import json
import re
import sys
from pathlib import Path

from prometheus_client import generate_latest

from lazystandby.harness.inprocess import InProcessTopology
from lazystandby.metrics import registry_for

ROOT = Path(__file__).resolve().parents[3]


def exported_names() -> set[str]:
    names: set[str] = set()
    with InProcessTopology("memory", total=500, rate=0.0) as t:
        for node in t.nodes.values():
            for line in generate_latest(registry_for(node)).decode().splitlines():
                if line and not line.startswith("#"):
                    names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    return names


def test_every_dashboard_metric_is_exported():
    names = exported_names()
    used = set()
    for f in (ROOT / "grafana" / "dashboards").glob("*.json"):
        for p in json.loads(f.read_text())["panels"]:
            for t in p["targets"]:
                used |= set(re.findall(r"\b((?:lazystandby|process)_[a-z_]+)\b", t["expr"]))
    assert used, "no metrics found in the dashboards"
    assert used <= names, f"dashboards use metrics no node exports: {sorted(used - names)}"


def test_alert_rules_use_only_exported_metrics():
    names = exported_names() | {"up"}
    text = (ROOT / "deploy" / "prometheus" / "rules.yml").read_text()
    used = set(re.findall(r"\b((?:lazystandby|process)_[a-z_]+)\b", text))
    assert used <= names, sorted(used - names)


def test_committed_dashboards_match_the_builder(tmp_path):
    sys.path.insert(0, str(ROOT / "grafana"))
    import build_dashboards

    for p in build_dashboards.build(tmp_path):
        committed = ROOT / "grafana" / "dashboards" / p.name
        assert committed.read_text() == p.read_text(), f"{p.name}: run python grafana/build_dashboards.py"


def test_provisioning_points_at_the_dashboards():
    prov = (ROOT / "grafana" / "provisioning" / "dashboards" / "lazystandby.yml").read_text()
    assert "/var/lib/grafana/dashboards" in prov
    assert len(list((ROOT / "grafana" / "dashboards").glob("*.json"))) == 4
