"""A pipeline of several stages under one fault: faults named by stage, and one result from the stages'."""

from pathlib import Path

import pytest

from lazystandby import config
from lazystandby.harness.launcher import _args
from lazystandby.harness.places import NU
from lazystandby.harness.stages import combine, staged

Q5 = str(Path(__file__).parents[3] / "examples" / "nexmark-q5.sql")
ONE = str(Path(__file__).parents[3] / "examples" / "nexmark-q5-counts.sql")


@pytest.mark.parametrize("name, stages, targets", [
    ("kill-primary", 2, (1,)), ("kill-primary@2", 2, (2,)), ("kill-primary@2+1", 3, (1, 2)),
    ("pause-standby@3", 3, (3,)),
])
def test_a_fault_hits_the_stages_it_names(name, stages, targets):
    f, at = staged(name, stages)
    assert f.name == name.partition("@")[0] and at == targets


@pytest.mark.parametrize("name, says", [
    ("kill-primary@3", "stages K, L in 1..2"), ("kill-primary@0", "1..2"), ("kill-primary@x", "kill-primary@K"),
    ("kill-primary@", "kill-primary@K"), ("kill-everything@1", "expected one of"),
])
def test_a_stage_the_pipeline_does_not_run_is_refused(name, says):
    with pytest.raises(config.SettingError, match=says):
        staged(name, 2)


def test_launch_takes_a_staged_fault_only_for_a_pipeline_of_several(monkeypatch):
    for k in ("LS_PIPELINE", "LS_QUERY", "LS_STAGE"):
        monkeypatch.delenv(k, raising=False)
    args, settings = _args("run", [Q5, "--fault", "kill-primary@1+2"])
    assert args.fault == "kill-primary@1+2" and "stage" not in settings
    assert settings["total"] >= 3 * 14_000 * 10  # enough bids for the first stage's windows to close
    assert settings["rate"] == 20_000.0  # 40,000 a second over two stages, each with four nodes of its own
    with pytest.raises(config.SettingError, match="1..2"):
        _args("run", [Q5, "--fault", "kill-primary@3"])
    with pytest.raises(config.SettingError, match="names a stage of a pipeline of several"):
        _args("run", [ONE, "--fault", "kill-primary@1"])


def _stage(expected, got, lost=0, recovery_ms=None, ok=True, failovers=0):
    r = {"expected": expected, "got": got, "lost": lost, "duplicated": 0, "wrong": 0, "failovers": failovers,
         "ok": ok, "fault": "kill-primary", "recovery": {"cause": "detector"}, "before": {}, "after": {}}
    if recovery_ms is not None:
        r["recovery_ms"] = recovery_ms
    return r


def test_a_pipelines_result_is_its_last_stages_output_with_every_stages_faults():
    one, two = _stage(100, 100, recovery_ms=300.0, failovers=1), _stage(9, 9, recovery_ms=120.0, failovers=1)
    r = combine([one, two], (1, 2))
    assert (r["expected"], r["got"], r["failovers"], r["recovery_ms"], r["ok"]) == (9, 9, 2, 300.0, True)
    assert [s["failover_ms"] for s in r["stages"]] == [300.0, 120.0]
    hit_second = combine([_stage(100, 100), _stage(9, 9, recovery_ms=120.0, failovers=1)], (2,))
    assert hit_second["recovery_ms"] == 120.0 and [s["fault"] for s in hit_second["stages"]] == ["none", "kill-primary"]
    # A stage not hit that failed over all the same: counted, with no failover time of its own.
    spurious = combine([_stage(100, 100, recovery_ms=-800.0, failovers=1), _stage(9, 9, recovery_ms=150.0,
                                                                                failovers=1)], (2,))
    assert spurious["failovers"] == 2 and spurious["recovery_ms"] == 150.0
    assert [s["failover_ms"] for s in spurious["stages"]] == [None, 150.0]
    bad = combine([_stage(100, 99, lost=1, ok=False), _stage(9, 9)], (1,))
    assert bad["lost"] == 1 and not bad["ok"] and "recovery_ms" not in bad


def test_each_stage_says_what_weighed_on_its_failover():
    one = {**_stage(100, 100, recovery_ms=900.0, failovers=1), "primary_longest_silence_ms": 420.5,
           "before": {NU: {"head": 61_000, "standby_in_sync": False}},
           "after": {NU: {"counters": {"standby_out_of_sync": 3}}}}
    first, second = combine([one, _stage(9, 9)], (1,))["stages"]
    assert (first["admitted_at_fault"], first["standby_in_sync_at_fault"], first["standby_out_of_sync"],
            first["primary_longest_silence_ms"]) == (61_000, False, 3, 420.5)
    assert (second["admitted_at_fault"], second["standby_in_sync_at_fault"], second["standby_out_of_sync"]) == (
        None, None, None)  # a stage whose status was not read says nothing rather than 0
    never = {**_stage(9, 9), "after": {NU: {"counters": {"admitted_tuples": 9}}}}
    assert combine([never], (1,))["stages"][0]["standby_out_of_sync"] == 0  # read, never counted: 0


class FakeTrial:
    """A stage's trial that records its phases into the run's log."""

    def __init__(self, k, f, log, tmp_path):
        self.k, self.f, self.log, self.ok = k, f, log, False
        self.workdir = tmp_path / f"stage{k}"
        self.workdir.mkdir()
        self.result = {}

    def __getattr__(self, phase):
        def run(topo, **_):
            self.log.append((phase, self.k))
            if phase == "judge":
                self.ok = True
                self.result.update(_stage(10 * self.k, 10 * self.k, recovery_ms=50.0 * self.k if self.f.name != "none"
                                          else None, failovers=int(self.f.name != "none")))
        return run


class FakeTopo:
    def __init__(self, statuses):
        self.statuses = statuses

    def status(self, key):
        return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_stages_start_last_first_are_hit_together_and_are_checked_in_order(tmp_path):
    from contextlib import nullcontext

    from lazystandby.formats.pipeline import read_stages
    from lazystandby.harness.stages import run_stages

    log, made = [], {}

    def trial(k, spec, f):
        made[k] = FakeTrial(k, f, log, tmp_path)
        return made[k]

    r = run_stages(read_stages(Q5), "kill-primary@2", trial=trial,
                   topology=lambda t: nullcontext(FakeTopo([{"head": 0}, {"head": 5}])), operator="python",
                   timeout=5.0, home=tmp_path / "home", keep=True)
    assert [made[k].f.name for k in (1, 2)] == ["none", "kill-primary"]
    assert log[:2] == [("start", 2), ("start", 1)]
    assert log[2] == ("reach_the_fault", 2) and sorted(log[3:5]) == [("inject", 1), ("inject", 2)]
    assert log[5:9] == [("read_the_truth", 1), ("settle", 1), ("read_the_truth", 2), ("settle", 2)]
    assert r["ok"] and r["failovers"] == 1 and r["recovery_ms"] == 100.0 and r["expected"] == 20
    assert r["workdirs"] == [str(tmp_path / "stage1"), str(tmp_path / "stage2")]  # kept: keep=True


def test_a_spark_only_fault_on_the_python_operator_is_refused_before_any_stage_starts(tmp_path):
    from lazystandby.formats.pipeline import read_stages
    from lazystandby.harness.stages import run_stages

    with pytest.raises(ValueError, match="needs the Spark operator"):
        run_stages(read_stages(Q5), "kill-operator@2", trial=None, topology=None, operator="python",
                   timeout=1.0, home=tmp_path, keep=False)


class Restarting:
    """A topology whose node in `n` does not answer: its supervisor started it again, or never did; with
    `ends_after`, its process is alive and silent for that many calls, then ends for a restart."""

    def __init__(self, supervise, restarted, ends_after=None):
        self.supervise, self.supervisor_restarts = supervise, ["n"] if restarted else []
        self.ends_after, self.calls = ends_after, 0

    def status(self, key):
        from lazystandby.core.errors import PeerError

        self.calls += 1
        raise PeerError("UNAVAILABLE", "connection refused", refused=True)

    def alive(self, key):
        return self.ends_after is not None and self.calls < self.ends_after

    def waiting_restart(self, key):
        return self.ends_after is not None and self.calls >= self.ends_after


def test_a_node_its_supervisor_starts_again_has_no_status_before_a_fault_and_any_other_silence_is_an_error():
    from lazystandby.core.errors import PeerError
    from lazystandby.harness.launcher import _status_or_none

    assert _status_or_none(Restarting(True, True), "n") == {}
    with pytest.raises(PeerError):
        _status_or_none(Restarting(True, False), "n")
    with pytest.raises(PeerError):
        _status_or_none(Restarting(False, True), "n")


def test_a_supervised_node_on_its_way_out_is_asked_again_until_it_ends_and_a_silent_live_one_is_an_error():
    """A fenced node stops serving before its process ends: it is no error while it ends within the bound;
    a live node silent past the bound still is."""
    from lazystandby.core.errors import PeerError
    from lazystandby.harness.launcher import _status_or_none

    exiting = Restarting(True, False, ends_after=3)
    assert _status_or_none(exiting, "n", exit_wait_s=5.0) == {}
    assert exiting.calls == 3
    with pytest.raises(PeerError):
        _status_or_none(Restarting(True, False, ends_after=10**6), "n", exit_wait_s=0.3)


def test_faults_per_stage_are_named_and_checked_against_the_stages():
    from lazystandby.harness.stages import FAULTS, hits, name_of

    kill, pause = FAULTS["kill-primary"], FAULTS["pause-standby"]
    assert hits("kill-primary@1+2", 2) == {1: kill, 2: kill} and hits(kill, 3) == {1: kill}
    assert name_of(hits({3: pause, 1: kill}, 3)) == "kill-primary@1+pause-standby@3"
    assert name_of({1: kill, 2: kill}) == "kill-primary@1+2"
    with pytest.raises(config.SettingError, match="1..2"):
        hits({3: kill}, 2)
    with pytest.raises(config.SettingError, match="1..2"):
        hits({}, 2)


def test_a_fault_per_stage_for_a_pipeline_of_one_stage_is_refused():
    from lazystandby.harness.launcher import FAULTS, run_trial

    with pytest.raises(ValueError, match="needs a pipeline of several stages"):
        run_trial(fault={1: FAULTS["kill-primary"]}, pipeline=ONE, kafka="127.0.0.1:9")


class Roles:
    """A topology whose place N' holds `role` (a takeover before the fault makes it the primary)."""

    def __init__(self, role):
        self.role = role

    def alive(self, key):
        return True

    def status(self, key):
        return {"role": self.role}


def test_a_fault_hits_the_node_in_the_role_it_names_when_it_starts():
    from lazystandby.harness.launcher import FAULTS, places_at_fault

    assert places_at_fault(Roles("standby"), FAULTS["kill-primary"])["primary"] == "n"
    swapped = places_at_fault(Roles("primary"), FAULTS["kill-primary-then-restart"])
    assert (swapped["primary"], swapped["standby"], swapped["upstream"]) == ("n2", "n", "nu")
    # A fault that cuts links keeps the places its relays were laid between.
    assert places_at_fault(Roles("primary"), FAULTS["isolate-primary"])["primary"] == "n"


def test_the_stages_of_a_pipeline_are_counted_once_and_checked_as_the_first_stage_takes_them(tmp_path):
    from lazystandby.harness.stages import count, first_stage_args

    root = Path(__file__).resolve().parents[3] / "examples"
    assert count(str(root / "nexmark-hot-auctions.sql")) == 3 and count(str(root / "nexmark-q0.sql")) == 1
    assert count("") == 0 and first_stage_args("") == [] and first_stage_args(str(root / "nexmark-q0.sql")) == []
    assert first_stage_args(str(root / "nexmark-q5.sql")) == ["--stage=1"]
    bad = tmp_path / "bad.sql"
    bad.write_text("SELECT nonsense;")
    assert count(str(bad)) == 1  # the node settings say what is wrong with it, in one line
    with pytest.raises(config.SettingError, match="pipeline"):
        config.load(["--pipeline", str(bad)], env={})


def test_stages_hit_at_once_are_hit_together_even_when_a_fault_blocks():
    """A stop awaits the node's exit and a pause lasts seconds: the other stage's fault does not wait."""
    import threading
    import time

    from lazystandby.harness.stages import at_once

    began, lock = {}, threading.Lock()

    def fault(k, lasts, fails=False):
        def inject():
            with lock:
                began[k] = time.monotonic()
            time.sleep(lasts)
            if fails:
                raise RuntimeError(f"stage {k}'s node did not exit")
        return inject

    t0 = time.monotonic()
    at_once([fault(1, 0.6), fault(2, 0.1)])
    assert abs(began[1] - began[2]) < 0.2 and time.monotonic() - t0 < 1.0
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="stage 2's node"):
        at_once([fault(1, 0.4), fault(2, 0.0, fails=True)])
    assert time.monotonic() - t0 >= 0.4  # raised once the other stage's fault had ended


@pytest.mark.parametrize("example, total", [
    ("nexmark-q5.sql", 480_000),  # 3 x (10 s + 4 s, then 2 s) of event time at 10 bids a ms
    ("nexmark-hot-auctions.sql", 480_000),  # a selection first: no window of its own
    ("nexmark-q5-fanout.sql", 480_000),  # two 2 s readers of one view: the longest path, not their sum
])
def test_a_pipelines_load_spans_its_longest_path_of_windows(example, total):
    from lazystandby.config import pipeline_stages
    from lazystandby.harness.launcher import pipeline_load_defaults

    stages = pipeline_stages(str(Path(__file__).resolve().parents[3] / "examples" / example))
    load = pipeline_load_defaults(stages, "python")
    assert load == {"total": total, "rate": 40_000.0 / len(stages)}
