"""The role machine and the epoch fence: allowed transitions, fencing, withdrawal, rejoining."""

import pytest

from lazystandby.core.errors import (
    IllegalTransition,
    StaleEpoch,
)
from lazystandby.core.roles import EpochFence, Role, RoleState


def test_failover_path_through_the_role_machine():
    s = RoleState("N'")
    s.become(Role.STANDBY)
    s.become(Role.PROMOTING, epoch=2)
    s.become(Role.PRIMARY)
    s.become(Role.FENCED)
    assert [r for r, _ in s.history] == ["starting", "standby", "promoting", "primary", "fenced"]
    assert s.epoch == 2


@pytest.mark.parametrize("path", [
    [Role.STANDBY, Role.PRIMARY],           # a standby must promote through PROMOTING
    [Role.PRIMARY, Role.STANDBY],           # a primary never goes back to standby
    [Role.PRIMARY, Role.FENCED, Role.PRIMARY],  # fenced is final
    [Role.STANDBY, Role.LEAVING],           # only a primary hands over
    [Role.PRIMARY, Role.LEAVING, Role.PRIMARY],  # and never takes the role back
])
def test_illegal_transitions_are_refused(path):
    s = RoleState("N")
    with pytest.raises(IllegalTransition):
        for r in path:
            s.become(r)


def test_a_leaving_primary_can_still_be_fenced_and_stops():
    s = RoleState("N")
    s.become(Role.PRIMARY, epoch=1)
    s.become(Role.LEAVING)
    s.become(Role.FENCED, epoch=2)  # its standby took over, and a peer said so
    s.become(Role.STOPPED)
    assert [r for r, _ in s.history] == ["starting", "primary", "leaving", "fenced", "stopped"]


def test_a_declined_takeover_withdraws_the_epoch_it_took_and_nothing_else_steps_an_epoch_back():
    r = RoleState("N'")
    r.become(Role.STANDBY, epoch=3)
    r.become(Role.PROMOTING, epoch=4)
    r.withdraw()
    assert (r.role, r.epoch) == (Role.STANDBY, 3)
    r.become(Role.PROMOTING, epoch=4)
    r.become(Role.PRIMARY)
    with pytest.raises(IllegalTransition):
        r.withdraw()  # a primary has announced its epoch: it can only be fenced
    assert r.epoch == 4


def test_only_a_primary_that_has_not_worked_rejoins_as_a_standby():
    r = RoleState("N")
    r.become(Role.PRIMARY, epoch=1)
    with pytest.raises(IllegalTransition, match="it has worked in this life"):
        r.rejoin(worked=True)  # its state belongs to a deposed epoch: fenced instead
    r.rejoin(worked=False)
    assert (r.role, r.epoch) == (Role.STANDBY, 1)  # the epoch moves forward only when Nu answers
    assert [x for x, _ in r.history] == ["starting", "primary", "standby"]
    r.become(Role.PROMOTING, epoch=3)  # and it can take over as any standby can
    r.become(Role.PRIMARY)
    r.become(Role.FENCED)
    with pytest.raises(IllegalTransition, match="it is fenced"):
        r.rejoin(worked=False)
    standby = RoleState("N'")
    standby.become(Role.STANDBY)
    with pytest.raises(IllegalTransition, match="it is standby"):
        standby.rejoin(worked=False)


def test_epoch_fence_refuses_older_epochs_and_names_them():
    f = EpochFence("Nd")
    assert f.admit(1, sender="N", what="delivery")
    assert f.admit(2, sender="N'", what="takeover")
    assert not f.admit(2, sender="N'", what="delivery")
    with pytest.raises(StaleEpoch, match="epoch 1; current epoch is 2"):
        f.check(1, sender="N", what="delivery")
