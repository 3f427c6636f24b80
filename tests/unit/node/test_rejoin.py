"""A primary started again after a takeover (its old settings, role primary, epoch 1) rejoins as a standby
when it is shown the newer epoch before it has done anything (RoleState.rejoin); one that has worked in
this life is fenced, as before. Real nodes on the in-memory network; the processes and containers run the
same in the `kill-primary-then-restart` fault (tests/integration, tests/system)."""

import time

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core import messages as m
from lazystandby.core.recovery import plan_takeover
from lazystandby.core.roles import Role
from lazystandby.harness.wait import wait_until
from lazystandby.node.downstream import DownstreamNode
from lazystandby.node.operator_node import OperatorNode
from lazystandby.node.upstream import UpstreamNode
from lazystandby.operators.selection import Selection
from lazystandby.sinks.base import MemorySink
from lazystandby.sources.base import GeneratorSource
from lazystandby.transport.memory import MemoryNetwork


@pytest.fixture
def moved_on():
    """Nu and Nd, and N' at "s" (answering heartbeats); `take()` makes N' the primary of epoch 2 at both."""
    net = MemoryNetwork()
    nd = DownstreamNode(NodeConfig(role="downstream", listen="nd"), MemorySink())
    net.register("nd", nd)
    nu = UpstreamNode(NodeConfig(role="upstream", listen="nu", primary="n", standby="s"),
                      GeneratorSource(["I1", "I2"], total=40, rate=0.0), net.peer)
    net.register("nu", nu)
    s = OperatorNode(NodeConfig(role="primary", listen="s"), Selection("price > 100"), net.peer)
    net.register("s", s)
    nodes = [nd, nu, s]

    def take() -> None:
        req = m.TakeoverRequest(node="N'", epoch=2, address="s", resend_from=1)
        nu.handle_takeover(req)
        nd.handle_takeover(req)

    yield net, nd, nu, nodes, take
    for x in nodes:
        x.stop()


def restarted_n(net, nodes, **settings) -> OperatorNode:
    """N as its old settings start it: the primary of epoch 1 (plus `settings`)."""
    n = OperatorNode(NodeConfig(role="primary", name="N", listen="n", advertise="n", upstream="nu", downstream="nd",
                                ack_poll_ms=5, **settings), Selection("price > 100"), net.peer)
    net.register("n", n)
    nodes.append(n)
    return n


def test_a_primary_shown_a_newer_epoch_before_it_did_anything_rejoins_as_a_standby(moved_on):
    net, nd, nu, nodes, take = moved_on
    take()
    n = restarted_n(net, nodes)
    assert n.state.role is Role.PRIMARY and n.state.epoch == 1
    n.primary_side.deliver.loop()  # its first call: the resync with Nd, refused (epoch 2 is in force)
    assert n.state.role is Role.STANDBY and n.counters["rejoined"] == 1 and n.counters["fenced"] == 0
    # As a spare does: it registers with Nu, learns the primary and the epoch from it, and is backed up to.
    assert wait_until(n.standby_side.registered.is_set, 5)
    assert nu.outbound.standby is not None and nu.outbound.standby.address == "n"
    assert n.standby_side.primary is not None and n.standby_side.primary.address == "s" and n.state.epoch == 2
    assert n.standby_side.detector is not None
    assert wait_until(lambda: n.counters["heartbeats"] + n.counters["heartbeat_misses"] > 0, 5)
    assert n.counters["heartbeat_misses"] == 0  # it watches N', the primary Nu named
    assert nd.inbound.delivered_through == 0 and nd.fence.epoch == 2  # and it sent Nd nothing


def test_a_primary_that_has_delivered_is_fenced_not_rejoined(moved_on):
    net, nd, nu, nodes, take = moved_on
    n = restarted_n(net, nodes)
    n.primary_side.deliver.loop()  # before the takeover: N's resync goes through
    assert n.state.role is Role.PRIMARY and not n.primary_side.deliver.resync
    time.sleep(0.1)  # past N's lease at Nd (75 ms): Nd takes the takeover
    take()
    n.primary_side.deliver.loop()  # an idle frame, refused: its state belongs to epoch 1
    assert n.state.role is Role.FENCED and n.counters["fenced"] == 1 and n.counters["rejoined"] == 0


def test_a_primary_that_took_a_frame_from_nu_is_fenced_not_rejoined(moved_on):
    from lazystandby.core.acks import Checkpoint
    from lazystandby.core.tuples import TupleBatch

    net, nd, nu, nodes, take = moved_on
    n = restarted_n(net, nodes)
    n.handle_push(m.Frame(epoch=1, sender="Nu", checkpoint=Checkpoint(0, 0),
                          batch=TupleBatch(first=1, streams=[1], seqs=[1], payloads=[b"x"])))
    take()
    n.primary_side.deliver.loop()
    assert n.state.role is Role.FENCED and n.counters["rejoined"] == 0


def test_a_promoted_standby_refused_before_its_first_delivery_is_fenced_not_rejoined(moved_on):
    net, nd, nu, nodes, take = moved_on
    take()
    s = OperatorNode(NodeConfig(role="standby", listen="s2", upstream="nu", downstream="nd"), Selection("price > 1"),
                     net.peer)
    nodes.append(s)
    s.state.become(Role.PROMOTING, epoch=2)
    s.takeover._replay(plan_takeover(epoch=2, delivered_through=0, received_through=0, oq_first=1, oq_last=0),
              m.TakeoverReply(epoch=2))
    with s.lock:
        s.primary_side.fence("Nd refused epoch 2")  # it holds IQ' and OQ' of a deposed epoch
    assert s.state.role is Role.FENCED and s.counters["rejoined"] == 0


@pytest.mark.parametrize("exit_when_fenced", [False, True])
def test_a_fenced_primary_exits_to_be_started_again_only_when_told_to(moved_on, exit_when_fenced):
    """exit_when_fenced (the compose stack's): a deposed primary ends its process (75), and its supervisor
    starts it again as a fresh node, which rejoins; off, it stays up, fenced, and says so."""
    from lazystandby.node.common import EXIT_FENCED

    net, nd, nu, nodes, take = moved_on
    n = restarted_n(net, nodes, exit_when_fenced=exit_when_fenced)
    n.primary_side.deliver.loop()
    time.sleep(0.1)  # past N's lease at Nd
    take()
    n.primary_side.deliver.loop()
    assert n.state.role is Role.FENCED
    assert n.halt.is_set() is exit_when_fenced
    assert (n.exit_code, n.fatal.startswith("fenced (Nd refused epoch 1")) == ((EXIT_FENCED, True) if exit_when_fenced
                                                                              else (0, False))


def test_exit_when_fenced_is_a_setting_off_by_default():
    from lazystandby import config

    assert NodeConfig().exit_when_fenced is False
    assert config.load(["--role", "primary", "--exit-when-fenced", "true"]).exit_when_fenced is True
    assert config.load(["--role", "primary"], env={"LS_EXIT_WHEN_FENCED": "1"}).exit_when_fenced is True


def test_launch_turns_exit_when_fenced_on_for_its_supervised_nodes_unless_told_not_to(monkeypatch):
    """launch and failover-check start a fenced node again (Topology.supervise), as the compose stack does,
    so they turn exit_when_fenced on; a flag or LS_EXIT_WHEN_FENCED turns it off, and the summary says which."""
    from lazystandby.harness import launcher

    monkeypatch.delenv("LS_EXIT_WHEN_FENCED", raising=False)
    args, s = launcher._args("launch", [])
    assert s["exit_when_fenced"] is True and launcher._trial_spec(s).extra["exit_when_fenced"] is True
    assert launcher._what_ran(args, s, "")["exit_when_fenced"] is True
    assert launcher._args("launch", ["--exit-when-fenced", "false"])[1]["exit_when_fenced"] is False
    monkeypatch.setenv("LS_EXIT_WHEN_FENCED", "0")
    assert launcher._args("failover-check", [])[1]["exit_when_fenced"] is False


def standby_started_with(net, nodes, listen: str, primary: str) -> OperatorNode:
    """A standby as its settings start it, with a configured primary (`primary`), registered with Nu."""
    s2 = OperatorNode(NodeConfig(role="standby", name=listen, listen=listen, advertise=listen, upstream="nu",
                                 downstream="nd", primary=primary), Selection("price > 100"), net.peer)
    net.register(listen, s2)
    nodes.append(s2)
    s2.start()
    assert wait_until(s2.standby_side.registered.is_set, 5)
    return s2


def test_a_standby_started_after_a_takeover_watches_the_primary_nu_names_not_its_configured_one(moved_on):
    """Started again with its old settings (primary: N, dead since the takeover), it would suspect the dead
    N at every timeout and be declined while N' delivers; Nu names N', which it watches."""
    net, nd, nu, nodes, take = moved_on
    take()
    s2 = standby_started_with(net, nodes, "x", primary="n")
    assert s2.standby_side.primary is not None and s2.standby_side.primary.address == "s" and s2.state.epoch == 2
    assert wait_until(lambda: s2.counters["heartbeats"] >= 2, 5)
    assert s2.counters["heartbeat_misses"] == 0 and s2.state.role is Role.STANDBY


def test_in_the_first_epoch_a_standby_keeps_its_configured_route_to_the_primary(moved_on):
    """Epoch 1: the configured primary is the first primary, reached perhaps by a route Nu does not use
    (a relay, another name): it is kept, though Nu names the primary "n"."""
    net, nd, nu, nodes, take = moved_on
    # No standby in place (one in sync and answering is not replaced: test_upstream_takeover).
    nu.outbound.standby = None
    s2 = standby_started_with(net, nodes, "x", primary="s")
    assert s2.standby_side.primary is not None and s2.standby_side.primary.address == "s" and s2.state.epoch == 1


def test_a_primary_that_rejoins_while_it_starts_watches_its_primary_once(moved_on):
    """The output loop's first call (the resync with Nd) can be refused, and the node rejoin as a standby,
    before start() has spawned its last loop: start() must not watch the primary a second time (two
    heartbeat loops would both take over, the second from PROMOTING)."""
    net, nd, nu, nodes, take = moved_on
    take()
    n = restarted_n(net, nodes)
    spawned: list[str] = []
    spawn = n.spawn

    def spawn_and_run_output_first(name, loop, on_crash=None):
        spawned.append(name)
        if name == "output":
            n.primary_side.deliver.loop()  # the refusal comes before start() goes on
            assert n.state.role is Role.STANDBY
        spawn(name, loop, on_crash)

    n.spawn = spawn_and_run_output_first
    n.start()
    assert spawned.count("heartbeat") == 1, spawned
    n.standby_side.watch()  # a second rejoin path, or a second call, watches nothing more
    assert spawned.count("heartbeat") == 1, spawned
