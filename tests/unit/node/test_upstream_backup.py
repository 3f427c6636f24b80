"""Nu's backup link: a standby registering, resynced, cut from the checkpoint it needs, and one that stops
answering no longer holding the pipeline back."""

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core import messages as m
from lazystandby.core.errors import PeerError
from lazystandby.node.operator_node import OperatorNode
from lazystandby.operators.selection import Selection
from lazystandby.transport.memory import MemoryNetwork
from lazystandby.transport.peer import PeerBase


def upstream_holding(peers, standby, total=40, **settings):
    """A Nu with `total` tuples admitted into OQu, driven by hand (no threads) against standby `standby`."""
    from lazystandby.node.upstream import UpstreamNode
    from lazystandby.sources.base import GeneratorSource

    cfg = NodeConfig(role="upstream", listen="nu", primary="n", standby=standby, bsize="10", **settings)
    nu = UpstreamNode(cfg, GeneratorSource(["I1", "I2"], total=total, rate=0.0), peers)
    while nu.outbound.oqu.last < total:
        nu._source_loop()
    return nu


@pytest.fixture
def fed_standby(net):
    """A standby N2 and a Nu driven by hand (no threads) that feeds it at Bsize 10 without gathering, from
    a generator whose `total` the test raises; `fill(nu, n)` admits up to position n."""
    from lazystandby.node.upstream import UpstreamNode
    from lazystandby.sources.base import GeneratorSource

    s2 = OperatorNode(NodeConfig(role="standby", listen="s2"), Selection("price > 100"), net.peer)
    net.register("s2", s2)
    src = GeneratorSource(["I1", "I2"], total=0, rate=0.0)
    nu = UpstreamNode(NodeConfig(role="upstream", listen="nu", primary="n", standby="s2", bsize="10",
                                 backup_linger_ms=0), src, net.peer)
    yield s2, nu
    nu.stop()
    s2.stop()


def fill(nu, through: int) -> None:
    nu.source.total = through
    while nu.outbound.oqu.last < through:
        nu._source_loop()


class HeldCall:
    """A backup call in flight until the test answers it (`answer`) or fails it (`fail`): a standby that
    stopped answering (SIGSTOP, docker pause, a link that drops packets)."""

    def __init__(self, call) -> None:
        self.call, self.error, self.answered = call, None, False

    def answer(self) -> None:
        self.answered = True

    def fail(self, status: str) -> None:
        self.error, self.answered = PeerError(status, "s2 Backup: no answer"), True

    def done(self) -> bool:
        return self.answered

    def result(self):
        assert self.answered, "the node waited on a call the test holds"
        if self.error is not None:
            raise self.error
        return self.call()


def test_a_backup_cancelled_by_a_new_standby_registering_does_not_delay_the_newcomer(net):
    """Closing the replaced standby's channel cancels the call in flight; that error belongs to the old peer."""
    newcomer = OperatorNode(NodeConfig(role="standby", listen="s2"), Selection("price > 100"), net.peer)
    net.register("s2", newcomer)
    nu_box = []

    class Replaced(PeerBase):
        address = "s1"

        def backup(self, frame, timeout):
            nu_box[0].handle_register_standby(m.RegisterStandby(node="N2", address="s2"))
            raise PeerError("CANCELLED", "s1 Backup: Channel closed!")

        def status(self, timeout):  # s1 is gone: a standby that answers is not replaced (StandbyInPlace)
            raise PeerError("UNAVAILABLE", "s1 Status: connection refused")

        def close(self):
            pass

    def peers(addr):
        return Replaced() if addr == "s1" else net.peer(addr)

    nu = upstream_holding(peers, "s1")
    nu_box.append(nu)
    try:
        nu.outbound.backup.loop()  # goes to s1, which is replaced mid-call
        assert nu.counters["backup_error_cancelled"] == 1
        assert nu.outbound.standby.address == "s2" and nu.outbound.backup.retry_at == 0.0 and nu.outbound.backup.resync
        nu.outbound.backup.loop()  # asks the newcomer where it stands: nowhere
        nu.outbound.backup.loop()
        assert newcomer.counters["backup_tuples"] == 40 and newcomer.inbound.received_through == 40
    finally:
        nu.stop()
        newcomer.stop()


def test_a_standby_ahead_of_the_cut_is_resynced_at_once_and_keeps_what_it_has(net):
    """N' registering while it already holds what Nu fed it (as at start-up, when N' started first): Nu asks
    where it stands before cutting again, so nothing it holds is sent, decoded and refused a second time."""
    s2 = OperatorNode(NodeConfig(role="standby", listen="s2"), Selection("price > 100"), net.peer)
    net.register("s2", s2)
    nu = upstream_holding(net.peer, "s2")
    try:
        nu.outbound.backup.loop()
        assert s2.inbound.received_through == 40
        nu.handle_register_standby(m.RegisterStandby(node="N2", address="s2"))
        assert nu.outbound.backup.resync
        nu.outbound.backup.loop()  # the resync: N' answers 40, and Nu cuts on from there
        assert not nu.outbound.backup.resync and nu.outbound.backup.batcher.batched_through == 40
        assert not any(k.startswith("backup_error") for k in nu.counters) and not s2.errors
        assert s2.inbound.received_through == 40 and s2.counters["backup_tuples"] == 40
    finally:
        nu.stop()
        s2.stop()


def test_a_standby_registering_while_its_backup_is_in_flight_loses_none_of_it(net):
    """N' fed since Nu started registers while one call is in flight and the next run is already cut (and
    trimmed from OQu: the run is a view of it). Voiding both, as a new standby's registration must, dropped
    the cut run, and the resync then skipped the standby past it to a checkpoint: at full speed 50,000-
    110,000 of a run's first tuples never reached N'. The same standby's calls stand."""
    from lazystandby.core.messages import Checkpoint

    s2 = OperatorNode(NodeConfig(role="standby", listen="s2"), Selection("price > 100"), net.peer)
    net.register("s2", s2)
    box: list = []

    class InFlight:
        """A call not answered yet; N' registers before its answer comes back."""

        def __init__(self, peer, frame, timeout):
            self.peer, self.frame, self.timeout = peer, frame, timeout

        def done(self):
            return False

        def result(self):
            if not box[1]:
                box[1] = True
                box[0].handle_register_standby(m.RegisterStandby(node="N2", address="s2"))
            return self.peer.backup(self.frame, self.timeout)

    class Standby(PeerBase):
        address = "s2"

        def __init__(self):
            self.inner = net.peer("s2")

        def backup(self, frame, timeout):
            return self.inner.backup(frame, timeout)

        def backup_async(self, frame, timeout):
            return InFlight(self, frame, timeout)

    nu = upstream_holding(lambda a: Standby() if a == "s2" else net.peer(a), "s2", total=80,
                          max_batches_per_rpc=4, backup_linger_ms=0)
    box[:] = [nu, False]
    try:
        nu.outbound.backup.loop()  # 1-40 in flight
        nu.outbound.level1(nu.fence.epoch, Checkpoint(80, 0))  # Nd holds all 80 outputs: OQu may trim what is cut
        nu.outbound.backup.loop()  # 41-80 cut (and trimmed); 1-40 answered after the registration
        assert box[1] and nu.counters["standby_registrations"] == 1
        for _ in range(3):
            nu.outbound.backup.loop()  # 41-80 sent, then the resync
        assert nu.outbound.backup.batcher.skipped == 0 and nu.outbound.backup.batcher.confirmed_through == 80
        assert s2.inbound.received_through == 80 and s2.counters["backup_tuples"] == 80
        assert nu.counters["backup_tuples"] == 80
        assert not any(k.startswith("backup_error") for k in nu.counters) and not s2.errors
    finally:
        nu.stop()
        s2.stop()


def test_a_resync_only_asks_and_skips_no_standby_past_what_nu_can_still_send(net):
    """Nd's acks run ahead of the backup (by up to backup_lag_max); OQu keeps what the standby has not been
    sent. A resync that carried Nu's newest checkpoint moved the standby past those positions, and Nu with
    it: they were never sent (50,000 at a start-up registration at full speed). It asks, and Nu goes on
    from the standby's answer."""
    from lazystandby.core.messages import Checkpoint

    s2 = OperatorNode(NodeConfig(role="standby", listen="s2"), Selection("price > 100"), net.peer)
    net.register("s2", s2)
    nu = upstream_holding(net.peer, "s2", total=80, max_batches_per_rpc=4, backup_linger_ms=0)
    try:
        nu.outbound.backup.loop()
        assert s2.inbound.received_through == 40
        nu.outbound.level1(nu.fence.epoch, Checkpoint(80, 0))
        assert nu.outbound.oqu.trimmed_through == 40  # bounded: 41-80 are not cut yet
        nu.handle_register_standby(m.RegisterStandby(node="N2", address="s2"))
        nu.outbound.backup.loop()  # the resync
        nu.outbound.backup.loop()
        assert nu.outbound.backup.batcher.skipped == 0 and s2.inbound.received_through == 80
        assert s2.counters["backup_tuples"] == 80
        assert not any(k.startswith("backup_error") for k in nu.counters) and not s2.errors
    finally:
        nu.stop()
        s2.stop()


def test_a_standby_behind_the_trim_point_skips_to_the_checkpoint_its_first_run_carries(net):
    """After a resync, a standby that holds less than Nu's trim point must skip ahead. Cut from the trim point
    (behind the checkpoint) with the newest checkpoint, the run was a skip into covered positions, refused
    as a gap while the standby's last heartbeat of the primary was older than that checkpoint (at nearly
    every start). Nu now cuts from its checkpoint and sends that checkpoint with the run, even when a newer
    one came meanwhile: an ordinary jump, which needs no heartbeat."""
    from lazystandby.core.messages import Checkpoint

    s2 = OperatorNode(NodeConfig(role="standby", listen="s2"), Selection("price > 100"), net.peer)
    net.register("s2", s2)
    nu = upstream_holding(net.peer, "s2")
    try:
        assert s2.standby_side.primary_received == 0  # no heartbeat yet: no checkpoint is vouched for
        nu.outbound.oqu.trim(20)
        nu.outbound.checkpoint = Checkpoint(30, 12)  # the trim point lags the checkpoint
        nu.handle_register_standby(m.RegisterStandby(node="N2", address="s2"))
        nu.outbound.backup.loop()  # the resync: the standby holds nothing
        assert nu.outbound.backup.batcher.batched_through == 30
        nu.outbound.checkpoint = Checkpoint(35, 14)  # a newer Level-1 ack before the run is cut
        nu.outbound.backup.loop()
        assert not s2.errors and not any(k.startswith("backup_error") for k in nu.counters)
        assert s2.inbound.received_through == 40 and s2.counters["backup_tuples"] == 10 and s2.counters["jumps"] == 1
    finally:
        nu.stop()
        s2.stop()


def test_a_checkpoint_past_the_last_whole_batch_skips_the_remainder_for_good(fed_standby):
    """Fewer than Bsize tuples wait for their batch when a Level-1 ack covers them: the frame without batches
    that carries it makes the standby skip past them. Cut into the next run instead, they would repeat what
    the standby had skipped: refused (ALREADY_EXISTS), and a resync, at low rates."""
    from lazystandby.core.messages import Checkpoint

    s2, nu = fed_standby
    s2.standby_side.primary_received = 1000
    fill(nu, 15)
    nu.outbound.backup.loop()
    assert s2.inbound.received_through == 10  # one whole batch; 11..15 wait for theirs
    nu.outbound.level1(1, Checkpoint(15, 7))
    nu.outbound.backup.next_checkpoint_at = 0.0
    nu.outbound.backup.loop()
    assert s2.inbound.received_through == 15
    assert nu.outbound.backup.batcher.batched_through == 15 and nu.outbound.backup.batcher.skipped == 5
    fill(nu, 25)
    nu.outbound.backup.loop()
    assert s2.inbound.received_through == 25 and not s2.errors
    assert not any(k.startswith("backup_error") for k in nu.counters)


def test_a_standby_that_missed_the_trim_while_unreachable_gets_an_ordinary_jump(net, fed_standby):
    """While the standby does not answer, Level-1 acks trim OQu past what it holds. The retry (no resync:
    the standby was only unreachable) must not cut from the trim point with the newest checkpoint, which a
    bounded trim has left behind: that is a skip into covered positions, refused as a gap (OUT_OF_RANGE) while the
    standby's last heartbeat of the primary was older than that checkpoint, then a resync and a new codec
    session. Nu skips the batcher to its checkpoint and sends that checkpoint with the run."""
    from lazystandby.core.messages import Checkpoint

    s2, nu = fed_standby
    fill(nu, 10)
    nu.outbound.backup.loop()
    assert s2.inbound.received_through == 10
    fill(nu, 40)
    net.down("s2")
    nu.outbound.backup.loop()
    assert nu.counters["backup_error_unavailable"] == 1
    nu.outbound.level1(1, Checkpoint(30, 12))  # the standby is not answering: the trim is not held back
    assert nu.outbound.oqu.trimmed_through == 30
    net.up("s2")
    nu.outbound.backup.retry_at = 0.0
    nu.outbound.level1(1, Checkpoint(35, 14))  # bounded again: the trim point stays behind the checkpoint
    # No heartbeat vouches for 35.
    assert nu.outbound.oqu.trimmed_through == 30 and s2.standby_side.primary_received == 0
    fill(nu, 55)
    nu.outbound.backup.loop()  # 36..45 is not a whole batch yet: the checkpoint alone, deferred by the standby
    nu.outbound.backup.loop()
    assert not s2.errors and not any(k.startswith("backup_error_out") for k in nu.counters)
    assert s2.inbound.received_through == 55 and s2.counters["jumps"] == 1
    assert s2.counters["backup_tuples"] == 30  # 1..10, then 36..55: the two whole batches after the checkpoint


def test_a_standby_that_stops_answering_stops_holding_the_pipeline_back(net):
    """A paused standby's backup call hangs until rpc_timeout (2 s), then its retry hangs as long. While
    the call is in flight the standby counts as responsive, so the source waited for it (backup_lag_max)
    and OQu's trim was held at what was cut for it: at full speed the pipeline stopped for 1.7 s of every
    2. After backup_stall_max Nu now counts it out of sync until a call succeeds (a timed-out call does not
    bring it back); when it answers, it skips to the checkpoint and is bounded again."""
    from lazystandby.core.messages import Checkpoint
    from lazystandby.node.upstream import UpstreamNode
    from lazystandby.sources.base import GeneratorSource

    s2 = OperatorNode(NodeConfig(role="standby", listen="s2"), Selection("price > 100"), net.peer)
    net.register("s2", s2)
    held: list[HeldCall] = []

    class Stalling(PeerBase):
        address = "s2"

        def backup_async(self, msg, timeout):
            held.append(HeldCall(lambda: net.peer("s2").backup(msg, timeout)))
            return held[-1]

    now = [100.0]
    cfg = NodeConfig(role="upstream", listen="nu", primary="n", standby="s2", bsize="10", backup_linger_ms=0,
                     backup_lag_max=30, backup_stall_max=0.5)
    nu = UpstreamNode(cfg, GeneratorSource(["I1", "I2"], total=0, rate=0.0),
                      lambda a: Stalling() if a == "s2" else net.peer(a), clock=lambda: now[0])
    try:
        fill(nu, 20)
        nu.outbound.backup.loop()  # 1..20 sent; no answer
        nu.source.total = 100
        for _ in range(20):
            nu._source_loop()
        # backup_lag_max: the source waits for the standby.
        assert nu.outbound.oqu.last == 30 and nu.outbound.backup.room() == 0
        nu.outbound.level1(1, Checkpoint(25, 10))
        assert nu.outbound.oqu.trimmed_through == 20  # held at what was cut for the standby
        now[0] += 0.6
        assert nu.outbound.backup.room() > 1000 and nu.counters["standby_out_of_sync"] == 1
        assert nu.snapshot()["standby_in_sync"] is False
        fill(nu, 60)
        nu.outbound.level1(1, Checkpoint(50, 20))
        assert nu.outbound.oqu.trimmed_through == 50  # the trim no longer waits either
        held[0].fail("DEADLINE_EXCEEDED")
        nu.outbound.backup.loop()
        now[0] += 0.3  # past the retry delay: a resync call goes, and hangs as well
        nu.outbound.backup.loop()
        assert held[-1].call is not None and not held[-1].answered and len(held) == 2
        assert nu.outbound.backup.room() > 1000 and nu.counters["standby_out_of_sync"] == 1  # still out of sync
        held[-1].answer()
        nu.outbound.backup.loop()  # the resync: the standby holds 20, behind the trim point
        assert nu.snapshot()["standby_in_sync"] is True
        nu.outbound.backup.loop()
        held[-1].answer()
        nu.outbound.backup.loop()
        assert s2.inbound.received_through == 60 and s2.counters["jumps"] == 1 and not s2.errors
        assert nu.outbound.backup.room() == 30  # bounded again
    finally:
        nu.stop()
        s2.stop()


def test_a_standby_registers_over_a_new_channel_after_each_refusal(caplog):
    """gRPC keeps a refused channel in its reconnect backoff (up to 500 ms) and fails calls fast meanwhile:
    a standby started before Nu registered up to 0.3 s after Nu listened, and a fresh Nu holds its source
    until it does. Each refusal gets a new channel; a timeout (Nu there but slow) keeps the one it has."""
    made: list = []

    class Upstream(PeerBase):
        def __init__(self, address, fails):
            self.address, self.fails, self.closed = address, fails, False

        def _call(self, rpc, msg, timeout):
            assert rpc == "RegisterStandby" and not self.closed
            if self.fails:
                self.fails.pop(0)()
            return m.RegisterStandbyReply(epoch=3, primary_address="n")

        def close(self):
            self.closed = True

    def refused():
        raise PeerError("UNAVAILABLE", "nu RegisterStandby: Connection refused", refused=True)

    def slow():
        raise PeerError("DEADLINE_EXCEEDED", "nu RegisterStandby: deadline exceeded")

    plan = [[refused], [slow, slow, refused], []]  # what each channel to Nu does, in the order they are made

    def peers(address):
        if address != "nu":
            return MemoryNetwork().peer(address)
        made.append(Upstream(address, plan[len(made)]))
        return made[-1]

    n = OperatorNode(NodeConfig(role="standby", listen="s", upstream="nu"), Selection("price > 100"), peers)
    try:
        with caplog.at_level("INFO"):
            n.standby_side.register_with_upstream()
        # One line per change of the failure, not one per try.
        said = [r.getMessage().split(" (")[1].split(":")[0] for r in caplog.records
                if "registering with Nu failed" in r.getMessage()]
        assert said == ["UNAVAILABLE", "DEADLINE_EXCEEDED", "UNAVAILABLE"]
        assert n.standby_side.registered.is_set() and n.state.fence.epoch == 3 and n.standby_side.primary.address == "n"
        assert len(made) == 3 and [p.closed for p in made] == [True, True, False] and n.upstream is made[2]
        assert not made[1].fails  # the timeout was retried on the same channel, the refusal on a new one
    finally:
        n.stop()


def test_a_registered_standby_warms_its_channel_to_nd_before_any_takeover_needs_it(net):
    """Its first call to Nd is its takeover's: the connection (a TLS handshake on gRPC) is made at its
    registration instead, once Nu answered, and no call goes to Nd meanwhile."""
    calls: list[str] = []

    class Downstream(PeerBase):
        address = "nd"

        def _call(self, rpc, msg, timeout):
            calls.append(rpc)

        def warm(self):
            calls.append("warm")

    class Upstream(PeerBase):
        address = "nu"

        def _call(self, rpc, msg, timeout):
            assert calls == []  # not warmed before Nu answered: a standby Nu refuses has no takeover to make
            return m.RegisterStandbyReply(epoch=1, primary_address="n")

    made = {"nd": Downstream(), "nu": Upstream()}
    n = OperatorNode(NodeConfig(role="standby", listen="s", upstream="nu", downstream="nd"), Selection("price > 100"),
                     lambda a: made.get(a) or net.peer(a))
    try:
        n.standby_side.register_with_upstream()
        assert n.standby_side.registered.is_set() and calls == ["warm"]
    finally:
        n.stop()


def test_a_standby_that_is_gone_is_not_reported_in_sync(net):
    """A killed standby's backup calls fail at once (UNAVAILABLE): no call waits for backup_stall_max, yet
    Nu's status must not say it is in sync while its link is down; answered again, it is."""
    from lazystandby.node.upstream import UpstreamNode
    from lazystandby.sources.base import GeneratorSource

    s2 = OperatorNode(NodeConfig(role="standby", listen="s2"), Selection("price > 100"), net.peer)
    net.register("s2", s2)
    cfg = NodeConfig(role="upstream", listen="nu", primary="n", standby="s2", bsize="10", backup_linger_ms=0)
    nu = UpstreamNode(cfg, GeneratorSource(["I1", "I2"], total=0, rate=0.0), net.peer)
    try:
        fill(nu, 20)
        nu.outbound.backup.loop()
        assert nu.snapshot()["standby_in_sync"] is True
        net.down("s2")
        fill(nu, 40)
        nu.outbound.backup.loop()
        snap = nu.snapshot()
        assert snap["peers"]["standby"]["alive"] is False and snap["standby_in_sync"] is False
    finally:
        nu.stop()


def test_a_takeover_ends_nus_backoff_after_failed_pushes_at_once(net):
    """Nu backs off after failed pushes to a dead primary (up to half a second); the takeover's new
    generation ends the wait, so the new primary's resend does not wait it out."""
    import threading
    import time

    from lazystandby.core.errors import PeerError, Status

    nu = upstream_holding(net.peer, "s2", total=40)
    try:
        for _ in range(6):
            nu.outbound.push._backoff.next()  # 0.32 s next
        gen = nu.outbound.push.generation
        t = threading.Timer(0.05, lambda: (nu.lock.acquire(), setattr(nu.outbound.push, "generation", gen + 1),
                                           nu.lock.notify_all(), nu.lock.release()))
        t.start()
        t0 = time.monotonic()
        nu.outbound.push._failed(PeerError(Status.UNAVAILABLE, "refused", refused=True), gen)
        assert time.monotonic() - t0 < 0.25
        t.join()
    finally:
        nu.stop()
