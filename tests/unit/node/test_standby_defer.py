"""The lazy standby's deferral: inputs wait up to standby_defer for covering, room is kept for the backup,
and everything is taken at a takeover."""

import pytest

from lazystandby.config import STANDBY_IQ_FACTOR, NodeConfig
from lazystandby.core.codec import BatchEncoder, CodecName
from lazystandby.core.roles import Role
from lazystandby.node.operator_node import OperatorNode
from lazystandby.operators.selection import Selection
from tests.unit.node.support import backup_frame, covered_frame, loop_once, run


@pytest.fixture
def lazy(net):
    """A standby that lets inputs wait a second for Nd's acks (standby_defer), on a clock the test sets; its
    IQ' holds 100 tuples (STANDBY_IQ_FACTOR x iq_capacity)."""
    t = [100.0]
    n = OperatorNode(NodeConfig(role="standby", listen="s", standby_defer=1.0, iq_capacity=100 // STANDBY_IQ_FACTOR),
                     Selection("price > 1"), net.peer, clock=lambda: t[0])
    n.standby_side.primary_received = 1000
    net.register("s", n)
    yield n, t
    n.stop()


def test_a_deferring_standby_skips_what_acks_cover_and_processes_the_rest_only_when_due(net, lazy):
    n2, t = lazy
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", covered_frame(enc, run(1, 20), (10, 10)))
    assert n2.inbound.cover_latency == 0.0  # 10 was covered the moment it arrived
    loop_once(n2)  # 1..10 covered: skipped; 11..20 arrived just now: they wait
    assert n2.counters["skipped_tuples"] == 10 and n2.counters["processed_tuples"] == 0
    assert len(n2.inbound.iq) == 10 and n2.processed.input_pos == 10
    assert n2.standby_side.standby_lag()[0] == 990  # the primary holds 1000; 1..10 need no work
    t[0] += 1.0  # waited standby_defer: processed, numbered on from the checkpoint
    loop_once(n2)
    assert n2.counters["processed_tuples"] == 10 and n2.processed.input_pos == 20
    assert (n2.oq.first, n2.oq.last) == (11, 20)


def test_a_checkpoint_ahead_of_the_backup_covers_it_once_the_backup_gets_there(net, lazy):
    n2, t = lazy
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", covered_frame(enc, run(1, 20), (30, 30)))  # the primary runs ahead of the backup
    assert n2.covered[0].input_pos == 0
    net.call_pb("s", "Backup", covered_frame(enc, run(21, 20), (50, 50)))
    assert n2.covered[0].input_pos == 30  # the first one, reached; 50 waits for the backup to get there
    loop_once(n2)  # 1..30 covered: skipped; 31..40 arrived just now: they wait
    assert n2.counters["skipped_tuples"] == 30 and n2.counters["processed_tuples"] == 0
    net.call_pb("s", "Backup", covered_frame(enc, run(41, 20), (50, 50)))
    assert n2.covered[0].input_pos == 50 and not n2.standby_side.covering


def test_a_deferring_standby_short_of_room_takes_its_oldest_inputs_and_everything_at_a_takeover(net, lazy):
    n2, t = lazy
    n2.inbound.cover_latency = 0.0  # inputs are covered quickly: deferring pays
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", backup_frame(enc, [run(1, 60)]))  # room kept: half of IQ''s 100
    loop_once(n2)  # 10 beyond what fits: the oldest 10 are processed, the rest waits for acks
    assert n2.counters["processed_tuples"] == 10 and n2.counters["skipped_tuples"] == 0
    assert len(n2.inbound.iq) == 50 and n2.processed.input_pos == 10
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
    n2.standby_side.primary_received = 100_000
    net.register("s", n2)
    try:
        n2.inbound.cover_latency = 0.0
        enc = BatchEncoder(CodecName.ZSTD_STREAM)
        net.call_pb("s", "Backup", backup_frame(enc, [run(1, 6_000)]))
        net.call_pb("s", "Backup", backup_frame(enc, [run(6_001, 3_000)]))
        with n2.lock:
            assert n2.standby_side.deferred_through() == 0  # 9,000 held, 1,000 of room left: nothing may be taken yet
        net.call_pb("s", "Backup", backup_frame(enc, [run(9_001, 500)]))
        with n2.lock:
            assert n2.standby_side.deferred_through() == 500  # 500 beyond what fits: the oldest 500
        loop_once(n2)
        assert n2.counters["processed_tuples"] == 500 and n2.processed.input_pos == 500
        assert len(n2.inbound.iq) == 9_000
    finally:
        n2.stop()


def test_a_standby_holds_more_than_the_primary_whose_inputs_it_backs_up(net):
    """Under full load the backup runs ahead of what the primary processed by up to the primary's whole IQ,
    and covering takes longer still: IQ' holds STANDBY_IQ_FACTOR times as many tuples as IQ."""
    cfgs = {role: NodeConfig(role=role, listen=role, iq_capacity=1_000) for role in ("primary", "standby")}
    nodes = {role: OperatorNode(cfg, Selection("price > 1"), net.peer) for role, cfg in cfgs.items()}
    try:
        assert nodes["primary"].inbound.iq.capacity == 1_000
        assert nodes["standby"].inbound.iq.capacity == STANDBY_IQ_FACTOR * 1_000 and STANDBY_IQ_FACTOR >= 2
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
        # Nothing covered yet: they wait.
        assert n2.inbound.cover_latency is None and n2.standby_side.deferred_through() == 0
    t[0] += 1.0
    loop_once(n2)  # waited standby_defer
    assert n2.counters["processed_tuples"] == 10
    net.call_pb("s", "Backup", backup_frame(enc, [run(11, 10)]))
    t[0] += 1.5
    # The newest run the checkpoint covers whole, 1..10, arrived 2.5 s ago (11..20 1.5 s ago).
    net.call_pb("s", "Backup", covered_frame(enc, run(21, 10), (15, 15)))
    assert n2.inbound.cover_latency == 2.5
    loop_once(n2)
    assert len(n2.inbound.iq) == 0 and n2.processed.input_pos == 30  # nothing waits (11..15, covered, skipped)
    assert n2.counters["processed_tuples"] == 25 and n2.counters["skipped_tuples"] == 5


@pytest.mark.parametrize("paces", [False, True])
def test_a_stateful_standby_whose_operator_paces_itself_hands_it_every_input_on_arrival(net, paces):
    """A window standby applies every input; one whose operator holds a standby's input back itself (Spark's
    feed) gets it at once, the others after standby_defer."""
    from lazystandby.formats.query import parse_query
    from lazystandby.operators.window import WindowAggregate

    class Window(WindowAggregate):
        paces_standby = paces

    t = [100.0]
    n = OperatorNode(NodeConfig(role="standby", listen="s", standby_defer=1.0, query="window"),
                     Window(parse_query("window")), net.peer, clock=lambda: t[0])
    n.standby_side.primary_received = 1000
    net.register("s", n)
    try:
        net.call_pb("s", "Backup", backup_frame(BatchEncoder(CodecName.ZSTD_STREAM), [run(1, 10)]))
        with n.lock:
            assert n.standby_side.deferred_through() == (None if paces else 0)  # None: take everything now
        if not paces:
            t[0] += 1.0  # waited standby_defer
        loop_once(n)
        assert n.counters["processed_tuples"] == 10
    finally:
        n.stop()
