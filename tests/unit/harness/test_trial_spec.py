"""A trial as a value (harness/trial_spec.py) and what run_trial refuses before anything starts."""

from dataclasses import FrozenInstanceError, replace
from pathlib import Path

import pytest

from lazystandby.harness.faults import CATALOG
from lazystandby.harness.launcher import _Trial, run_trial
from lazystandby.harness.trial_spec import TrialSpec

Q5 = str(Path(__file__).parents[3] / "examples" / "nexmark-q5.sql")


def test_a_trial_is_a_frozen_value_and_the_next_is_made_from_it():
    spec = TrialSpec(total=1000, rate=500.0)
    with pytest.raises(FrozenInstanceError):
        spec.total = 5  # type: ignore[misc]
    other = replace(spec, fault="kill-standby")
    assert other.total == 1000 and other.fault == "kill-standby" and spec.fault == "kill-primary"
    assert TrialSpec(extra={"operator": "spark"}).operator == "spark" and spec.operator == "python"


@pytest.mark.parametrize("fields, says", [
    ({"fault": "kill-primary@2"}, "@STAGE names a stage"),
    ({"fault": {2: CATALOG["kill-primary"]}}, "a fault per stage needs a pipeline"),
    ({"fault": "kill-operator"}, "Spark operator"),
])
def test_a_fault_a_single_stage_cannot_run_is_refused_before_anything_starts(fields, says, tmp_path, monkeypatch):
    monkeypatch.setenv("LS_RUN_DIR", str(tmp_path))
    with pytest.raises(ValueError, match=says):
        run_trial(**fields)
    assert list(tmp_path.iterdir()) == []  # no work directory made, no node started


@pytest.mark.parametrize("fields, says", [
    ({"quiesce": True, "kafka": "k:9092"}, "runs with none of"),
    ({"link": "10mbit", "kafka": "k:9092"}, "runs with none of"),
    ({}, "runs through Kafka"),
])
def test_a_staged_trial_refuses_what_only_one_stage_runs_with(fields, says, tmp_path, monkeypatch):
    monkeypatch.setenv("LS_RUN_DIR", str(tmp_path))
    with pytest.raises(ValueError, match=says):
        run_trial(TrialSpec(pipeline=Q5, fault="kill-primary@2"), **fields)
    assert list(tmp_path.iterdir()) == []


class _Nodes:
    def start_all(self):
        self.started = True


def test_a_later_stage_writes_no_load_of_its_own(tmp_path, monkeypatch):
    """Stage 2 reads the view stage 1 writes: its trial starts its nodes and no generator (a tick load
    into topics nobody reads would only take the machine's cores from the stages)."""
    from lazystandby.config import pipeline_stages
    from lazystandby.formats.pipeline import file_text

    monkeypatch.setenv("LS_RUN_DIR", str(tmp_path))
    whole = tmp_path / "q5.sql"
    whole.write_text(file_text(pipeline_stages(Q5), "t1."))
    spec = TrialSpec(pipeline=str(whole), kafka="127.0.0.1:1", extra={"topic_prefix": "t1."})
    trial = _Trial(spec, CATALOG["none"], say=lambda _: None, stage=2)
    nodes = _Nodes()
    trial.start(nodes)  # type: ignore[arg-type]
    assert nodes.started and trial.gen is None
    assert trial.settings["stage"] == 2 and trial.settings["topic_prefix"] == "t1."


def test_a_trial_of_the_built_in_generator_knows_its_truth_before_it_runs(tmp_path, monkeypatch):
    """No Kafka: the truth of the selection over the generator's ticks is computed when the trial is made,
    from the spec's load and predicate."""
    monkeypatch.setenv("LS_RUN_DIR", str(tmp_path))
    some = _Trial(TrialSpec(total=400, predicate="price > 100"), CATALOG["none"], say=lambda _: None)
    none = _Trial(TrialSpec(total=400, predicate="price > 1000000"), CATALOG["none"], say=lambda _: None)
    assert 0 < len(some.expected) < 400 and none.expected == []
    assert some.settings["total"] == 400 and some.result["bsize"] == "10"
