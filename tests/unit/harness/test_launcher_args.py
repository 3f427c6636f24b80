"""launch's and failover-check's flags and env vars, typed and passed on to every node of the trial."""

import pytest

from lazystandby import config
from lazystandby.harness.launcher import _args, _trial_spec


def test_a_passive_standby_and_its_interval_reach_the_trials_nodes(monkeypatch):
    monkeypatch.delenv("LS_STANDBY_STATE", raising=False)
    monkeypatch.setenv("LS_SNAPSHOT_INTERVAL", "2.5")
    _, settings = _args("launch", ["--query", "window", "--standby-state", "snapshot"])
    assert settings["standby_state"] == "snapshot" and settings["snapshot_interval"] == 2.5
    extra = _trial_spec(settings).extra
    assert extra["standby_state"] == "snapshot" and extra["snapshot_interval"] == 2.5
    _, default = _args("failover-check", [])
    assert default["standby_state"] == "warm"


def test_a_passive_standby_for_a_selection_is_refused_naming_the_setting(monkeypatch):
    monkeypatch.delenv("LS_QUERY", raising=False)
    with pytest.raises(config.SettingError, match="standby_state"):
        _args("launch", ["--standby-state", "snapshot"])
