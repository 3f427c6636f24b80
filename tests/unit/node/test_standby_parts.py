"""The standby's composed parts on their own: the pending covering checkpoints, the primary's connection
watch, and the recovery forecast made from values alone."""

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core import messages as m
from lazystandby.core.acks import Checkpoint
from lazystandby.node.connection_watch import ConnectionWatch
from lazystandby.node.covering import KEPT, PendingCovers
from lazystandby.node.forecast import Backlog, RecoveryForecast


def ck(pos: int) -> Checkpoint:
    return Checkpoint(input_pos=pos, output_count=pos)


def test_a_covering_checkpoint_applies_once_both_limits_reach_it_and_takes_the_older_with_it():
    p = PendingCovers()
    p.hold(ck(10), None, covered_pos=0)
    p.hold(ck(20), None, covered_pos=0)
    p.hold(ck(15), None, covered_pos=0)  # older than one kept: nothing new
    p.hold(ck(5), None, covered_pos=8)  # already covered
    assert len(p) == 2 and p.reached(9) is None
    assert p.reached(25)[0].input_pos == 20 and len(p) == 0


def test_past_its_bound_the_newest_covering_checkpoint_replaces_the_one_before_it():
    p = PendingCovers()
    for pos in range(1, KEPT + 3):
        p.hold(ck(pos), None, covered_pos=0)
    assert len(p) == KEPT
    assert p.reached(KEPT - 1)[0].input_pos == KEPT - 1
    assert p.reached(10**9)[0].input_pos == KEPT + 2


class Peer:
    def __init__(self, tells: bool):
        self.tells, self.lost = tells, None

    def watch(self, lost):
        self.lost = lost
        return self.tells


def test_a_lost_connection_is_taken_once_and_an_old_peers_notice_is_ignored():
    now, woken = [1.0], []
    w = ConnectionWatch(lambda: now[0], lambda: woken.append(now[0]))
    old, new = Peer(True), Peer(False)
    w.watch(old)
    assert w.notices
    w.watch(old)  # once per peer
    old.lost()
    assert w.take_lost() == 1.0 and w.take_lost() is None and woken == [1.0]
    w.watch(new)
    assert not w.notices
    old.lost()  # no longer the one watched
    assert w.take_lost() is None and woken == [1.0]


def backlog(**kw) -> Backlog:
    base = dict(held=500, done=0, primary_received=10_000, take=4_000, own_cost=None, restore_s=0.0,
                notice_hold_s=None, paced=False)
    return Backlog(**{**base, **kw})


def test_the_forecast_predicts_from_the_values_it_is_handed():
    f = RecoveryForecast(NodeConfig(role="standby"), passive=False)
    f.rtts.extend([0.002])
    f.hint = m.RecoveryHint(head_pos=10_500, resend_floor=1, per_call_s=0.002, per_byte_s=0.0, tuple_bytes=50,
                            frame_max=4_096)
    assert not f.predict(backlog()).complete  # no operator cost known
    f.heard(0.002, 0.001, 2e-5)
    t = f.predict(backlog())
    assert t.complete and t.replay_tuples == 10_000 + 500 and t.reconnection_s == pytest.approx(0.004)
    assert t.replay_s == pytest.approx(3 * 0.001 + 10_500 * 2e-5)
    assert f.refresh(0.0, backlog(), watching=True) == t and f.view.backlog == 500
    assert f.standby_view(backlog(done=200)).backlog == 300
    assert f.refresh(0.0, backlog(), watching=False) is None and f.view is None  # no standby watching now


def test_a_paced_standby_prices_its_replay_at_the_dearer_of_its_own_calls_and_its_primarys():
    """A Spark standby's own calls carry its backlog; its primary's small ones say little of a tuple's cost."""
    f = RecoveryForecast(NodeConfig(role="standby"), passive=False)
    f.heard(0.002, 0.25, 2e-6)
    own = (0.1, 6e-5)
    assert f.cost(backlog(own_cost=own)) == (0.25, 2e-6)  # a standby that defers: the primary's
    assert f.cost(backlog(own_cost=own, paced=True)) == (0.25, 6e-5)
    assert f.cost(backlog(own_cost=None, paced=True)) == (0.25, 2e-6)  # its own calls not timed yet
    f.primary_cost = (0.0, 0.0)
    assert f.cost(backlog(own_cost=own)) == own  # the primary's unknown


def test_a_lost_connections_notice_is_held_for_the_lease_and_a_tenth_of_an_interval_at_most_an_interval():
    from lazystandby.node.connection_watch import notice_hold_s

    cfg = NodeConfig(role="standby")  # lease auto: 75 ms of a 100 ms interval
    assert notice_hold_s(cfg) == pytest.approx(0.075 + 0.01)
    assert notice_hold_s(NodeConfig(role="standby", takeover_lease=0.099)) == pytest.approx(0.1)
