"""The container chaos runner's step sequencer (deploy/chaos/chaos.py) against a fake docker client: the
steps of a double fault in order, with their delays, on the right containers; a spare for START; the
takeover a step waits for. The real stack runs these in tests/system."""

import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "deploy" / "chaos"))

import chaos  # noqa: E402

from lazystandby.harness.faults import CATALOG, Action, Fault, Step  # noqa: E402


class FakeContainer:
    def __init__(self, log: list, service: str, status: str = "running", running: set | None = None) -> None:
        self.log, self.service, self.status, self.running = log, service, status, running
        self.name = f"lazystandby-{service}-1"
        self.attrs = {"State": {"Health": {"Status": "healthy"}}}

    def _do(self, what: str) -> None:
        self.log.append((time.monotonic(), what, self.service))

    def reload(self):
        if self.running is not None:
            self.status = "running" if self.service in self.running else "exited"

    def kill(self):
        self._do("kill")
        if self.running is not None:
            self.running.discard(self.service)

    def pause(self):
        self._do("pause")

    def unpause(self):
        self._do("unpause")

    def start(self):
        self._do("start")
        if self.running is not None:
            self.running.add(self.service)


@pytest.fixture
def fake(monkeypatch):
    log: list = []
    running = {"nu", "n", "n-standby", "nd"}
    monkeypatch.setattr(chaos, "container", lambda client, service: FakeContainer(
        log, service, "running" if service in running else "exited", running))

    def compose(*args, **kw):
        log.append((time.monotonic(), "compose " + " ".join(args), args[-1]))
        running.add(args[-1])

    monkeypatch.setattr(chaos, "compose", compose)
    return log, running


def test_a_double_fault_runs_its_steps_in_order_with_their_delays(fake):
    log, _ = fake
    fault = Fault("t", "", (Step("standby", Action.PAUSE, duration=0.2), Step("primary", Action.KILL, delay=0.1)))
    t0, events = chaos.inject(fault, client=None)
    assert [(w, s) for _, w, s in log] == [("pause", "n-standby"), ("unpause", "n-standby"), ("kill", "n")]
    assert log[1][0] - log[0][0] >= 0.2 and log[2][0] - log[1][0] >= 0.1
    assert [(e["action"], e["target"]) for e in events] == [("pause", "standby"), ("kill", "primary")]
    assert events[0]["at"] == t0 and events[1]["at"] - t0 >= 0.3


def test_start_brings_up_the_first_spare_not_running_and_refuses_when_none_is_left(fake):
    log, running = fake
    start = Step("primary", Action.START)
    assert chaos.apply(start, None, 0.0) == {"started": "n-standby-2"}
    assert chaos.apply(start, None, 0.0) == {"started": "n-standby-3"}
    assert [w for _, w, _ in log] == ["compose up -d --no-deps n-standby-2", "compose up -d --no-deps n-standby-3"]
    with pytest.raises(RuntimeError, match="every spare standby is running already"):
        chaos.apply(start, None, 0.0)


def test_a_step_after_the_takeover_waits_for_nu_to_accept_one(fake, monkeypatch):
    log, _ = fake
    polls = iter([{"takeovers": []}, {"takeovers": []}, {"takeovers": [{"epoch": 2}]}])
    monkeypatch.setattr(chaos, "node_status", lambda service: next(polls))
    chaos.inject(CATALOG["kill-primary-then-upstream"], client=None)
    assert [(w, s) for _, w, s in log] == [("kill", "n"), ("kill", "nu"), ("start", "nu")]
    with pytest.raises(StopIteration):
        next(polls)  # the restart came only after the poll that saw the takeover


def test_a_killed_primary_is_started_again_and_the_next_kill_waits_for_nu_to_have_a_standby(fake, monkeypatch):
    log, running = fake
    polls = iter([{"takeovers": [{"epoch": 2}]},  # the takeover, then Nu's standby: none, out of sync, back
                  {"standby": ""}, {"standby": "n:50051", "standby_in_sync": False},
                  {"standby": "n:50051", "standby_in_sync": True}])
    monkeypatch.setattr(chaos, "node_status", lambda service: next(polls))
    chaos.inject(CATALOG["kill-primary-then-restart"], client=None)
    # N, already dead, is only started again (a kill would fail on a stopped container); then N' is killed.
    assert [(w, s) for _, w, s in log] == [("kill", "n"), ("start", "n"), ("kill", "n-standby")]
    assert "n" in running and "n-standby" not in running
    with pytest.raises(StopIteration):
        next(polls)


class StartingContainer(FakeContainer):
    """Answers its health check only from the `healthy_from`-th read after a start on."""

    def __init__(self, healthy_from: int) -> None:
        super().__init__([], "n")
        self.reads, self.healthy_from = 0, healthy_from

    def start(self):
        super().start()
        self.reads = 0

    def reload(self):
        self.reads += 1
        ok = self.reads >= self.healthy_from
        self.attrs = {"State": {"Status": "running", "Health": {"Status": "healthy" if ok else "starting"}}}


def test_a_restarted_node_is_waited_for_until_it_passes_its_health_check(monkeypatch):
    c = StartingContainer(healthy_from=4)
    monkeypatch.setattr(chaos, "container", lambda client, service: c)
    monkeypatch.setattr(chaos.time, "sleep", lambda s: None)
    out = chaos.apply(Step("primary", Action.RESTART), None, 0.0)
    assert [w for _, w, _ in c.log] == ["kill", "start"]
    assert c.reads == 4 and out["healthy_after_s"] >= 0


def test_a_restarted_node_that_never_serves_fails_the_step_naming_it(monkeypatch):
    c = StartingContainer(healthy_from=10**9)
    with pytest.raises(TimeoutError, match="lazystandby-n-1 to pass its health check again .starting after 0.05 s"):
        chaos.healthy_again(c, timeout=0.05, every=0.01)
    # A container without a health check is not waited for.
    bare = FakeContainer([], "generator")
    bare.attrs = {"State": {"Status": "running"}}
    assert chaos.healthy_again(bare, timeout=0.0) == 0.0


def test_a_takeover_that_never_comes_fails_the_run_instead_of_hanging(fake, monkeypatch):
    monkeypatch.setattr(chaos, "node_status", lambda service: {"takeovers": []})
    with pytest.raises(TimeoutError, match="Nu to accept a takeover"):
        chaos.inject(CATALOG["kill-primary-then-upstream"], client=None, timeout=0.2)


def test_the_new_primary_is_the_one_of_the_highest_epoch():
    nodes = {"N'": {"role": "primary", "epoch": 2, "recovery": {"live_at": 11.0}},
             "N2": {"role": "primary", "epoch": 3, "recovery": {"live_at": 12.5}},
             "Nu": {"role": "upstream"}, "N3": {"error": "unreachable"}}
    assert chaos.took_over_last(nodes, 10.0) == ("N2", 2500.0)
    assert chaos.took_over_last({"Nu": {"role": "upstream"}}, 10.0) == (None, None)
    # A primary live before the first step took over from a failure of its own, not the fault's.
    assert chaos.took_over_last(nodes, 12.0) == ("N2", 500.0)
    assert chaos.took_over_last(nodes, 13.0) == (None, None)


class NetContainer(FakeContainer):
    def __init__(self, log, service, pid, ip):
        super().__init__(log, service)
        self.name = service
        self.attrs = {"State": {"Pid": pid},
                      "NetworkSettings": {"Networks": {f"{chaos.PROJECT}_{chaos.NETWORK}": {"IPAddress": ip}}}}

    def reload(self):
        pass


def firewall_on(monkeypatch, *boxes: NetContainer) -> list:
    """chaos's firewall over these containers, as root with nsenter and iptables: the commands it runs."""
    by_name = {b.name: b for b in boxes}
    monkeypatch.setattr(chaos, "container", lambda client, service: by_name[service])
    monkeypatch.setattr(chaos.shutil, "which", lambda tool: f"/usr/sbin/{tool}")
    monkeypatch.setattr(chaos.os, "geteuid", lambda: 0)
    ran = []

    def run(cmd, **kw):
        ran.append(cmd)
        return type("Done", (), {"returncode": 0, "stderr": ""})()

    monkeypatch.setattr(chaos.subprocess, "run", run)
    return ran


def drop_rules(pid: int, ip: str) -> list[list[str]]:
    """The rules a cut inserts and its heal deletes, in the namespace of `pid`, against `ip`."""
    ns = ["nsenter", "-t", str(pid), "-n", "iptables", "-w"]
    return [ns + [op, chain, flag, ip, "-j", "DROP"]
            for op in ("-I", "-D") for chain, flag in (("INPUT", "-s"), ("OUTPUT", "-d"))]


def test_a_single_link_is_cut_and_healed_by_firewall_rules_in_the_targets_namespace_both_ways(monkeypatch):
    ran = firewall_on(monkeypatch, NetContainer([], "nu", 101, "10.0.0.2"),
                      NetContainer([], "n-standby", 102, "10.0.0.4"))
    fault = CATALOG["partition-upstream-standby-then-kill-primary"]
    chaos.apply(fault.steps[0], None, 0.0)  # cut
    chaos.apply(fault.steps[2], None, 0.0)  # heal
    assert ran == drop_rules(101, "10.0.0.4")


def test_a_heal_deletes_the_rules_its_cut_inserted_though_the_peer_was_killed_meanwhile(monkeypatch):
    """partition-primary-standby-then-kill-primary: N is killed during the cut, and a killed container has
    no address any more; the heal in N''s namespace still names N's address of the cut (before, iptables
    was given an empty host and the heal failed)."""
    n = NetContainer([], "n", 101, "10.0.0.3")
    ran = firewall_on(monkeypatch, n, NetContainer([], "n-standby", 102, "10.0.0.4"))
    fault = CATALOG["partition-primary-standby-then-kill-primary"]
    chaos.apply(fault.steps[0], None, 0.0)  # cut, in N''s namespace
    n.attrs["NetworkSettings"]["Networks"] = {}  # killed: off every network
    chaos.apply(fault.steps[2], None, 0.0)  # heal
    assert ran == drop_rules(102, "10.0.0.3")


def test_a_host_that_cannot_cut_one_link_says_what_is_missing_and_cuts_nothing(monkeypatch):
    boxes = {"n": NetContainer([], "n", 101, "10.0.0.3"), "n-standby": NetContainer([], "n-standby", 102, "10.0.0.4")}
    monkeypatch.setattr(chaos, "container", lambda client, service: boxes[service])
    monkeypatch.setattr(chaos.shutil, "which", lambda tool: None if tool == "iptables" else f"/usr/bin/{tool}")
    monkeypatch.setattr(chaos.os, "geteuid", lambda: 0)
    monkeypatch.setattr(chaos.subprocess, "run", lambda *a, **k: pytest.fail("nothing may run"))
    with pytest.raises(chaos.LinkCutUnavailable, match="missing iptables.*isolate-primary and isolate-standby need"):
        chaos.apply(CATALOG["partition-primary-standby"].steps[0], None, 0.0)
    monkeypatch.setattr(chaos.shutil, "which", lambda tool: f"/usr/bin/{tool}")

    def failing(cmd, **kw):
        return type("Done", (), {"returncode": 4, "stderr": "can't initialize iptables table `filter'"})()

    monkeypatch.setattr(chaos.subprocess, "run", failing)
    with pytest.raises(chaos.LinkCutUnavailable, match="iptables in n-standby's network namespace failed: can't"):
        chaos.apply(CATALOG["partition-primary-standby"].steps[0], None, 0.0)


def test_spark_only_faults_are_refused_or_skipped_without_the_spark_operator(monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(chaos.docker, "from_env", lambda: None)
    monkeypatch.setattr(chaos, "run_clean", lambda name, client: ran.append(name) or {"ok": True})
    monkeypatch.setenv("LS_OPERATOR", "python")
    assert chaos.main(["hang-operator"]) == 2 and ran == []
    assert "needs the Spark operator, not 'python' (LS_OPERATOR)" in capsys.readouterr().err
    assert chaos.main(["all"]) == 0
    assert "hang-operator" not in ran and "kill-primary" in ran and "skipped" in capsys.readouterr().err
    ran.clear()
    monkeypatch.delenv("LS_OPERATOR")  # the compose file's default: spark
    assert chaos.main(["hang-operator"]) == 0 and ran == ["hang-operator"]


def test_a_hang_step_stops_the_processes_of_the_target_container(monkeypatch):
    c = FakeContainer([], "n")
    c.attrs, c.reload = {"State": {"Pid": 4242}}, lambda: None
    monkeypatch.setattr(chaos, "container", lambda client, service: c)
    calls = []
    monkeypatch.setattr(chaos, "hang", lambda pid, seconds: calls.append((pid, seconds)) or 2)
    monkeypatch.setenv("LS_OPERATOR_STALL_MAX", "3")
    assert chaos.apply(Step("primary", Action.HANG), None, 0.0) == {"stopped": 2}
    assert calls == [(4242, 8.0)]  # operator_stall_max, then 5 s more (well past the detector's timeout)


def test_a_restarted_operator_container_is_waited_for_until_it_is_the_standby_nu_backs_up_to(monkeypatch):
    in_sync = {"standby": "n:50051", "standby_in_sync": True, "epoch": 2}
    states = iter([{"n": {"error": "unreachable"}, "nu": {"standby": "", "epoch": 2}},  # still starting
                   {"n": {"role": "standby", "epoch": 2}, "nu": {**in_sync, "standby_in_sync": False}},
                   # Nu backs it up in sync, but the node still reads the epoch it was started in
                   {"n": {"role": "standby", "epoch": 1}, "nu": in_sync},
                   {"n": {"role": "standby", "epoch": 2}, "nu": in_sync}])
    now: dict = {}
    reads: list[str] = []

    def status(service):
        if service == "nu":
            now.update(next(states))
        reads.append(service)
        return now[service]

    monkeypatch.setattr(chaos, "node_status", status)
    monkeypatch.setattr(chaos.time, "sleep", lambda s: None)
    assert chaos.rejoined("n", time.monotonic() + 60) == {"role": "standby", "epoch": 2, "backed_up": True,
                                                          "rejoined": True}
    assert reads == ["nu", "n"] * 4  # Nu first: the node, read after it, has registered if Nu names it
    # One that never comes back is reported as it was at the deadline (and the run is not ok).
    monkeypatch.setattr(chaos, "node_status", lambda service: {"role": "fenced", "epoch": 1} if service == "n"
                        else {"standby": ""})
    assert chaos.rejoined("n", time.monotonic() - 1) == {"role": "fenced", "epoch": 1, "backed_up": False,
                                                         "rejoined": False}


def test_a_restarted_node_that_took_over_since_has_rejoined_as_the_primary_nu_pushes_to(monkeypatch):
    monkeypatch.setattr(chaos.time, "sleep", lambda s: None)
    nu = {"primary": "n:50051", "standby": "n-standby-2:50051", "standby_in_sync": True, "epoch": 3}
    node = {"role": "primary", "epoch": 3}
    monkeypatch.setattr(chaos, "node_status", lambda service: nu if service == "nu" else node)
    assert chaos.rejoined("n", time.monotonic() + 60)["rejoined"]
    # A primary Nu does not push to (demoted, or of an epoch gone by) has not rejoined.
    nu["primary"] = "n-standby:50051"
    seen = chaos.rejoined("n", time.monotonic() - 1)
    assert seen["role"] == "primary" and not seen["rejoined"]


def test_a_failing_compose_command_says_what_compose_said(monkeypatch):
    """`up --wait` fails when a container turns unhealthy or a port is taken: the fault's error carries
    compose's own words, not only an exit status."""
    import subprocess

    said = "Container lazystandby-kafka-1  Error\ndependency failed to start: container kafka-1 is unhealthy"
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a[0], 1, "", said))
    with pytest.raises(RuntimeError, match=r"(?s)docker compose up -d exited 1: .*kafka-1 is unhealthy"):
        chaos.compose("up", "-d", "--wait")
    assert chaos.compose("kill", "n", check=False).returncode == 1  # unchecked: the caller reads it


class Freezing:
    """A container whose pause fails with runc's freezer error `fails` times, then succeeds."""

    def __init__(self, fails: int, error: str = "OCI runtime pause failed: unable to freeze: unknown") -> None:
        self.fails, self.error, self.paused = fails, error, 0

    def pause(self):
        import docker

        if self.fails:
            self.fails -= 1
            raise docker.errors.APIError(f"500 Server Error: Internal Server Error (\"{self.error}\")")
        self.paused += 1


def test_a_pause_the_freezer_gave_up_on_is_tried_again(monkeypatch):
    monkeypatch.setattr(chaos.time, "sleep", lambda s: None)
    c = Freezing(2)
    chaos.pause(c)
    assert c.paused == 1 and c.fails == 0


def test_a_pause_that_keeps_failing_or_fails_otherwise_is_raised(monkeypatch):
    import docker

    monkeypatch.setattr(chaos.time, "sleep", lambda s: None)
    with pytest.raises(docker.errors.APIError, match="unable to freeze"):
        chaos.pause(Freezing(chaos.FREEZE_TRIES))
    other = Freezing(1, error="No such container")
    with pytest.raises(docker.errors.APIError, match="No such container"):
        chaos.pause(other)
    assert other.paused == 0


def shaping_on(monkeypatch, services=("nu", "n", "n-standby", "nd"), netem=True, shows="qdisc tbf 2: parent 1:"):
    """chaos.shape over running containers of `services` (the others not there), as root with nsenter and
    tc: the commands it runs."""
    boxes = {s: NetContainer([], s, 100 + i, f"10.0.0.{i}") for i, s in enumerate(services)}

    def find(client, service):
        if service not in boxes:
            raise RuntimeError(f"no container for service {service}")
        return boxes[service]

    monkeypatch.setattr(chaos, "container", find)
    monkeypatch.setattr(chaos.shutil, "which", lambda tool: f"/usr/sbin/{tool}")
    monkeypatch.setattr(chaos.os, "geteuid", lambda: 0)
    ran = []

    def run(cmd, **kw):
        ran.append(cmd)
        failed = ("netem" in cmd and not netem) or "del" in cmd  # nothing to delete on a fresh interface
        return type("Done", (), {"returncode": 2 if failed else 0, "stderr": "", "stdout": shows})()

    monkeypatch.setattr(chaos.subprocess, "run", run)
    return ran


def test_every_running_node_container_is_shaped_in_its_own_namespace_with_the_delay_under_the_rate(monkeypatch):
    ran = shaping_on(monkeypatch)
    got = chaos.shape(None, "10mbit")
    assert got["services"] == ["nu", "n", "n-standby", "nd"] and got["delay_applied"] and got["rate_bps"] == 10**7
    tc = ["nsenter", "-t", "101", "-n", "tc"]  # n's namespace
    assert [*tc, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "netem", "delay", "5.0ms"] in ran
    rate = next(c for c in ran if c[:5] == tc and "tbf" in c)
    assert rate[rate.index("tbf") + 1:rate.index("tbf") + 3] == ["rate", "10000kbit"] and "parent" in rate


def test_a_kernel_without_netem_gets_the_rate_alone_and_says_so(monkeypatch):
    ran = shaping_on(monkeypatch, services=("nu", "nd"), netem=False)
    got = chaos.shape(None, "10mbit")
    assert got["services"] == ["nu", "nd"] and not got["delay_applied"]
    assert ["nsenter", "-t", "101", "-n", "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "10000kbit",
            "burst", "3100", "limit", "62500"] in ran


def test_shaping_that_cannot_hold_says_why_and_a_bad_link_is_refused(monkeypatch):
    shaping_on(monkeypatch, shows="qdisc noqueue 0: root")
    with pytest.raises(chaos.LinkError, match="nu: eth0 shows no rate after shaping"):
        chaos.shape(None, "100mbit")
    with pytest.raises(chaos.SettingError, match="expected one of"):
        chaos.shape(None, "fast")
    shaping_on(monkeypatch, services=())
    with pytest.raises(chaos.LinkError, match="no node container is running"):
        chaos.shape(None, "1gbit")
    shaping_on(monkeypatch)
    monkeypatch.setattr(chaos.shutil, "which", lambda tool: None if tool == "tc" else f"/usr/bin/{tool}")
    monkeypatch.setattr(chaos.subprocess, "run", lambda *a, **k: pytest.fail("nothing may run"))
    with pytest.raises(chaos.LinkError, match="missing tc"):
        chaos.shape(None, "1gbit")


@pytest.mark.parametrize("value, says", [("sensors.sql", "examples/<file>"), ("examples/none.sql", "no such file")])
def test_a_pipeline_the_stack_cannot_read_is_refused_before_any_container_starts(monkeypatch, capsys, value, says):
    monkeypatch.setenv("LS_PIPELINE", value)
    monkeypatch.delenv("LS_PIPELINE_DIR", raising=False)
    assert chaos.main(["kill-primary"]) == 2
    assert says in capsys.readouterr().err


def test_each_fault_reads_the_pipeline_over_topics_of_its_own(monkeypatch, tmp_path):
    monkeypatch.setenv("LS_PIPELINE", "examples/sensors.sql")
    monkeypatch.delenv("LS_PIPELINE_DIR", raising=False)
    monkeypatch.setattr(chaos, "ROOT", tmp_path)
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "sensors.sql").write_text((ROOT / "examples" / "sensors.sql").read_text())
    from lazystandby.formats.pipeline import read_pipeline

    own = chaos.own_pipeline("t1-kill-primary.")
    spec = read_pipeline(own / "sensors.sql")
    assert all(t.topic.startswith("t1-kill-primary.") for t in spec.sources)
    assert spec.sink_topic.startswith("t1-kill-primary.")
    first = read_pipeline(ROOT / "examples" / "sensors.sql")
    assert [t.columns for t in spec.sources] == [t.columns for t in first.sources]
    assert spec.plan.spec == first.plan.spec and spec.plan.key_names == first.plan.key_names
    monkeypatch.delenv("LS_PIPELINE")
    assert chaos.own_pipeline("t2.") is None


@pytest.fixture
def two_stages(monkeypatch):
    """The stack runs examples/nexmark-q5.sql: two stages."""
    monkeypatch.setenv("LS_PIPELINE", "examples/nexmark-q5.sql")
    monkeypatch.delenv("LS_PIPELINE_DIR", raising=False)
    assert chaos.stages() == 2


def test_a_fault_at_a_later_stage_hits_that_stages_containers_and_asks_its_nu(fake, monkeypatch, two_stages):
    log, running = fake
    running |= {"s2-nu", "s2-n", "s2-n-standby", "s2-nd"}
    asked = []
    monkeypatch.setattr(chaos, "node_status", lambda service: asked.append(service) or {"takeovers": [{"epoch": 2}]})
    fault, at = chaos.staged("kill-primary-then-upstream@2", 2, chaos.FAULTS)
    assert at == (2,)
    _, events = chaos.inject_at(fault, None, at)
    assert [(w, s) for _, w, s in log] == [("kill", "s2-n"), ("kill", "s2-nu"), ("start", "s2-nu")]
    assert set(asked) == {"s2-nu"} and [e["stage"] for e in events] == [2, 2]
    assert chaos.apply(Step("primary", Action.START), None, 0.0, k=2) == {"started": "s2-n-standby-2"}


def test_a_fault_at_two_stages_runs_at_both_at_once(fake, monkeypatch, two_stages):
    log, running = fake
    running |= {"s2-n", "s2-n-standby"}
    fault = Fault("t", "", (Step("standby", Action.PAUSE, duration=0.3), Step("primary", Action.KILL)))
    t0 = time.monotonic()
    _, events = chaos.inject_at(fault, None, (1, 2))
    assert time.monotonic() - t0 < 0.55  # the two pauses overlapped
    assert sorted((w, s) for _, w, s in log) == sorted(
        [("pause", "n-standby"), ("unpause", "n-standby"), ("kill", "n"),
         ("pause", "s2-n-standby"), ("unpause", "s2-n-standby"), ("kill", "s2-n")])
    assert sorted(e.get("stage", 1) for e in events) == [1, 1, 2, 2]
    assert [e["at"] for e in events] == sorted(e["at"] for e in events)


def test_all_runs_the_catalog_at_the_stages_in_turn_then_every_primary_at_once(monkeypatch, two_stages, capsys):
    names = chaos.everything(2)
    assert names[-1] == "kill-primary@1+2" and len(names) == len(chaos.FAULTS) + 1
    assert [n.rpartition("@")[2] for n in names[:4]] == ["1", "2", "1", "2"]
    assert {n.partition("@")[0] for n in names} == set(chaos.FAULTS)
    assert chaos.everything(1) == list(chaos.FAULTS)
    ran = []
    monkeypatch.setattr(chaos.docker, "from_env", lambda: None)
    monkeypatch.setattr(chaos, "run_clean", lambda name, client: ran.append(name) or {"ok": True})
    monkeypatch.setenv("LS_OPERATOR", "python")
    assert chaos.main(["kill-primary@2", "kill-primary@1+2"]) == 0 and ran == ["kill-primary@2", "kill-primary@1+2"]
    assert chaos.main(["kill-primary@3"]) == 2 and "stages K, L in 1..2" in capsys.readouterr().err
    assert chaos.main(["hang-operator@2"]) == 2 and "needs the Spark operator" in capsys.readouterr().err


def test_each_stage_is_checked_in_order_and_the_fault_is_exact_only_when_every_stage_is(monkeypatch, two_stages):
    monkeypatch.setattr(chaos.time, "sleep", lambda s: None)
    answers = {1: iter([{"got": 5, "expected": 9}, {"got": 9, "expected": 9, "lost": 0, "duplicated": 0}]),
               2: iter([{"got": 3, "expected": 3, "lost": 1, "duplicated": 0}])}
    order = []
    monkeypatch.setattr(chaos, "stack_check", lambda k: order.append(k) or next(answers[k]))
    checks = chaos.check_stages("kill-primary@2", time.monotonic() + 60)
    assert order == [1, 1, 2]  # stage 2's truth is complete only once stage 1's output is
    assert chaos.exact(checks[1]) and not chaos.exact(checks[2])
    assert chaos._summed(checks, "lost") == 1 and chaos._summed(checks, "wrong") is None


def test_the_check_of_a_later_stage_runs_with_its_stage_and_names_its_nodes(monkeypatch, two_stages):
    calls = []

    def compose(*args, **kw):
        calls.append(args)
        return type("Done", (), {"returncode": 0, "stdout": '{"got": 1, "expected": 1}'})()

    monkeypatch.setattr(chaos, "compose", compose)
    assert chaos.stack_check(2) == {"got": 1, "expected": 1}
    args = calls[0]
    assert args[args.index("-e") + 1] == "LS_STAGE=2"
    status = args[args.index("--status") + 1]
    assert "N=s2-n:50051" in status and "Nu=s2-nu:50051" in status and "N'=s2-n-standby:50051" in status


class Labelled:
    def __init__(self, service):
        self.labels, self.removed = {"com.docker.compose.service": service}, False

    def remove(self, force):
        self.removed = force


def test_a_shared_stack_drops_the_nodes_of_stages_the_next_pipeline_does_not_run(monkeypatch):
    boxes = [Labelled(s) for s in ("nu", "kafka", "s2-nu", "s2-n-standby-2", "s3-nd")]
    client = type("Client", (), {"containers": type("C", (), {"list": staticmethod(lambda **kw: boxes)})()})()
    monkeypatch.setenv("LS_PIPELINE", "examples/sensors.sql")  # one stage
    chaos.remove_other_stages(client)
    assert [b.labels["com.docker.compose.service"] for b in boxes if b.removed] == ["s2-nu", "s2-n-standby-2", "s3-nd"]
    for b in boxes:
        b.removed = False
    monkeypatch.setenv("LS_PIPELINE", "examples/nexmark-q5.sql")  # two: stage 2's are its own
    chaos.remove_other_stages(client)
    assert [b.labels["com.docker.compose.service"] for b in boxes if b.removed] == ["s3-nd"]


def test_a_pipeline_of_several_stages_gets_topics_of_its_own_for_each_fault(monkeypatch, tmp_path, two_stages):
    monkeypatch.setattr(chaos, "ROOT", tmp_path)
    from lazystandby.formats.pipeline import read_stages

    own = read_stages(chaos.own_pipeline("t1.") / "nexmark-q5.sql")
    first = read_stages(ROOT / "examples" / "nexmark-q5.sql")
    assert [t.topic for t in own[0].sources] == ["t1.bid"] and own[-1].sink_topic == "t1.nexmark-q5"
    assert [s.plan.text for s in own] == [s.plan.text for s in first]
    assert own[1].sources[0].topic == "auction_bids"  # a view's topic: under the fault's LS_TOPIC_PREFIX


def test_a_pipeline_of_several_stages_gets_the_load_its_windows_need(monkeypatch, two_stages):
    from lazystandby.config import pipeline_stages
    from lazystandby.harness.launcher import pipeline_load_defaults

    monkeypatch.setenv("LS_OPERATOR", "python")
    want = pipeline_load_defaults(pipeline_stages(str(ROOT / "examples" / "nexmark-q5.sql")), "python")
    assert chaos.load(CATALOG["kill-primary"]) == (want["total"], want["rate"])
    assert want["total"] > CATALOG["kill-primary"].load  # 40,000 bids close no 10 s window
    monkeypatch.setenv("LS_PIPELINE", "examples/sensors.sql")  # one stage: the fault's load
    assert chaos.load(CATALOG["kill-primary"]) == (CATALOG["kill-primary"].load, float(chaos.RATE))


def test_a_faults_roles_are_the_nodes_in_them_when_it_begins(fake, monkeypatch):
    """A primary that failed over before the fault (its node restarted and rejoined as the standby): the
    fault's kill of "primary" hits the node Nu pushes to, its kill of "standby" the one it backs up to."""
    log, _ = fake
    settled_nu = {"primary": "n-standby:50051", "standby": "n:50051", "standby_in_sync": True, "epoch": 2}
    reads = iter([
        ({"primary": "n-standby:50051", "standby": "", "epoch": 2}, {}),  # N still restarting
        ({**settled_nu, "standby_in_sync": False}, {}),
        # Nu has both, but N is promoting (N' stalled): Nu hears of it only once N announces its epoch
        (settled_nu, {"n-standby": {"role": "primary", "epoch": 2, "operator_stalled": True},
                      "n": {"role": "promoting", "epoch": 2}}),
        (settled_nu, {"n-standby": {"role": "primary", "epoch": 2}, "n": {"role": "standby", "epoch": 1}}),
        (settled_nu, {"n-standby": {"role": "primary", "epoch": 2}, "n": {"role": "standby", "epoch": 2}})])
    now: dict = {}

    def status(service):
        if service == "nu":
            nu, nodes = next(reads)
            now.clear()
            now.update(nodes, nu=nu)
        return now.get(service, {})

    monkeypatch.setattr(chaos, "statuses", lambda *names: {n: status(n) for n in names})
    monkeypatch.setattr(chaos.time, "sleep", lambda s: None)
    cast = chaos.casts_at((1,))[1]
    assert cast == chaos.Cast({"upstream": "nu", "primary": "n-standby", "standby": "n", "downstream": "nd"}, 2)
    with pytest.raises(StopIteration):
        next(reads)  # it took the fifth read, the first where the nodes agree with Nu
    chaos.inject(Fault("t", "", (Step("standby", Action.PAUSE, duration=0.01), Step("primary", Action.KILL))),
                 client=None, cast=cast)
    assert [(w, s) for _, w, s in log] == [("pause", "n"), ("unpause", "n"), ("kill", "n-standby")]


def test_a_node_restarted_before_the_fault_and_in_its_cast_is_not_waited_for_again(monkeypatch):
    counts = {"n": 1, "n-standby": 2, "s2-n": 1}
    monkeypatch.setattr(chaos, "operator_services", lambda: ["n", "n-standby", "n-standby-2", "s2-n"])
    monkeypatch.setattr(chaos, "restarts", lambda client, svc: counts.get(svc, 0))
    waited = []
    monkeypatch.setattr(chaos, "rejoined", lambda svc, deadline: waited.append(svc) or {
        "role": "standby", "epoch": 3, "backed_up": True, "rejoined": svc != "s2-n"})
    cast = chaos.Cast({"primary": "n", "standby": "n-standby", "upstream": "nu", "downstream": "nd"}, 2)
    out = chaos.restarted_check(None, {1: cast}, {"n": 1, "n-standby": 1, "s2-n": 1}, time.monotonic())
    # N: restarted before the fault, in its cast; N': once more during it; s2-n: not in the fault's cast
    assert out["restarted"]["n"] == {"restarts": 1, "rejoined": True, "before_fault": True}
    assert waited == ["n-standby", "s2-n"] and not out["restarted"]["s2-n"]["rejoined"]
    counts.clear()
    assert chaos.restarted_check(None, {1: cast}, {}, time.monotonic()) == {}


def test_a_stage_that_never_has_a_standby_fails_the_fault_before_any_step(fake, monkeypatch):
    log, _ = fake
    monkeypatch.setattr(chaos, "statuses", lambda *names: {n: {"primary": "s2-n:50051", "standby": ""} for n in names})
    with pytest.raises(TimeoutError, match="stage 2's Nu to push to a primary and back up to a standby"):
        chaos.casts_at((2,), timeout=0.05)
    assert log == []


def test_kill_primary_repeatedly_follows_the_takeovers_from_the_cast_down_the_spares(fake, monkeypatch):
    log, _ = fake
    live = {"role": "primary", "epoch": 0, "recovery": {"live_at": time.time()}}
    epochs = iter([3, 4, 5])
    monkeypatch.setattr(chaos, "took_over", lambda service: {**live, "epoch": next(epochs)})
    monkeypatch.setattr(chaos, "seeded", lambda spare, k=1: {"role": "standby"})
    cast = chaos.Cast({"upstream": "nu", "primary": "n-standby", "standby": "n", "downstream": "nd"}, 2)
    rounds = chaos.kill_repeatedly(None, time.time(), cast=cast)
    assert [(r["killed"], r["primary"], r["epoch"]) for r in rounds] == [
        ("n-standby", "n", 3), ("n", "n-standby-2", 4), ("n-standby-2", "n-standby-3", 5)]
    assert [(w, s) for _, w, s in log if w == "kill"] == [("kill", "n-standby"), ("kill", "n"), ("kill", "n-standby-2")]


def test_a_nodes_health_check_counts_no_failure_for_as_long_as_a_start_may_take():
    """`compose up --wait` fails at the first unhealthy node: a Spark node still starting must not be one."""
    import re

    line = next(x for x in (ROOT / "deploy" / "docker" / "node.Dockerfile").read_text().splitlines()
                if x.startswith("HEALTHCHECK"))
    start = re.search(r"--start-period=(\d+)s", line)
    assert start and int(start.group(1)) >= chaos.START_TIMEOUT_S


def test_a_load_that_outlasts_the_runners_bound_fails_the_fault_saying_so(monkeypatch):
    monkeypatch.setattr(chaos.time, "sleep", lambda s: None)
    gen = FakeContainer([], "generator")
    with pytest.raises(TimeoutError, match="still writing its load 300 s after the fault.s last step and the load"):
        chaos.load_done(gen, time.monotonic() + 0.05, 300)
    gen.status = "exited"
    reads = []
    gen.reload = lambda: reads.append(1)
    chaos.load_done(gen, time.monotonic() - 1, 300)  # a load over is not waited for, however late
    assert reads == [1]


def test_every_stage_of_a_fault_is_cast_in_the_same_pass(monkeypatch):
    """Stage 1 settled while stage 2 is waited for may fail over meanwhile: its cast is the one read in
    the pass that found stage 2 settled too, not the first."""
    monkeypatch.setattr(chaos.time, "sleep", lambda s: None)
    first = {"primary": "n:50051", "standby": "n-standby:50051", "epoch": 1}
    later = {"primary": "n-standby:50051", "standby": "n:50051", "epoch": 2}
    two = {"primary": "s2-n:50051", "standby": "s2-n-standby:50051", "epoch": 1}
    passes = iter([{1: first, 2: {}}, {1: {}, 2: two}, {1: later, 2: two}])
    now: dict = {}

    def settled(k):
        if k == 1:
            now.update(next(passes))
        return now[k]

    monkeypatch.setattr(chaos, "settled", settled)
    casts = chaos.casts_at((1, 2))
    assert (casts[1].services["primary"], casts[1].services["standby"], casts[1].epoch) == ("n-standby", "n", 2)
    assert (casts[2].services["primary"], casts[2].epoch) == ("s2-n", 1)
    with pytest.raises(TimeoutError, match="stage 1's Nu and stage 2's Nu to push"):
        monkeypatch.setattr(chaos, "settled", lambda k: {} if k == 2 else first)
        chaos.casts_at((1, 2), timeout=0.05)
