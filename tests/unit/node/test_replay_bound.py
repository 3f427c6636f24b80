"""standby_replay_max_ms: Nu admits no more while a takeover would find more operator work waiting at the
standby than the bound, by the standby's view (its backlog and its operator's cost) and what it has not
confirmed; a held source keeps asking the standby for a fresh view."""

from dataclasses import replace

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core import messages as m
from lazystandby.core.recovery_model import StandbyView
from lazystandby.sources.base import GeneratorSource
from lazystandby.transport.peer import PeerBase

# 10 ms a call and 0.1 ms a tuple in calls of up to 100: a full call takes 20 ms, so 100 ms holds 500 tuples.
VIEW = StandbyView(fixed_s=0.1, call_s=0.01, tuple_s=0.0001, take=100, backlog=0)


class Standby(PeerBase):
    """A standby that confirms every backup frame through its last position, answering with `view`."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.frames: list[m.BackupFrame] = []
        self.view: StandbyView | None = None
        self.held = 0

    def backup(self, msg, timeout):
        self.frames.append(msg)
        for run in msg.runs:
            self.held = max(self.held, run.first + sum(run.counts) - 1)
        return m.BackupAck(applied_through=self.held, view=self.view)

    def _call(self, rpc, msg, timeout):
        raise AssertionError(f"{rpc}: not expected of this standby")


@pytest.fixture
def nu():
    from lazystandby.node.upstream import UpstreamNode

    peers: dict[str, Standby] = {}

    def peer(addr):
        return peers.setdefault(addr, Standby(addr))

    cfg = NodeConfig(role="upstream", listen="nu", primary="n", standby="s", bsize="10", frame_max=100,
                     backup_lag_max=0, primary_lag_max=0, standby_replay_max_ms=100, backup_linger_ms=0)
    node = UpstreamNode(cfg, GeneratorSource(["I1", "I2"], total=100_000, rate=0.0), peer)
    node.lock.wait = lambda timeout=None: True  # driven by hand: a wait is a turn of the loop
    node.standby_peer = peer("s")
    yield node
    node.stop()


def admit(nu, turns: int) -> None:
    for _ in range(turns):
        nu._source_loop()


def test_without_the_standby_s_view_nothing_is_held(nu):
    admit(nu, 8)
    assert nu.outbound.oqu.last == 800 and nu.counters["source_waited_for_replay"] == 0


def test_the_source_waits_while_the_standby_s_backlog_and_what_it_lacks_pass_the_bound(nu):
    nu.outbound.tuning.standby_view = replace(VIEW, backlog=100)
    admit(nu, 8)
    # 100 waiting at the standby, 400 unconfirmed: 500, the bound
    assert nu.outbound.oqu.last == 400 and nu.counters["source_waited_for_replay"] >= 1
    assert nu.outbound.backup.replay_full
    # The standby confirms everything and works its backlog off: 500 more
    nu.outbound.backup.batcher.confirm(400)
    nu.outbound.tuning.standby_view = VIEW
    admit(nu, 8)
    assert nu.outbound.oqu.last == 900


def test_a_standby_that_does_not_answer_holds_nothing(nu):
    nu.outbound.tuning.standby_view = replace(VIEW, backlog=10_000)
    admit(nu, 2)
    assert nu.outbound.oqu.last == 0
    nu.outbound.backup.retry_at = nu.clock() + 60  # its last call failed: retried later
    admit(nu, 2)
    assert nu.outbound.oqu.last == 200


def test_a_bound_below_one_call_s_cost_slows_the_source_and_never_stops_it(nu):
    nu.outbound.tuning.standby_view = replace(VIEW, call_s=1.0)  # no call fits in 100 ms
    admit(nu, 3)
    assert nu.outbound.oqu.last == 10  # a batch (Bsize 10) waiting, no more
    nu.outbound.backup.batcher.confirm(10)
    admit(nu, 3)
    assert nu.outbound.oqu.last == 20


def test_a_held_source_keeps_asking_the_standby_for_its_view(nu):
    nu.outbound.tuning.standby_view = replace(VIEW, backlog=480)
    admit(nu, 3)
    backup = nu.outbound.backup
    for _ in range(4):  # the runs go out and are confirmed
        backup.loop()
    assert nu.outbound.oqu.last == 20 and backup.batcher.confirmed_through == 20 and backup.replay_full
    peer = nu.standby_peer
    peer.view = replace(VIEW, backlog=0)  # the standby has worked its backlog off
    sent = len(peer.frames)
    backup.next_checkpoint_at = 0.0
    backup.loop()
    backup.loop()
    assert len(peer.frames) > sent and not peer.frames[-1].runs  # a frame that only asks
    assert nu.outbound.tuning.standby_view.backlog == 0
    admit(nu, 3)
    assert nu.outbound.oqu.last > 20
