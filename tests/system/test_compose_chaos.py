"""The compose stack for real: kill containers with the docker SDK under load, then the truth-table check
inside the stack's network. One stack serves the tier: each fault gets fresh nodes and topics, the broker,
Prometheus and the Spark cluster are kept (a fault that fails takes the stack down, and the next starts
from nothing). Containers, networks and volumes are removed at the end, also on failure (the logs of every
container are kept in run/chaos-logs/<fault>/ when a fault's run breaks)."""

import sys
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "deploy" / "chaos"))

import chaos  # noqa: E402

# N, ended by the fault (fenced: 75; its operator dead: 70) and started again once by compose, rejoined as the
# standby Nu backs up to, in epoch 2.
N_BACK_AS_THE_STANDBY = {"n": {"restarts": 1, "role": "standby", "epoch": 2, "backed_up": True, "rejoined": True}}


def test_kill_the_primary_container_under_load_behind_shaped_links(chaos_run, monkeypatch):
    """N's container killed under load, every node container's egress shaped first (LS_LINK: tc in its
    namespace, run from the host)."""
    monkeypatch.setenv("LS_LINK", "100mbit")
    r = chaos_run("kill-primary")
    assert r["ok"], r
    assert r["expected"] > 1000 and r["got"] == r["expected"]
    assert r["lost"] == 0 and r["duplicated"] == 0, r
    assert r["recovery_ms"] is not None and r["recovery_ms"] < 30_000
    # The image ships the native compressor `make setup` built (the image itself has no C compiler).
    assert r["codec_backend"].startswith("libzstd"), r
    link = r["link"]
    assert link["preset"] == "100mbit" and link["rate_bps"] == 100_000_000, link
    assert {"nu", "n", "n-standby", "nd"} <= set(link["services"]), link


def test_a_window_query_through_a_killed_primary_container_is_exact(chaos_run, monkeypatch):
    """LS_QUERY=window on every node of the stack: the results topic holds exactly the window results the
    truth table rebuilds from Nu's link log, after N's container is killed under load."""
    monkeypatch.setenv("LS_QUERY", "window")
    r = chaos_run("kill-primary")
    assert r["ok"], r
    assert r["expected"] > 50 and r["got"] == r["expected"], r
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["wrong"] == 0, r
    assert r["recovery_ms"] is not None


def test_a_pipeline_file_through_a_killed_primary_container_is_exact(chaos_run, monkeypatch):
    """LS_PIPELINE=examples/sensors.sql on every node and the generator (records drawn from its schema,
    with nulls, DECIMALs and ISO-8601 times): after N's container is killed under load, the results topic
    the file names holds exactly DuckDB's truth over the source topic."""
    monkeypatch.setenv("LS_PIPELINE", "examples/sensors.sql")
    r = chaos_run("kill-primary")
    assert r["ok"] and r["pipeline"] == "examples/sensors.sql", r
    assert r["expected"] >= 8 and r["got"] == r["expected"], r  # a minute of 8 devices at least
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["wrong"] == 0, r
    assert r["recovery_ms"] is not None


def test_a_pipeline_of_two_stages_with_both_primaries_killed_at_once_is_exact(chaos_run, monkeypatch):
    """LS_PIPELINE=examples/nexmark-q5.sql: each stage on containers of its own (stage 2's are s2-nu, s2-n,
    s2-n-standby, s2-nd; the nexmark generator's bids), both stages' primaries killed at once while stage 2
    is at work: each stage's standby takes over, and each stage's topic holds exactly the truth of what it
    read (the second's, the first's view)."""
    monkeypatch.setenv("LS_PIPELINE", "examples/nexmark-q5.sql")
    monkeypatch.setenv("LS_GEN_TOTAL", "240000")  # 24 s of event time: stage 1's 10 s windows close
    monkeypatch.setenv("LS_GEN_RATE", "10000")
    r = chaos_run("kill-primary@1+2")
    assert r["ok"] and r["fault"] == "kill-primary@1+2", r
    assert [s["stage"] for s in r["stages"]] == [1, 2], r
    for s in r["stages"]:
        assert s["got"] == s["expected"] > 0 and s["lost"] == 0 and s["duplicated"] == 0 and s["wrong"] == 0, r
        assert s["recovery_ms"] is not None, r  # both stages' standbys took over
    assert sorted(s.get("stage", 1) for s in r["steps"]) == [1, 2] and r["new_primary"].startswith("N'@"), r
    # The stack's Prometheus scraped every stage's nodes, each series labelled with its stage: a failover
    # in each, counted by the stage's new primary (stage 2's in s2-n-standby's container). The faults before
    # this one on the shared stack ran one stage, whose series carry no stage.
    failovers = prometheus('max by (pipeline_stage, instance) '
                           '(max_over_time(lazystandby_failovers_total{pipeline_stage!=""}[10m]))')
    assert {(x["metric"]["pipeline_stage"], x["metric"]["instance"]) for x in failovers
            if float(x["value"][1]) >= 1} >= {("1", "n-standby:9100"), ("2", "s2-n-standby:9100")}, failovers
    up = prometheus('max_over_time(up{instance=~"s2-.*"}[10m])')
    assert {x["metric"]["instance"] for x in up if x["value"][1] == "1"} >= {
        "s2-nu:9100", "s2-n:9100", "s2-n-standby:9100", "s2-nd:9100"}, up


def prometheus(expr: str) -> list[dict]:
    """An instant query to the stack's Prometheus (published on the host's LS_PROMETHEUS_PORT)."""
    import os

    from lazystandby.harness.local_prometheus import api

    port = os.environ.get("LS_PROMETHEUS_PORT", "9090")
    return api(f"http://127.0.0.1:{port}", "query", query=expr)["data"]["result"]


def test_a_paused_standby_container_is_out_of_sync_then_back_and_the_output_is_exact(chaos_run):
    """docker pause of N' for 2 s under load: Nu stops waiting for it (out of sync) and takes it back."""
    r = chaos_run("pause-standby")
    assert r["ok"], r
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["got"] == r["expected"] > 1000, r
    assert r["standby_out_of_sync"] >= 1 and r["standby_in_sync"] is True, r
    assert r["recovery_ms"] is None  # no failover


def test_a_primary_container_taken_off_the_network_is_replaced_fenced_and_back_as_the_standby(chaos_run):
    """N, still running, leaves the compose network past the detector's timeout and comes back under its
    name: N' takes over, N learns from the refusals that it was replaced, exits (75: exit_when_fenced), and
    compose starts it again as the standby."""
    r = chaos_run("isolate-primary")
    assert r["ok"], r
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["got"] == r["expected"] > 1000, r
    assert r["new_primary"] == "N'" and r["recovery_ms"] is not None, r
    assert r["restarted"] == N_BACK_AS_THE_STANDBY, r


def test_a_standby_container_cut_off_from_a_live_primary_does_not_depose_it(chaos_run):
    """One link cut (firewall rules in N''s network namespace): N' stops hearing N, which still delivers;
    Nd declines each takeover while N's lease holds, N' withdraws its epoch, and no failover happens."""
    r = chaos_run("partition-primary-standby")
    assert r["ok"], r
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["got"] == r["expected"] > 1000, r
    assert r["recovery_ms"] is None and r["roles"].get("N") == "primary" and r["roles"].get("N'") == "standby", r
    assert r["takeovers_declined"] >= 1, r


def test_a_primary_container_whose_spark_jvm_stops_is_replaced(chaos_run, monkeypatch):
    """hang-operator, with the Spark operator (one of the two tests of this tier that run it: its JVM is what
    stops): N's driver JVM and workers are stopped by their host PIDs while N runs. N says it is stalled
    after operator_stall_max (3 s here), N' takes over, and N finds itself fenced, exits (75) and is back
    as the standby."""
    monkeypatch.setenv("LS_OPERATOR", "spark")
    monkeypatch.setenv("LS_OPERATOR_STALL_MAX", "3")
    r = chaos_run("hang-operator")
    assert r["ok"], r
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["got"] == r["expected"] > 1000, r
    assert r["steps"][0]["stopped"] >= 1, r
    assert r["new_primary"] == "N'", r
    assert r["restarted"] == N_BACK_AS_THE_STANDBY, r
    # Past operator_stall_max less a micro-batch (the stall is timed from the oldest call's submission,
    # before the fault: 2,882 ms was seen), not at the first missed heartbeats, nor much later.
    assert 2_000 < r["recovery_ms"] < 3_000 + 5 * 200 + 5_000, r


def test_a_primary_container_whose_spark_jvm_dies_exits_and_compose_brings_it_back_as_the_standby(chaos_run,
                                                                                               monkeypatch):
    """kill-operator, with the Spark operator: N's JVM is killed, N exits (70) and N' takes over; compose
    starts N again (restart: on-failure), and N, shown epoch 2 before it has done anything, rejoins as the
    standby that Nu backs up to."""
    monkeypatch.setenv("LS_OPERATOR", "spark")
    r = chaos_run("kill-operator")
    assert r["ok"], r
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["got"] == r["expected"] > 1000, r
    assert r["new_primary"] == "N'" and r["recovery_ms"] is not None, r
    assert r["restarted"] == N_BACK_AS_THE_STANDBY, r


def test_a_killed_primary_container_started_again_rejoins_and_takes_over_at_the_next_kill(chaos_run):
    """Two failovers with two operator containers: N killed, N' takes over; N started again with its own
    command (role primary) rejoins as the standby; N' killed, N takes over in epoch 3."""
    r = chaos_run("kill-primary-then-restart")
    assert r["ok"], r
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["got"] == r["expected"] > 1000, r
    assert [(s["action"], s["target"]) for s in r["steps"]] == [("kill", "primary"), ("restart", "primary"),
                                                                ("kill", "standby")], r
    assert r["new_primary"] == "N" and r["roles"].get("N") == "primary", r


def test_a_rolling_restart_of_the_operator_containers_hands_over_twice_and_is_exact(chaos_run):
    """docker stop of N (SIGTERM): it hands over to N', exits 0 and is started again as the standby; then
    docker stop of N': it hands back to N. Both takeovers on the stopped primary's word (its last frame
    ended its lease at Nd; its heartbeat replies said LEAVING), not on missed heartbeats."""
    r = chaos_run("rolling-restart")
    assert r["ok"], r
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["got"] == r["expected"] > 1000, r
    assert [(s["action"], s["target"], s.get("exit_code")) for s in r["steps"]] == [
        ("stop", "primary", 0), ("restart", "primary", None), ("stop", "standby", 0)], r
    assert r["new_primary"] == "N" and r["failover_cause"] == "handover" and r["leases_released"] == 2, r


def test_no_standby_then_no_primary_then_a_spare_container_takes_over_exactly(chaos_run):
    """A double fault as a sequence of steps with their delays: N' killed, N 2 s later, a spare standby
    started 3 s after that; it learns the dead primary from Nu and takes over in epoch 2."""
    r = chaos_run("kill-standby-then-primary")
    assert r["ok"], r
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["got"] == r["expected"] > 1000, r
    steps = r["steps"]
    assert [(s["action"], s["target"]) for s in steps] == [("kill", "standby"), ("kill", "primary"),
                                                           ("start", "primary")], steps
    assert steps[1]["at_s"] >= 2.0 and steps[2]["at_s"] - steps[1]["at_s"] >= 3.0, steps
    assert steps[2]["started"] == "n-standby-2" and r["new_primary"] == "N2", r
    assert r["recovery_ms"] is not None and r["recovery_ms"] > steps[2]["at_s"] * 1000, r


def test_nu_and_the_primary_killed_together_recover_in_seconds_though_nu_comes_back_elsewhere(chaos_run):
    """A restarted container gets another address under the same name: the standby's Takeover must find
    Nu there within seconds (it took 19.6-21.8 s with gRPC's default re-resolution and connect timeout)."""
    r = chaos_run("kill-upstream-and-primary")
    assert r["ok"], r
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["got"] == r["expected"] > 1000, r
    assert r["new_primary"] == "N'" and r["recovery_ms"] is not None and r["recovery_ms"] < 10_000, r


def test_kill_the_primary_three_times_with_a_new_standby_each_time(chaos_run):
    r = chaos_run("kill-primary-repeatedly")
    assert r["ok"], r
    assert r["lost"] == 0 and r["duplicated"] == 0, r
    assert [x["epoch"] for x in r["rounds"]] == [2, 3, 4]
    assert [x["primary"] for x in r["rounds"]] == ["n-standby", "n-standby-2", "n-standby-3"]


def test_down_leaves_nothing_behind(chaos_run):
    client = docker.from_env()
    chaos.compose("up", "-d", "--wait", "--wait-timeout", "300", "kafka", "nd")
    chaos.compose("down", "-v", "--remove-orphans", check=False)
    label = "com.docker.compose.project=lazystandby"
    assert not client.containers.list(all=True, filters={"label": label})
    assert not client.networks.list(filters={"label": label})
    assert not client.volumes.list(filters={"label": label})
