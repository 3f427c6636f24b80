"""The compose stack's stages (harness/compose_stages.py): each later stage's nodes copied from the stack's
own definitions, with their stage, addresses, certificates and Spark hosts their own; every copy's
certificate made and scraped. The real stack runs a pipeline of two stages in tests/system."""

import json
import subprocess

import pytest

from lazystandby.core.errors import SettingError
from lazystandby.harness import compose_stages as cs

ROOT = cs.ROOT


def node(name: str, role: str, *, upstream="nu:50051", primary="") -> dict:
    """A node service as `docker compose config --no-interpolate` gives it."""
    return {"image": "lazystandby/node:${LS_TAG:-0.1.0}", "build": {"context": "/x"}, "restart": "on-failure",
            "command": ["node", "--role", role, "--advertise", f"{name}:50051", "--upstream", upstream,
                        "--downstream", "nd:50051", *(["--primary", primary] if primary else [])],
            "environment": {"LS_BSIZE": "${LS_BSIZE:-10}", "LS_TLS_CERT": f"/tls/{name}.crt",
                            "LS_TLS_KEY": f"/tls/{name}.key", "LS_SPARK_FEED_ADVERTISE": f"{name}:7100",
                            "LS_SPARK_CONF": "${LS_SPARK_APP_CONF:-a=1};spark.driver.host=" + name,
                            "LS_PREDICATE": "${LS_PREDICATE:-price > 100}"},
            "volumes": [{"type": "volume", "source": "tls", "target": "/tls", "read_only": True},
                        {"type": "volume", "source": "${LS_PIPELINE_DIR:-./examples}", "target": "/app/examples",
                         "read_only": True}],
            "depends_on": {"nd": {"condition": "service_healthy", "required": True},
                           "certs": {"condition": "service_completed_successfully", "required": True}},
            "profiles": ["spares"] if name.startswith("n-standby-") else []}


BASE = {"services": {**{n: node(n, "standby" if "standby" in n else "primary", primary="n:50051" if "standby" in n
                                 else "") for n in ("n", "n-standby", "n-standby-2", "n-standby-3")},
                     "nd": node("nd", "downstream"), "nu": node("nu", "upstream"),
                     "certs": {"entrypoint": ["bash", "/app/deploy/tls/make-certs.sh", "/tls", "nu:upstream",
                                              "n:operator", "n-standby:operator", "nd:downstream", "generator:admin"]}}}


def test_a_later_stage_runs_copies_of_the_stacks_nodes_with_its_own_names_and_stage():
    out = cs.override(BASE, 3, "./run/compose/prometheus.yml")["services"]
    assert {s for s in out if s.startswith("s")} == {f"s{k}-{n}" for k in (2, 3) for n in cs.NODES}
    assert all(out[n] == {"environment": {"LS_STAGE": "1"}} for n in cs.NODES)  # stage 1: the stack's own
    s = out["s2-n-standby"]
    assert s["command"] == ["node", "--role", "standby", "--advertise", "s2-n-standby:50051", "--upstream",
                            "s2-nu:50051", "--downstream", "s2-nd:50051", "--primary", "s2-n:50051"]
    env = s["environment"]
    assert env["LS_STAGE"] == "2" and env["LS_BSIZE"] == "${LS_BSIZE:-10}"  # settings left to compose
    assert (env["LS_TLS_CERT"], env["LS_TLS_KEY"]) == ("/tls/s2-n-standby.crt", "/tls/s2-n-standby.key")
    assert env["LS_SPARK_FEED_ADVERTISE"] == "s2-n-standby:7100"
    assert env["LS_SPARK_CONF"].endswith("spark.driver.host=s2-n-standby")
    assert env["LS_PREDICATE"] == "${LS_PREDICATE:-price > 100}"
    # The image is the stack's (no second build); the pipeline directory stays a bind once interpolated.
    assert "build" not in s and s["image"] == BASE["services"]["n-standby"]["image"]
    assert s["volumes"] == ["tls:/tls:ro", "${LS_PIPELINE_DIR:-./examples}:/app/examples:ro"]
    assert s["depends_on"] == {"s2-nd": {"condition": "service_healthy"},
                               "certs": {"condition": "service_completed_successfully"}}
    assert out["s3-n-standby-2"]["profiles"] == ["spares"] and out["s3-nu"]["command"][2] == "upstream"
    # n-standby-2 is a name of its own, not n-standby's with a suffix.
    assert out["s2-n-standby-2"]["environment"]["LS_TLS_CERT"] == "/tls/s2-n-standby-2.crt"


def test_every_copy_gets_a_certificate_of_its_role_and_prometheus_the_generated_scrape_file():
    out = cs.override(BASE, 2, "./run/compose/prometheus.yml")["services"]
    certs = out["certs"]["entrypoint"]
    assert certs[:8] == BASE["services"]["certs"]["entrypoint"]
    assert certs[8:] == ["s2-nu:upstream", "s2-n:operator", "s2-n-standby:operator", "s2-nd:downstream"]
    assert out["prometheus"] == {"volumes": ["./run/compose/prometheus.yml:/etc/prometheus/prometheus.yml:ro"]}


def test_the_scrape_file_lists_every_stages_copy_of_each_node_beside_it():
    text = (ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text()
    got = cs.scrape_config(text, 2)
    assert 'targets: ["nu:9100", "s2-nu:9100"]' in got
    assert 'targets: ["n-standby:9100", "s2-n-standby:9100"]' in got
    assert '"n-standby-3:9100", "s2-n-standby-3:9100"' in got
    assert cs.scrape_config(text, 1) == text


def test_service_names_and_the_stage_a_name_belongs_to():
    assert [cs.service("nu", k) for k in (0, 1, 2, 12)] == ["nu", "nu", "s2-nu", "s12-nu"]
    assert [cs.stage_of(s) for s in ("n-standby-2", "nd", "s2-n-standby-2", "s12-nu")] == [1, 1, 2, 12]
    assert cs.services(2) == ["nd", "n", "n-standby", "nu", "s2-nd", "s2-n", "s2-n-standby", "s2-nu"]
    assert cs.services(0) == cs.services(1) == list(cs.RUNNING)


def test_the_stacks_pipeline_is_read_where_the_containers_read_it_and_a_bad_one_is_refused(tmp_path):
    assert cs.stage_count({}) == 1 and cs.host_pipeline({}) is None
    assert cs.stage_count({"LS_PIPELINE": "examples/nexmark-q5.sql"}) == 2
    assert cs.stage_count({"LS_PIPELINE": "examples/sensors.sql"}) == 1
    with pytest.raises(SettingError, match="reads a pipeline as examples/<file>"):
        cs.stage_count({"LS_PIPELINE": "nexmark-q5.sql"})
    with pytest.raises(SettingError, match="no such file"):
        cs.stage_count({"LS_PIPELINE": "examples/q5.sql", "LS_PIPELINE_DIR": str(tmp_path)})
    (tmp_path / "bad.sql").write_text("CREATE VIEW v AS SELECT 1;")
    with pytest.raises(SettingError, match="LS_PIPELINE: .*bad.sql"):
        cs.stage_count({"LS_PIPELINE": "examples/bad.sql", "LS_PIPELINE_DIR": str(tmp_path)})


def test_one_stage_needs_no_override_and_the_local_images_choose_the_files(monkeypatch):
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("no compose call for one stage"))
    assert cs.write(1, ("docker-compose.yml",), root=ROOT) == ["-f", str(ROOT / "docker-compose.yml")]
    assert cs.base_files({}) == cs.BASE_FILES and cs.base_files({"LS_LOCAL_IMAGES": "0"}) == ("docker-compose.yml",)


def test_two_stages_write_the_override_from_what_compose_reads(monkeypatch, tmp_path):
    (tmp_path / "deploy" / "prometheus").mkdir(parents=True)
    (tmp_path / "deploy" / "prometheus" / "prometheus.yml").write_text('targets: ["nu:9100"]\n')
    asked = []

    def config(cmd, **kw):
        asked.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, json.dumps(BASE), "")

    monkeypatch.setattr(subprocess, "run", config)
    flags = cs.write(2, ("docker-compose.yml",), root=tmp_path)
    assert flags == ["-f", str(tmp_path / "docker-compose.yml"), "-f", str(tmp_path / "run/compose/stages.yml")]
    assert asked[0][-4:] == ["config", "--no-interpolate", "--format", "json"]
    written = json.loads((tmp_path / "run/compose/stages.yml").read_text())
    assert "s2-nu" in written["services"]
    assert (tmp_path / "run/compose/prometheus.yml").read_text() == 'targets: ["nu:9100", "s2-nu:9100"]\n'


def test_the_command_line_says_what_is_wrong_with_the_pipeline(monkeypatch, capsys):
    monkeypatch.setenv("LS_PIPELINE", "q5.sql")
    assert cs.main(["flags"]) == 2 and "examples/<file>" in capsys.readouterr().err
    monkeypatch.setenv("LS_PIPELINE", "examples/nexmark-q5.sql")
    assert cs.main(["services"]) == 0 and capsys.readouterr().out.split()[-1] == "s2-nu"
    assert cs.main(["nodes"]) == 2 and "usage" in capsys.readouterr().err
