"""Bad input on every RPC: a clear error naming node/stream/position, a counter, and no change of state."""


import pytest

from lazystandby.config import STANDBY_IQ_FACTOR, NodeConfig
from lazystandby.core import messages as m
from lazystandby.core import tuples
from lazystandby.core.codec import BatchEncoder, CodecName
from lazystandby.core.detector import FailureDetector
from lazystandby.core.errors import LazyStandbyError, PeerError
from lazystandby.core.roles import Role
from lazystandby.core.tuples import TupleBatch
from lazystandby.formats.ticks import Tick
from lazystandby.node.downstream import DownstreamNode
from lazystandby.node.operator_node import OperatorNode
from lazystandby.operators.selection import Selection
from lazystandby.sinks.base import MemorySink
from lazystandby.transport.memory import MemoryNetwork
from lazystandby.transport.peer import PeerBase
from lazystandby.transport.wire import codec_to_pb
from lazystandby.v1 import lazystandby_pb2 as pb


def run(first, n, stream=1, seq0=None, payload=None):
    seq0 = first if seq0 is None else seq0
    p = payload or Tick("ACME", 150.0, 100, 1, "XTKS").encode()
    return TupleBatch(first=first, streams=[stream] * n, seqs=list(range(seq0, seq0 + n)), payloads=[p] * n)


def frame(batch, epoch=1, checkpoint=(0, 0)):
    return pb.Frame(epoch=epoch, sender="Nu", first_pos=batch.first, count=len(batch), tuples=tuples.encode(batch),
                    checkpoint=pb.Level1Ack(epoch=epoch, input_pos=checkpoint[0], output_count=checkpoint[1]))


@pytest.fixture
def net():
    return MemoryNetwork()


@pytest.fixture
def primary(net):
    cfg = NodeConfig(role="primary", listen="n", max_tuple_bytes=200, iq_capacity=100)
    n = OperatorNode(cfg, Selection("price > 100"), net.peer)
    net.register("n", n)
    yield n
    n.stop()


def state(n):
    return (n.received_through, len(n.iq), dict(n.seqcheck.last), n.state.role, n.state.epoch)


def push(net, msg):
    return net.call_pb("n", "Push", msg)  # protobuf as it arrives on the wire: a peer may send any bytes


def test_good_frames_are_queued_and_acked(net, primary):
    ack = push(net, frame(run(1, 5)))
    assert ack.received_through == 5 and len(primary.iq) == 5


CASES = {
    "gap": (lambda: frame(run(8, 2)), "OUT_OF_RANGE", "sequence_gap", "position 8 skips ahead; expected 6"),
    "repeat": (lambda: frame(run(3, 2)), "ALREADY_EXISTS", "duplicate_sequence", "expected 6"),
    "seq repeated in stream": (lambda: frame(run(6, 2, seq0=5)), "ALREADY_EXISTS", "duplicate_sequence",
                               "stream 1 repeated seq 5"),
    "seq going back": (lambda: frame(run(6, 2, seq0=2)), "INVALID_ARGUMENT", "non_monotonic_sequence",
                       "seq went back to 2"),
    "unknown stream": (lambda: frame(run(6, 2, stream=9, seq0=1)), "INVALID_ARGUMENT", "unknown_stream",
                       "unknown stream id 9 at seq 1"),
    "oversized tuple": (lambda: frame(run(6, 1, payload=b"x" * 500)), "RESOURCE_EXHAUSTED", "oversized",
                        "500-byte tuple"),
    "corrupt bytes": (lambda: pb.Frame(epoch=1, first_pos=6, count=2, tuples=b"LSB1garbage"), "DATA_LOSS",
                      "corrupt_batch", "frame 6"),
    "count mismatch": (lambda: pb.Frame(epoch=1, first_pos=6, count=3, tuples=tuples.encode(run(6, 2))),
                       "DATA_LOSS", "corrupt_batch", "says 3 tuples from 6"),
    "stale epoch": (lambda: frame(run(6, 2), epoch=0), "ABORTED", "stale_epoch", "epoch 0"),
    "IQ full": (lambda: frame(run(6, 150)), "RESOURCE_EXHAUSTED", "queue_full", "IQ full"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_frames_are_refused_precisely_and_change_nothing(net, primary, case):
    make, status, counter, text = CASES[case]
    push(net, frame(run(1, 5)))
    before = state(primary)
    with pytest.raises(PeerError) as e:
        push(net, make())
    assert e.value.status == status
    assert text in e.value.message and "N" in e.value.message
    assert primary.errors[counter] == 1
    assert state(primary) == before
    assert push(net, frame(run(6, 2))).received_through == 7  # and the node carries on


def test_a_frame_with_a_newer_epoch_moves_nothing(net, primary):
    """Only a takeover moves an epoch: a Push claiming epoch 2 (from any client) neither fences the primary
    nor changes its epoch; it is refused as an epoch no takeover made."""
    before = state(primary)
    with pytest.raises(PeerError) as e:
        push(net, frame(run(1, 2), epoch=2))
    assert e.value.status == "FAILED_PRECONDITION" and "no takeover it knows of made epoch 2" in e.value.message
    assert state(primary) == before and primary.state.role == "primary" and primary.errors["unknown_epoch"] == 1
    assert push(net, frame(run(1, 2))).received_through == 2


def test_a_frame_may_skip_only_what_its_checkpoint_covers(net, primary):
    push(net, frame(run(1, 5)))
    with pytest.raises(PeerError):
        push(net, frame(run(21, 2), checkpoint=(19, 3)))
    ack = push(net, frame(run(21, 2), checkpoint=(20, 4)))
    assert ack.received_through == 22 and primary.counters["jumps"] == 1


def test_rpcs_of_other_roles_are_refused(net, primary):
    with pytest.raises(PeerError) as e:
        net.call_pb("n", "Backup", pb.BackupFrame(epoch=1))
    assert e.value.status == "FAILED_PRECONDITION" and "role primary" in e.value.message


@pytest.fixture
def standby(net):
    # Processes what it receives at once (standby_defer 0): these tests call its operator loop once.
    n = OperatorNode(NodeConfig(role="standby", listen="s", standby_defer=0), Selection("price > 100"), net.peer)
    net.register("s", n)
    yield n
    n.stop()


def backup_frame(enc, batches):
    msgs = []
    for b in batches:
        e = enc.encode(tuples.encode(b))
        msgs.append(pb.BackupBatch(first_pos=b.first, count=len(b), codec=codec_to_pb(e.codec), session=e.session,
                                   index=e.index, payload=e.payload, raw_bytes=e.raw_bytes))
    return pb.BackupFrame(epoch=1, sender="Nu", batches=msgs)


def test_standby_applies_batches_and_refuses_a_corrupt_one_without_change(net, standby):
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    assert net.call_pb("s", "Backup", backup_frame(enc, [run(1, 5), run(6, 5)])).applied_through == 10
    before = state(standby)
    bad = backup_frame(enc, [run(11, 5)])
    bad.batches[0].payload = b"\x00" * len(bad.batches[0].payload)
    with pytest.raises(PeerError) as e:
        net.call_pb("s", "Backup", bad)
    assert e.value.status == "DATA_LOSS" and "session" in e.value.message
    assert state(standby) == before and standby.errors["corrupt_batch"] == 1
    enc.reset()  # what Nu does after any refused batch
    assert net.call_pb("s", "Backup", backup_frame(enc, [run(11, 5)])).applied_through == 15


def test_standby_refuses_push_until_promoted(net, standby):
    with pytest.raises(PeerError) as e:
        net.call_pb("s", "Push", frame(run(1, 1)))
    assert e.value.status == "FAILED_PRECONDITION"


@pytest.fixture
def nd(net):
    """Nd on a clock the test moves (`nd.tick(s)`): its primary's lease runs out only when told."""
    now = [0.0]
    sink = MemorySink()
    d = DownstreamNode(NodeConfig(role="downstream", listen="nd"), sink, clock=lambda: now[0])
    d.tick = lambda s: now.__setitem__(0, now[0] + s)
    net.register("nd", d)
    return d


def out_frame(first, n, epoch=1, sender=None):
    """An output frame from the primary of `epoch`: N in epoch 1, then N' (which took over)."""
    r = run(first, n)
    b = TupleBatch(r.first, r.streams, r.seqs, r.payloads, sources=list(range(first, first + n)))
    return pb.OutputFrame(epoch=epoch, sender=sender or ("N" if epoch == 1 else "N'"), first_oseq=first, count=n,
                          tuples=tuples.encode(b))


def test_nd_drops_repeats_refuses_gaps_and_fences_old_epochs(net, nd):
    assert net.call_pb("nd", "Deliver", out_frame(1, 5)).received_through == 5
    assert net.call_pb("nd", "Deliver", out_frame(3, 5)).received_through == 7
    assert nd.counters["duplicates_dropped"] == 3 and len(nd.sink.rows) == 7
    with pytest.raises(PeerError) as e:
        net.call_pb("nd", "Deliver", out_frame(9, 1))
    assert e.value.status == "OUT_OF_RANGE" and "expected 8" in e.value.message
    nd.tick(0.1)  # N's lease has run out
    assert net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="N'", epoch=2)).delivered_through == 7
    with pytest.raises(PeerError) as e:
        net.call_pb("nd", "Deliver", out_frame(8, 1, epoch=1))
    assert e.value.status == "ABORTED" and len(nd.sink.rows) == 7
    assert net.call_pb("nd", "Deliver", out_frame(8, 1, epoch=2)).received_through == 8


def test_every_protocol_error_has_a_status_the_transport_knows():
    import grpc

    for cls in LazyStandbyError.__subclasses__():
        assert hasattr(grpc.StatusCode, cls.status.value), cls


def test_nd_refuses_a_takeover_that_does_not_bring_a_newer_epoch(net, nd):
    net.call_pb("nd", "Deliver", out_frame(1, 2, epoch=1))
    with pytest.raises(PeerError) as e:
        net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="N'", epoch=1))
    assert e.value.status == "ABORTED"
    nd.tick(0.1)
    assert net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="N'", epoch=2)).delivered_through == 2
    retry = pb.TakeoverRequest(node="N'", epoch=2)
    assert net.call_pb("nd", "Takeover", retry).delivered_through == 2  # a retry is fine


def test_nd_declines_a_takeover_while_its_primary_still_delivers_and_takes_it_once_the_lease_runs_out(net, nd):
    """A standby that stopped hearing a primary which still delivers lost its primary, not the pipeline."""
    net.call_pb("nd", "Deliver", out_frame(1, 2, epoch=1))
    nd.tick(0.05)
    net.call_pb("nd", "Deliver", pb.OutputFrame(epoch=1, sender="N"))  # an idle primary's empty frame renews it
    nd.tick(0.05)
    with pytest.raises(PeerError) as e:
        net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="N'", epoch=2))
    assert e.value.status == "FAILED_PRECONDITION" and "N delivered 50 ms ago" in e.value.message
    assert nd.fence.epoch == 1 and nd.primary_node == "N" and nd.counters["takeovers"] == 0
    assert net.call_pb("nd", "Deliver", out_frame(3, 1, epoch=1)).received_through == 3  # N goes on
    # A delivery Nd refused (another sender) renews nothing.
    nd.tick(0.07)
    with pytest.raises(PeerError):
        net.call_pb("nd", "Deliver", out_frame(4, 1, epoch=1, sender="X"))
    nd.tick(0.01)
    assert net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="N'", epoch=2)).delivered_through == 3
    # The new primary holds the lease now: a third node is declined, the winner's retry is not.
    with pytest.raises(PeerError) as e:
        net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="X", epoch=3))
    assert e.value.status == "FAILED_PRECONDITION"
    assert net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="N'", epoch=2)).delivered_through == 3


def test_past_the_lease_nd_declines_a_standby_that_has_not_heard_a_primary_nd_heard_since(net, nd):
    """The primary's frame came 100 ms ago (past the 75 ms lease: a busy machine). A standby that says it
    has not heard the primary for 300 ms is cut off from a primary that lives: declined. One that says 150
    ms (a suspicion by refusals, or a crash: the frame is about as old as that) is taken."""
    net.call_pb("nd", "Deliver", out_frame(1, 2, epoch=1))
    nd.tick(0.1)
    with pytest.raises(PeerError) as e:
        net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="N'", epoch=2, primary_unheard_ms=300))
    assert e.value.status == "FAILED_PRECONDITION" and "cut off from a primary that lives" in e.value.message
    assert nd.fence.epoch == 1 and nd.counters["takeovers"] == 0
    assert nd.snapshot()["errors"] == {"takeover_declined_unheard": 1}  # apart from the lease's declines
    assert net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="N'", epoch=2,
                                                            primary_unheard_ms=150)).delivered_through == 2


def test_a_standby_says_how_long_it_has_surely_not_heard_its_primary():
    """Since its last good heartbeat, less one interval; nothing when it has heard no answer yet."""
    from lazystandby.core.recovery import RecoveryTimes

    s = OperatorNode(NodeConfig(role="standby", name="N'", listen="s", heartbeat_interval=0.2,
                                heartbeat_misses=5), Selection("price > 100"), MemoryNetwork().peer)
    s.detector = FailureDetector(0.2, 5, now=0.0)
    assert s._unheard_ms(RecoveryTimes(last_ok=0.0, detected=1.0)) == 0  # never heard
    s.detector.ok(0.5, 0.001)
    assert s._unheard_ms(RecoveryTimes(last_ok=0.5, detected=1.5)) == 800
    assert s._unheard_ms(RecoveryTimes(last_ok=0.5, detected=0.6)) == 0  # within an interval: says nothing


def test_a_takeover_queued_behind_a_slow_delivery_finds_the_lease_renewed_by_it(net):
    """The primary waits for Nd's reply before its next frame: a sink that took longer than the lease (a
    results topic's flush on a busy machine) is Nd's time, not the primary's silence. Renewed at arrival
    alone, the takeover that waited for the node lock meanwhile deposed a primary that was delivering."""
    now = [0.0]

    class SlowSink(MemorySink):
        def append(self, outputs, *, epoch=0):
            now[0] += 0.2  # the flush: longer than the 75 ms lease
            super().append(outputs, epoch=epoch)

    d = DownstreamNode(NodeConfig(role="downstream", listen="nd1"), SlowSink(), clock=lambda: now[0])
    net.register("nd1", d)
    net.call_pb("nd1", "Deliver", out_frame(1, 2, epoch=1))
    with pytest.raises(PeerError) as e:
        net.call_pb("nd1", "Takeover", pb.TakeoverRequest(node="N'", epoch=2))
    assert e.value.status == "FAILED_PRECONDITION" and "N delivered 0 ms ago" in e.value.message
    assert d.fence.epoch == 1 and d.counters["takeovers"] == 0
    # Silent past the lease after that reply, the primary is deposed, and Nd says for how long it was.
    now[0] += 0.1
    assert net.call_pb("nd1", "Takeover", pb.TakeoverRequest(node="N'", epoch=2)).delivered_through == 2
    assert d.takeovers.last.facts["primary_silent_ms"] == pytest.approx(100.0)


def test_an_idle_primary_renews_its_lease_three_times_per_lease_and_on_time(net, nd):
    """Empty frames every third of the lease (or ack_poll_ms, if shorter), and at the deadline: a notify
    just before it (an ack, an output) once made the loop wait a whole interval more."""
    assert NodeConfig(takeover_lease=0.075).idle_frame_s == pytest.approx(0.025)
    assert NodeConfig(heartbeat_interval=0.2).idle_frame_s == pytest.approx(0.05)  # auto: 150 ms, so ack_poll_ms
    assert NodeConfig(takeover_lease=0).idle_frame_s == 0.05  # no lease: ack_poll_ms
    now = [10.0]
    n = OperatorNode(NodeConfig(role="primary", name="N", listen="n", downstream="nd", takeover_lease=0.075),
                     Selection("price > 100"), net.peer, clock=lambda: now[0])
    net.register("n", n)
    try:
        n._output_loop()  # the first frame: a resync
        waits = []

        def wait(timeout=None):  # a notify 20 ms in, then nothing: time passes as far as the wait asked
            waits.append(timeout)
            now[0] += 0.02 if len(waits) == 1 else timeout
        n.lock.wait = wait
        nd.tick(1.0)
        sent_at = now[0]
        n._output_loop()
        assert now[0] - sent_at == pytest.approx(0.025) and waits == pytest.approx([0.025, 0.005])
        assert nd.counters["takeovers"] == 0 and nd.lease.renewed_at == nd.clock()
    finally:
        n.stop()


def test_with_no_lease_nd_takes_any_newer_epoch_at_once(net):
    d = DownstreamNode(NodeConfig(role="downstream", listen="nd0", takeover_lease=0), MemorySink(), clock=lambda: 0.0)
    net.register("nd0", d)
    net.call_pb("nd0", "Deliver", out_frame(1, 2, epoch=1))
    assert net.call_pb("nd0", "Takeover", pb.TakeoverRequest(node="N'", epoch=2)).delivered_through == 2
    assert d.snapshot()["takeover_lease_ms"] == 0.0  # what launch's summary reports: Nd's lease, not a default


def test_a_declined_standby_withdraws_its_epoch_and_keeps_taking_the_backup(net, nd):
    net.call_pb("nd", "Deliver", out_frame(1, 2, epoch=1))
    s = OperatorNode(NodeConfig(role="standby", listen="s", downstream="nd", upstream="nu"), Selection("price > 1"),
                     net.peer)
    s.state.fence.advance(1)
    unsealed = []
    s._unseal = lambda: unsealed.append(1)
    s.take_over()
    assert s.state.role == "standby" and s.state.epoch == 1
    assert s.counters["takeovers_declined"] == 1 and s.counters["takeovers"] == 0
    assert unsealed == []  # declined at Nd's first answer: nothing held was decoded for it
    assert nd.fence.epoch == 1 and nd.primary_node == "N"
    s._check_epoch(1, "Nu", "backup")  # Nu's backup in the epoch in force is taken again
    nd.tick(0.1)  # N went silent: the next suspicion reaches Nd and takes over there
    nd.handle_takeover(m.TakeoverRequest(node="N'", epoch=2, address="s"))
    assert nd.fence.epoch == 2 and nd.primary_node == "N'"
    s.stop()


def test_a_standby_with_a_stale_epoch_steps_back_instead_of_fencing_itself(net, nd):
    net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="X", epoch=3))
    s = OperatorNode(NodeConfig(role="standby", listen="s", downstream="nd", upstream="nu"), Selection("price > 1"),
                     net.peer)
    s.state.fence.advance(1)
    s.take_over()
    assert s.state.role == "standby" and s.state.epoch == 3
    assert s.counters["takeovers_refused"] == 1
    s.stop()


def upstream_holding(peers, standby, total=40, **settings):
    """A Nu with `total` tuples admitted into OQu, driven by hand (no threads) against standby `standby`."""
    from lazystandby.node.upstream import UpstreamNode
    from lazystandby.sources.base import GeneratorSource

    cfg = NodeConfig(role="upstream", listen="nu", primary="n", standby=standby, bsize="10", **settings)
    nu = UpstreamNode(cfg, GeneratorSource(["I1", "I2"], total=total, rate=0.0), peers)
    while nu.oqu.last < total:
        nu._source_loop()
    return nu


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

        def close(self):
            pass

    def peers(addr):
        return Replaced() if addr == "s1" else net.peer(addr)

    nu = upstream_holding(peers, "s1")
    nu_box.append(nu)
    try:
        nu._backup_loop()  # goes to s1, which is replaced mid-call
        assert nu.counters["backup_error_cancelled"] == 1
        assert nu.standby.address == "s2" and nu.standby_retry_at == 0.0 and nu._resync_backup
        nu._backup_loop()  # asks the newcomer where it stands: nowhere
        nu._backup_loop()
        assert newcomer.counters["backup_tuples"] == 40 and newcomer.received_through == 40
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
        nu._backup_loop()
        assert s2.received_through == 40
        nu.handle_register_standby(m.RegisterStandby(node="N2", address="s2"))
        assert nu._resync_backup
        nu._backup_loop()  # the resync: N' answers 40, and Nu cuts on from there
        assert not nu._resync_backup and nu.batcher.batched_through == 40
        assert not any(k.startswith("backup_error") for k in nu.counters) and not s2.errors
        assert s2.received_through == 40 and s2.counters["backup_tuples"] == 40
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
        nu._backup_loop()  # 1-40 in flight
        nu._apply_level1(nu.fence.epoch, Checkpoint(80, 0))  # Nd holds all 80 outputs: OQu may trim what is cut
        nu._backup_loop()  # 41-80 cut (and trimmed); 1-40 answered after the registration
        assert box[1] and nu.counters["standby_registrations"] == 1
        for _ in range(3):
            nu._backup_loop()  # 41-80 sent, then the resync
        assert nu.batcher.skipped == 0 and nu.batcher.confirmed_through == 80
        assert s2.received_through == 80 and s2.counters["backup_tuples"] == 80
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
        nu._backup_loop()
        assert s2.received_through == 40
        nu._apply_level1(nu.fence.epoch, Checkpoint(80, 0))
        assert nu.oqu.trimmed_through == 40  # bounded: 41-80 are not cut yet
        nu.handle_register_standby(m.RegisterStandby(node="N2", address="s2"))
        nu._backup_loop()  # the resync
        nu._backup_loop()
        assert nu.batcher.skipped == 0 and s2.received_through == 80 and s2.counters["backup_tuples"] == 80
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
        assert s2.primary_received == 0  # no heartbeat yet: no checkpoint is vouched for
        nu.oqu.trim(20)
        nu.checkpoint = Checkpoint(30, 12)  # the trim point lags the checkpoint
        nu.handle_register_standby(m.RegisterStandby(node="N2", address="s2"))
        nu._backup_loop()  # the resync: the standby holds nothing
        assert nu.batcher.batched_through == 30
        nu.checkpoint = Checkpoint(35, 14)  # a newer Level-1 ack before the run is cut
        nu._backup_loop()
        assert not s2.errors and not any(k.startswith("backup_error") for k in nu.counters)
        assert s2.received_through == 40 and s2.counters["backup_tuples"] == 10 and s2.counters["jumps"] == 1
    finally:
        nu.stop()
        s2.stop()


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
    while nu.oqu.last < through:
        nu._source_loop()


def test_a_checkpoint_past_the_last_whole_batch_skips_the_remainder_for_good(fed_standby):
    """Fewer than Bsize tuples wait for their batch when a Level-1 ack covers them: the frame without batches
    that carries it makes the standby skip past them. Cut into the next run instead, they would repeat what
    the standby had skipped: refused (ALREADY_EXISTS), and a resync, at low rates."""
    from lazystandby.core.messages import Checkpoint

    s2, nu = fed_standby
    s2.primary_received = 1000
    fill(nu, 15)
    nu._backup_loop()
    assert s2.received_through == 10  # one whole batch; 11..15 wait for theirs
    nu._apply_level1(1, Checkpoint(15, 7))
    nu._next_checkpoint_at = 0.0
    nu._backup_loop()
    assert s2.received_through == 15 and nu.batcher.batched_through == 15 and nu.batcher.skipped == 5
    fill(nu, 25)
    nu._backup_loop()
    assert s2.received_through == 25 and not s2.errors
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
    nu._backup_loop()
    assert s2.received_through == 10
    fill(nu, 40)
    net.down("s2")
    nu._backup_loop()
    assert nu.counters["backup_error_unavailable"] == 1
    nu._apply_level1(1, Checkpoint(30, 12))  # the standby is not answering: the trim is not held back
    assert nu.oqu.trimmed_through == 30
    net.up("s2")
    nu.standby_retry_at = 0.0
    nu._apply_level1(1, Checkpoint(35, 14))  # bounded again: the trim point stays behind the checkpoint
    assert nu.oqu.trimmed_through == 30 and s2.primary_received == 0  # no heartbeat vouches for 35
    fill(nu, 55)
    nu._backup_loop()  # 36..45 is not a whole batch yet: the checkpoint alone, deferred by the standby
    nu._backup_loop()
    assert not s2.errors and not any(k.startswith("backup_error_out") for k in nu.counters)
    assert s2.received_through == 55 and s2.counters["jumps"] == 1
    assert s2.counters["backup_tuples"] == 30  # 1..10, then 36..55: the two whole batches after the checkpoint


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
        nu._backup_loop()  # 1..20 sent; no answer
        nu.source.total = 100
        for _ in range(20):
            nu._source_loop()
        assert nu.oqu.last == 30 and nu._backup_room() == 0  # backup_lag_max: the source waits for the standby
        nu._apply_level1(1, Checkpoint(25, 10))
        assert nu.oqu.trimmed_through == 20  # held at what was cut for the standby
        now[0] += 0.6
        assert nu._backup_room() > 1000 and nu.counters["standby_out_of_sync"] == 1
        assert nu.snapshot()["standby_in_sync"] is False
        fill(nu, 60)
        nu._apply_level1(1, Checkpoint(50, 20))
        assert nu.oqu.trimmed_through == 50  # the trim no longer waits either
        held[0].fail("DEADLINE_EXCEEDED")
        nu._backup_loop()
        now[0] += 0.3  # past the retry delay: a resync call goes, and hangs as well
        nu._backup_loop()
        assert held[-1].call is not None and not held[-1].answered and len(held) == 2
        assert nu._backup_room() > 1000 and nu.counters["standby_out_of_sync"] == 1  # still out of sync
        held[-1].answer()
        nu._backup_loop()  # the resync: the standby holds 20, behind the trim point
        assert nu.snapshot()["standby_in_sync"] is True
        nu._backup_loop()
        held[-1].answer()
        nu._backup_loop()
        assert s2.received_through == 60 and s2.counters["jumps"] == 1 and not s2.errors
        assert nu._backup_room() == 30  # bounded again
    finally:
        nu.stop()
        s2.stop()


@pytest.mark.parametrize("rpc", ["Push", "Backup", "Deliver", "Heartbeat", "Takeover", "RegisterStandby",
                                 "Handover"])
def test_bytes_that_are_not_protobuf_get_invalid_argument_and_one_log_line(net, primary, rpc, caplog):
    caplog.set_level("WARNING", logger="lazystandby")
    for _ in range(3):
        with pytest.raises(PeerError) as e:
            net.call_bytes("n", rpc, b"\xff\xff\xff not protobuf")
        assert e.value.status == "INVALID_ARGUMENT" and "is not a protobuf" in e.value.message
    assert primary.errors["malformed_message"] == 3
    lines = [r for r in caplog.records if "not a protobuf" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelname == "WARNING"  # one line, however many calls


def test_an_unknown_codec_enum_is_invalid_argument_and_changes_nothing(net, standby):
    enc = BatchEncoder(CodecName.ZSTD)
    bad = backup_frame(enc, [run(1, 5)])
    bad.batches[0].codec = 42
    with pytest.raises(PeerError) as e:
        net.call_pb("s", "Backup", bad)
    assert e.value.status == "INVALID_ARGUMENT" and "unknown codec 42" in e.value.message
    assert standby.received_through == 0 and standby.decoder.session == 0


def test_a_forged_delivery_with_a_newer_epoch_does_not_fence_the_primary(net, nd):
    """A Deliver claiming epoch 2 with no tuples must not make Nd adopt epoch 2 and refuse the real primary."""
    assert net.call_pb("nd", "Deliver", out_frame(1, 3)).received_through == 3
    with pytest.raises(PeerError) as e:
        net.call_pb("nd", "Deliver", pb.OutputFrame(epoch=2, sender="mallory"))
    assert e.value.status == "FAILED_PRECONDITION" and "only a takeover moves it" in e.value.message
    assert nd.fence.epoch == 1 and nd.errors["unknown_epoch"] == 1
    assert net.call_pb("nd", "Deliver", out_frame(4, 2)).received_through == 5  # the primary carries on


def test_a_restarted_nd_keeps_the_epoch_of_its_last_output(tmp_path):
    from lazystandby.core.seq import StreamRegistry
    from lazystandby.sinks.base import FileSink

    net = MemoryNetwork()
    path = str(tmp_path / "out.tsv")
    nd = DownstreamNode(NodeConfig(role="downstream", listen="nd"), FileSink(path, StreamRegistry(["I1", "I2"])))
    net.register("nd", nd)
    net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="N'", epoch=2))
    net.call_pb("nd", "Deliver", out_frame(1, 3, epoch=2))
    nd.stop()
    again = DownstreamNode(NodeConfig(role="downstream", listen="nd"), FileSink(path, StreamRegistry(["I1", "I2"])))
    net.register("nd", again)
    assert again.fence.epoch == 2 and again.dedup.delivered_through == 3
    with pytest.raises(PeerError) as e:  # the demoted primary, resumed, is still refused
        net.call_pb("nd", "Deliver", out_frame(4, 1, epoch=1))
    assert e.value.status == "ABORTED"


def test_a_primary_announces_itself_to_an_nd_that_does_not_know_its_epoch(net, nd):
    n = OperatorNode(NodeConfig(role="primary", listen="n", downstream="nd", upstream="nu"),
                     Selection("price > 100"), net.peer)
    net.register("n", n)
    try:
        n.state.fence.advance(2)  # this primary took over in epoch 2; Nd restarted and knows epoch 1
        assert push(net, frame(run(1, 4), epoch=2)).received_through == 4
        n._operator_loop()
        n._output_loop()  # refused (unknown epoch): announces itself
        assert n.counters["announced"] == 1 and nd.fence.epoch == 2
        n._output_loop()  # an empty frame learns where Nd stands
        n._output_loop()
        assert nd.dedup.delivered_through == 4 and nd.counters["takeovers"] == 1
    finally:
        n.stop()


def test_a_primary_nu_knows_by_another_address_is_told_so_and_not_fenced(net, caplog):
    """A primary's announcement to a Nu that pushes to it under another address (a name against an IP, NAT)
    was refused as stale, and the live primary fenced itself after a second without pushes: a failover,
    or, with no standby, a pipeline stopped for good. The refusal now fences nobody and says why."""
    nu = nu_with(RecordingSource())
    net.register("nu", nu)
    n = OperatorNode(NodeConfig(role="primary", listen="n", advertise="n.example:50051", upstream="nu"),
                     Selection("price > 100"), net.peer)
    try:
        with caplog.at_level("WARNING"):
            n._announce(n.upstream, 1)
            n._announce(n.upstream, 1)  # a second later: counted, not logged again
        assert n.state.role is Role.PRIMARY and n.counters["fenced"] == 0
        assert n.counters["announce_refused"] == 2 and n.counters["announced"] == 0
        said = [r.getMessage() for r in caplog.records if "did not take the announcement" in r.getMessage()]
        assert len(said) == 1 and "set its advertise to n" in said[0]
        assert nu.errors["not_the_primary"] == 2 and nu.primary_addr == "n" and nu.fence.epoch == 1
        nu.fence.advance(2)  # a newer epoch in force at Nu still fences it, once it has worked (else: rejoins)
        n._worked = True
        n._announce(n.upstream, 1)
        assert n.state.role is Role.FENCED
    finally:
        n.stop()
        nu.stop()


def test_a_fenced_primary_answering_heartbeats_counts_as_a_failure(net, primary):
    s = OperatorNode(NodeConfig(role="standby", listen="s", primary="n", heartbeat_misses=2), Selection("price > 1"),
                     net.peer)
    from lazystandby.core.detector import FailureDetector

    s.detector = FailureDetector(0.01, 2, s.clock())
    s.registered.set()
    s.take_over = lambda: s.counters.update(["suspected"])  # the suspicion is what this test is about
    try:
        primary.state.become(Role.FENCED)
        s._heartbeat_loop()
        s._heartbeat_loop()
        assert s.counters["heartbeat_not_primary"] == 2 and s.counters["suspected"] == 1
    finally:
        s.stop()


def test_a_backup_from_an_older_epoch_is_refused(net, standby):
    standby.state.fence.advance(2)  # learnt from Nu at registration
    enc = BatchEncoder(CodecName.ZSTD)
    old = backup_frame(enc, [run(1, 5)])
    old.epoch = 1
    with pytest.raises(PeerError) as e:
        net.call_pb("s", "Backup", old)
    assert e.value.status == "ABORTED" and standby.received_through == 0


class RecordingSource:
    """A generator source that records what Nu makes durable, and can fail to."""

    def __init__(self, fail: int = 0):
        from lazystandby.sources.base import GeneratorSource

        self.inner = GeneratorSource(["I1", "I2"], total=40, rate=0.0)
        self.recorded: list = []
        self.fail = fail

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def record_membership(self, members):
        if self.fail:
            self.fail -= 1
            raise TimeoutError("broker unreachable")
        self.recorded.append(members)


def nu_with(source, standby="s"):
    from lazystandby.node.upstream import UpstreamNode

    cfg = NodeConfig(role="upstream", listen="nu", primary="n", standby=standby)
    nu = UpstreamNode(cfg, source, MemoryNetwork().peer)
    while nu.oqu.last < 40:
        nu._source_loop()
    return nu


def test_nu_makes_a_takeover_durable_before_answering_and_again_on_a_retry():
    src = RecordingSource(fail=1)
    nu = nu_with(src)
    req = m.TakeoverRequest(node="N'", epoch=2, address="s", resend_from=11)
    with pytest.raises(LazyStandbyError) as e:
        nu.handle_takeover(req)
    assert e.value.status == "UNAVAILABLE" and "not yet durable" in e.value.message and src.recorded == []
    reply = nu.handle_takeover(req)  # the standby's retry
    assert reply.resend_from == 11 and nu.primary_addr == "s" and nu.fence.epoch == 2
    assert [(x.epoch, x.primary, x.standby) for x in src.recorded] == [(2, "s", "")]
    assert nu.handle_takeover(req) == reply and len(src.recorded) == 1  # durable already: nothing more
    nu.stop()


@pytest.mark.parametrize("req, status, text", [
    (m.TakeoverRequest(node="X", epoch=2, address="mallory:1"), "PERMISSION_DENIED", "this Nu's standby is s"),
    (m.TakeoverRequest(node="N'", epoch=1, address="s"), "ABORTED", "current epoch is 1"),
    # The current epoch's primary announcing itself from an address this Nu does not push to: not stale.
    (m.TakeoverRequest(node="N", epoch=1, address="10.0.0.5:50051"), "PERMISSION_DENIED",
     "set its advertise to n"),
    (m.TakeoverRequest(node="N'", epoch=2, address="s", resend_from=10**9 + 1), "OUT_OF_RANGE",
     "holds positions up to 40"),
])
def test_nu_refuses_a_takeover_it_cannot_trust_and_changes_nothing(req, status, text):
    src = RecordingSource()
    nu = nu_with(src)
    with pytest.raises(LazyStandbyError) as e:
        nu.handle_takeover(req)
    assert e.value.status == status and text in e.value.message
    assert nu.fence.epoch == 1 and nu.primary_addr == "n" and nu.standby.address == "s" and src.recorded == []
    nu.stop()


def test_a_restarted_nu_restores_the_takeover_and_the_standby():
    from lazystandby.core.acks import Checkpoint
    from lazystandby.sources.base import Restored

    class Restarted(RecordingSource):
        def restore(self):
            return Restored(checkpoint=Checkpoint(0, 0), epoch=2, primary="s", held=TupleBatch(first=1),
                            last_seqs={}, standby="spare")

    nu = nu_with(Restarted())
    assert nu.fence.epoch == 2 and nu.primary_addr == "s" and nu.standby.address == "spare"
    # The primary of epoch 2 announcing itself to this Nu changes nothing.
    reply = nu.handle_takeover(m.TakeoverRequest(node="N'", epoch=2, address="s", resend_from=5))
    assert reply.epoch == 2 and nu.counters["takeovers"] == 0
    nu.stop()


def test_nd_refuses_replays_from_a_node_that_is_not_the_primary_and_keeps_its_alarms_quiet(net, nd):
    """Replayed or gapped deliveries from a client must not raise the counters the DuplicatesDropped and
    OutputGaps alerts watch: they are refused first, and counted apart."""
    net.call_pb("nd", "Deliver", out_frame(1, 5))
    for frame_ in (out_frame(1, 5, sender="mallory"), out_frame(9, 2, sender="mallory")):
        with pytest.raises(PeerError) as e:
            net.call_pb("nd", "Deliver", frame_)
        assert e.value.status == "PERMISSION_DENIED" and "N is the primary of epoch 1" in e.value.message
    assert nd.counters["duplicates_dropped"] == 0 and nd.errors["sequence_gap"] == 0
    assert nd.errors["not_the_primary"] == 2 and len(nd.sink.rows) == 5


def test_a_standby_that_skips_a_parameter_change_still_switches_at_its_position(net, standby):
    """A control record inside the positions a checkpoint skips is never seen by the standby; the params
    sent with the checkpoint switch it as if it had (once a standby missed it, and after a failover its
    output followed the old predicate)."""
    from lazystandby.formats import control

    standby.primary_received = 100  # the primary's heartbeats showed it got that far
    frame_ = pb.BackupFrame(epoch=1, sender="Nu", checkpoint=pb.Level1Ack(epoch=1, input_pos=20, output_count=3),
                            params=pb.Params(pos=7, payload=control.encode("price < 5")))
    assert net.call_pb("s", "Backup", frame_).applied_through == 20
    standby._operator_loop()
    assert standby.operator.switches == [(7, "price < 5")] and standby.processed.input_pos == 20


def covered_frame(enc, batch, checkpoint):
    f = backup_frame(enc, [batch])
    f.checkpoint.CopyFrom(pb.Level1Ack(epoch=1, input_pos=checkpoint[0], output_count=checkpoint[1]))
    return f


def test_a_standby_skips_inputs_a_checkpoint_covers_and_numbers_on_from_it(net, standby):
    standby.primary_received = 100
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    assert net.call_pb("s", "Backup", covered_frame(enc, run(1, 20), (10, 10))).applied_through == 20
    standby._operator_loop()
    assert standby.counters["skipped_tuples"] == 10 and standby.counters["processed_tuples"] == 10
    assert standby.processed.input_pos == 20 and standby.processed.output_count == 20
    assert (standby.oq.first, standby.oq.last) == (11, 20)  # outputs 1..10 are Nd's already


def test_a_run_that_skips_ahead_into_its_checkpoint_jumps_there_and_drops_what_it_covers(net, standby):
    """Nu re-cut its backup from its trim point, behind its checkpoint (a standby registered, a call in
    flight was lost): positions 41..60 never reached N', the run starts at 61, and the checkpoint covers
    through 70. N' jumps to 70 and takes 71..100; before, the gap was refused until Nu's trim caught up."""
    standby.primary_received = 100
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", backup_frame(enc, [run(1, 40)]))
    assert net.call_pb("s", "Backup", covered_frame(enc, run(61, 40), (70, 70))).applied_through == 100
    assert standby.counters["backup_covered_dropped"] == 10 and standby.counters["backup_tuples"] == 70
    loop_once(standby)
    assert standby.processed.input_pos == 100 and standby.processed.output_count == 100
    # 1..40 are covered too (skipped); 71..100 processed, their outputs numbered on from the checkpoint's 70.
    assert standby.counters["skipped_tuples"] == 40 and standby.counters["processed_tuples"] == 30


def test_a_run_wholly_inside_its_checkpoint_is_a_jump_and_a_forged_one_is_still_a_gap(net, standby):
    standby.primary_received = 80
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", backup_frame(enc, [run(1, 40)]))
    assert net.call_pb("s", "Backup", covered_frame(enc, run(61, 10), (80, 80))).applied_through == 80
    assert standby.received_through == 80 and standby.counters["backup_covered_dropped"] == 10
    # A checkpoint past what the primary's heartbeats say it holds is not trusted: the skip is refused.
    with pytest.raises(PeerError) as e:
        net.call_pb("s", "Backup", covered_frame(enc, run(91, 20), (100, 100)))
    assert e.value.status == "OUT_OF_RANGE" and standby.received_through == 80


def test_a_checkpoint_that_counts_too_few_outputs_is_not_skipped_to(net, standby, caplog):
    standby.primary_received = 100
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", backup_frame(enc, [run(1, 10)]))
    standby._operator_loop()
    assert standby.processed.output_count == 10
    # Inputs 1..15 cannot have made 3 outputs: 1..10 made 10.
    net.call_pb("s", "Backup", covered_frame(enc, run(11, 10), (15, 3)))
    standby._operator_loop()
    assert standby.counters["skips_refused"] == 1 and standby.counters["skipped_tuples"] == 0
    assert standby.processed.input_pos == 20 and standby.processed.output_count == 20
    assert "counts fewer outputs" in caplog.text


def test_a_checkpoint_past_what_the_primary_holds_is_not_skipped_to(net, standby):
    standby.primary_received = 5  # the heartbeats say the primary got only this far: the checkpoint is forged
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", covered_frame(enc, run(1, 20), (10, 10)))
    standby._operator_loop()
    assert standby.counters["skipped_tuples"] == 0 and standby.counters["processed_tuples"] == 20


def test_a_checkpoint_that_comes_before_the_heartbeat_vouching_for_it_is_applied_when_that_comes(net, standby):
    """Covering is applied only up to what the primary's heartbeats show it received; a checkpoint that came
    first waits for that heartbeat instead of being dropped (covering then lagged by up to 0.7 s at
    10,000 tuples/s). One the primary never reaches is never applied."""
    standby.primary_received = 5
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", covered_frame(enc, run(1, 20), (10, 10)))
    assert standby._covered[0].input_pos == 0
    with standby.lock:
        standby._primary_reached(8, 0.0)
    assert standby._covered[0].input_pos == 0  # not there yet
    with standby.lock:
        standby._primary_reached(12, 0.0)
    assert standby._covered[0].input_pos == 10 and standby.primary_received == 12
    standby._operator_loop()
    assert standby.counters["skipped_tuples"] == 10 and standby.counters["processed_tuples"] == 10


@pytest.fixture
def lazy(net):
    """A standby that lets inputs wait a second for Nd's acks (standby_defer), on a clock the test sets; its
    IQ' holds 100 tuples (STANDBY_IQ_FACTOR x iq_capacity)."""
    t = [100.0]
    n = OperatorNode(NodeConfig(role="standby", listen="s", standby_defer=1.0, iq_capacity=100 // STANDBY_IQ_FACTOR),
                     Selection("price > 1"), net.peer, clock=lambda: t[0])
    n.primary_received = 1000
    net.register("s", n)
    yield n, t
    n.stop()


def loop_once(node):
    """One pass of the operator loop, which must not wait for ever (a deferring loop waits for time)."""
    import threading

    th = threading.Thread(target=node._operator_loop, daemon=True)
    th.start()
    th.join(5)
    alive = th.is_alive()
    if alive:
        node.stop()
        th.join(5)
    assert not alive, "the operator loop waited for ever"


def test_a_deferring_standby_skips_what_acks_cover_and_processes_the_rest_only_when_due(net, lazy):
    n2, t = lazy
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", covered_frame(enc, run(1, 20), (10, 10)))
    assert n2.cover_latency == 0.0  # 10 was covered the moment it arrived
    loop_once(n2)  # 1..10 covered: skipped; 11..20 arrived just now: they wait
    assert n2.counters["skipped_tuples"] == 10 and n2.counters["processed_tuples"] == 0
    assert len(n2.iq) == 10 and n2.processed.input_pos == 10
    assert n2.standby_lag()[0] == 990  # the primary holds 1000; 1..10 need no work
    t[0] += 1.0  # waited standby_defer: processed, numbered on from the checkpoint
    loop_once(n2)
    assert n2.counters["processed_tuples"] == 10 and n2.processed.input_pos == 20
    assert (n2.oq.first, n2.oq.last) == (11, 20)


def test_a_checkpoint_ahead_of_the_backup_covers_it_once_the_backup_gets_there(net, lazy):
    n2, t = lazy
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", covered_frame(enc, run(1, 20), (30, 30)))  # the primary runs ahead of the backup
    assert n2._covered[0].input_pos == 0
    net.call_pb("s", "Backup", covered_frame(enc, run(21, 20), (50, 50)))
    assert n2._covered[0].input_pos == 30  # the first one, reached; 50 waits for the backup to get there
    loop_once(n2)  # 1..30 covered: skipped; 31..40 arrived just now: they wait
    assert n2.counters["skipped_tuples"] == 30 and n2.counters["processed_tuples"] == 0
    net.call_pb("s", "Backup", covered_frame(enc, run(41, 20), (50, 50)))
    assert n2._covered[0].input_pos == 50 and not n2._covering


def test_a_deferring_standby_short_of_room_takes_its_oldest_inputs_and_everything_at_a_takeover(net, lazy):
    n2, t = lazy
    n2.cover_latency = 0.0  # inputs are covered quickly: deferring pays
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", backup_frame(enc, [run(1, 60)]))  # room kept: half of IQ''s 100
    loop_once(n2)  # 10 beyond what fits: the oldest 10 are processed, the rest waits for acks
    assert n2.counters["processed_tuples"] == 10 and n2.counters["skipped_tuples"] == 0
    assert len(n2.iq) == 50 and n2.processed.input_pos == 10
    net.call_pb("s", "Backup", backup_frame(enc, [run(61, 10)]))
    with n2.lock:
        n2.state.become(Role.PROMOTING, epoch=1)  # a takeover needs every answer now
    loop_once(n2)
    assert n2.counters["processed_tuples"] == 70 and n2.processed.input_pos == 70


def test_a_deferring_standby_keeps_room_for_two_backup_calls_not_half_of_iq(net):
    """With room for more than two backup calls, a standby past half of IQ' still defers; once the room
    left is less than two calls (here 2 x 50 batches x Bsize 10 = 1,000 of an IQ' of 10,000), it takes its
    oldest inputs beyond that, not all of them."""
    t = [100.0]
    n2 = OperatorNode(NodeConfig(role="standby", listen="s", standby_defer=1.0, iq_capacity=10_000 // STANDBY_IQ_FACTOR,
                                 max_batches_per_rpc=50, bsize=10), Selection("price > 1"), net.peer,
                      clock=lambda: t[0])
    n2.primary_received = 100_000
    net.register("s", n2)
    try:
        n2.cover_latency = 0.0
        enc = BatchEncoder(CodecName.ZSTD_STREAM)
        net.call_pb("s", "Backup", backup_frame(enc, [run(1, 6_000)]))
        net.call_pb("s", "Backup", backup_frame(enc, [run(6_001, 3_000)]))
        with n2.lock:
            assert n2._deferred_through() == 0  # 9,000 held, 1,000 of room left: nothing may be taken yet
        net.call_pb("s", "Backup", backup_frame(enc, [run(9_001, 500)]))
        with n2.lock:
            assert n2._deferred_through() == 500  # 500 beyond what fits: the oldest 500
        loop_once(n2)
        assert n2.counters["processed_tuples"] == 500 and n2.processed.input_pos == 500
        assert len(n2.iq) == 9_000
    finally:
        n2.stop()


def test_a_standby_holds_more_than_the_primary_whose_inputs_it_backs_up(net):
    """Under full load the backup runs ahead of what the primary processed by up to the primary's whole IQ,
    and covering takes longer still: IQ' holds STANDBY_IQ_FACTOR times as many tuples as IQ."""
    cfgs = {role: NodeConfig(role=role, listen=role, iq_capacity=1_000) for role in ("primary", "standby")}
    nodes = {role: OperatorNode(cfg, Selection("price > 1"), net.peer) for role, cfg in cfgs.items()}
    try:
        assert nodes["primary"].iq.capacity == 1_000
        assert nodes["standby"].iq.capacity == STANDBY_IQ_FACTOR * 1_000 and STANDBY_IQ_FACTOR >= 2
    finally:
        for n in nodes.values():
            n.stop()


def test_a_standby_defers_before_the_first_cover_but_not_while_covering_takes_longer_than_standby_defer(net, lazy):
    """Before any input was covered (a primary just started) inputs wait as if covering kept up, up to
    standby_defer. Deferring pays only if acks cover inputs within standby_defer: while covering takes
    longer (a slow primary), a standby processes what it gets at once."""
    n2, t = lazy
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", backup_frame(enc, [run(1, 10)]))
    with n2.lock:
        assert n2.cover_latency is None and n2._deferred_through() == 0  # nothing covered yet: they wait
    t[0] += 1.0
    loop_once(n2)  # waited standby_defer
    assert n2.counters["processed_tuples"] == 10
    net.call_pb("s", "Backup", backup_frame(enc, [run(11, 10)]))
    t[0] += 1.5
    # The newest run the checkpoint covers whole, 1..10, arrived 2.5 s ago (11..20 1.5 s ago).
    net.call_pb("s", "Backup", covered_frame(enc, run(21, 10), (15, 15)))
    assert n2.cover_latency == 2.5
    loop_once(n2)
    assert len(n2.iq) == 0 and n2.processed.input_pos == 30  # nothing waits (11..15, covered, skipped)
    assert n2.counters["processed_tuples"] == 25 and n2.counters["skipped_tuples"] == 5


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
            n._register_with_upstream()
        # One line per change of the failure, not one per try.
        said = [r.getMessage().split(" (")[1].split(":")[0] for r in caplog.records
                if "registering with Nu failed" in r.getMessage()]
        assert said == ["UNAVAILABLE", "DEADLINE_EXCEEDED", "UNAVAILABLE"]
        assert n.registered.is_set() and n.state.fence.epoch == 3 and n.primary.address == "n"
        assert len(made) == 3 and [p.closed for p in made] == [True, True, False] and n.upstream is made[2]
        assert not made[1].fails  # the timeout was retried on the same channel, the refusal on a new one
    finally:
        n.stop()


def test_a_node_reports_when_it_finished_its_first_and_its_last_frame(net, primary):
    """The bench's per-second rates run between these (bench.harness.FrameMarks): a count polled
    between frames is up to a frame old."""
    import time

    assert primary.snapshot()["processed_at"] is None and primary.snapshot()["first_processed_at"] is None
    before = time.time()
    push(net, frame(run(1, 5)))
    primary._operator_loop()
    first = primary.snapshot()
    assert first["processed"][0] == 5 and before <= first["first_processed_at"] == first["processed_at"] <= time.time()
    time.sleep(0.01)
    push(net, frame(run(6, 5)))
    primary._operator_loop()
    s = primary.snapshot()
    assert s["processed"][0] == 10 and s["first_processed_at"] == first["first_processed_at"]
    assert s["processed_at"] > first["processed_at"]


def test_a_skip_past_covered_inputs_says_when_processed_moved_but_is_no_frame_run(net, standby):
    standby.primary_received = 100
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", covered_frame(enc, run(1, 20), (20, 20)))
    standby._operator_loop()
    s = standby.snapshot()
    assert s["processed"] == [20, 20] and standby.counters["processed_tuples"] == 0
    assert s["processed_at"] is not None and s["first_processed_at"] is None


def test_a_link_that_stays_down_is_said_once_then_reminded_and_its_recovery_said(caplog):
    import logging

    from lazystandby.node.common import Links

    now = [0.0]
    links = Links("N", logging.getLogger("lazystandby.test-links"), lambda: now[0], remind=30.0)
    with caplog.at_level(logging.WARNING, logger="lazystandby.test-links"):
        for t in (0.0, 1.0, 29.0, 31.0, 40.0):
            now[0] = t
            links.failed("downstream", "nd:1", "UNAVAILABLE", "connection refused")
        now[0] = 50.0
        links.ok("downstream", "nd:1")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert "link to downstream nd:1 failed" in lines[0]
    assert "still down after 31 s" in lines[1]
    assert "recovered after 50.0 s (5 calls failed meanwhile)" in lines[2]


def test_a_peer_that_keeps_earning_a_refusal_gets_one_line_per_kind_with_the_count_of_the_rest(caplog):
    import logging

    from lazystandby.core.errors import MalformedMessage, QueueFull, StaleEpoch
    from lazystandby.transport.refusals import RefusalLog

    now = [0.0]
    log = RefusalLog("test-refusals", every=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="lazystandby.test-refusals"):
        for t in (0.0, 1.0, 2.0, 11.0):
            now[0] = t
            log.refused("Push", MalformedMessage("not protobuf"))
        log.refused("Push", QueueFull("full"))  # backpressure: counted by the node, never logged
        log.refused("Push", StaleEpoch("old"))  # ABORTED: an ordinary answer, not logged either
        log.refused("Backup", MalformedMessage("not protobuf"))  # another RPC: a kind of its own
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["refused Push (INVALID_ARGUMENT): not protobuf",
                     "refused Push (INVALID_ARGUMENT): not protobuf [2 more like it since the last line]",
                     "refused Backup (INVALID_ARGUMENT): not protobuf"]
