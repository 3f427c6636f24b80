"""Passive Standby (standby_state=snapshot): the primary's snapshots reach the standby, which does no
operator work, drops the backup a snapshot covers, and at a takeover loads the snapshot and makes the
outputs the primary made from the same inputs."""

from contextlib import contextmanager

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core import messages as m
from lazystandby.core.codec import BatchEncoder, CodecName
from lazystandby.core.errors import SettingError, WrongRole
from lazystandby.core.roles import Role
from lazystandby.core.tuples import TupleBatch
from lazystandby.formats import control
from lazystandby.formats.query import parse_query
from lazystandby.formats.ticks import Tick
from lazystandby.node.operator_node import OperatorNode
from lazystandby.node.passive import TAIL_WAIT_S
from lazystandby.operators.window import WindowAggregate
from tests.unit.node.support import backup_frame, frame, loop_once

QUERY = "SELECT symbol, count(*), avg(price), max(price) FROM ticks GROUP BY window(ts, '1 second'), symbol"


def link(first, n, wm_every=50):
    """Positions first.. of a link: ticks 10 ms apart over seven symbols, a watermark record every
    `wm_every` positions (at the event time of the tick before it)."""
    streams, payloads = [], []
    for pos in range(first, first + n):
        if pos % wm_every == 0:
            streams.append(0)
            payloads.append(control.encode_watermark(1000 + (pos - 1) * 10))
        else:
            streams.append(1)
            payloads.append(Tick(f"S{pos % 7}", 100.0 + pos % 13, 10, 1000 + pos * 10, "X").encode())
    return TupleBatch(first=first, streams=streams, seqs=list(range(first, first + n)), payloads=payloads)


def node(net, role, name, interval=1e-6):
    cfg = NodeConfig(role=role, listen=name, query=QUERY, standby_state="snapshot", snapshot_interval=interval,
                     standby_defer=0)
    n = OperatorNode(cfg, WindowAggregate(parse_query(QUERY)), net.peer)
    net.register(name, n)
    return n


def outputs(n, first, last):
    return [(b.first, b.payloads.to_pylist()) for b in [n.oq.read(first, last - first + 1)] if b is not None]


def test_the_standby_holds_the_snapshot_does_no_work_and_makes_the_primarys_outputs_after_a_takeover(net):
    primary, standby = node(net, "primary", "n"), node(net, "standby", "s")
    try:
        standby.standby_side.registered.set()
        primary.primary_side.standby_at = "s"
        net.call_pb("n", "Push", frame(link(1, 400)))
        loop_once(primary)
        primary.snapshots.send_loop()  # the snapshot taken after the call goes to "s"
        at = primary.processed
        assert standby.snapshots.held is not None and standby.snapshots.held.at == at and at.input_pos == 400
        enc = BatchEncoder(CodecName.ZSTD_STREAM)
        net.call_pb("s", "Backup", backup_frame(enc, [link(1, 400)]))
        loop_once(standby)
        assert standby.counters["snapshot_dropped"] == 400 and standby.counters["processed_tuples"] == 0
        assert standby.done_through() == 400
        # More input reaches both; the primary processes it, the standby only holds it.
        net.call_pb("n", "Push", frame(link(401, 300)))
        loop_once(primary)
        net.call_pb("s", "Backup", backup_frame(enc, [link(401, 300)]))
        assert standby.counters["processed_tuples"] == 0
        # The takeover: the snapshot is loaded first, then 401..700 processed from it.
        standby.state.become(Role.PROMOTING, epoch=2)
        loop_once(standby)
        loop_once(standby)
        assert standby.counters["snapshot_loads"] == 1 and standby.processed == primary.processed
        assert standby.counters["processed_tuples"] == 300
        made = primary.processed.output_count
        assert made > at.output_count  # the watermarks after 400 closed windows
        assert outputs(standby, at.output_count + 1, made) == outputs(primary, at.output_count + 1, made)
    finally:
        primary.stop()
        standby.stop()


@contextmanager
def pair(net):
    """A primary and its passive standby, the primary knowing where the standby is."""
    primary, standby = node(net, "primary", "n"), node(net, "standby", "s")
    try:
        standby.standby_side.registered.set()
        primary.primary_side.standby_at = "s"
        yield primary, standby
    finally:
        primary.stop()
        standby.stop()


def primary_takes(net, primary, first, n):
    """Positions first.. reach the primary, which processes them, then takes and sends a snapshot."""
    net.call_pb("n", "Push", frame(link(first, n)))
    loop_once(primary)
    primary.snapshots.send_loop()


def test_deltas_after_a_full_snapshot_make_a_chain_the_takeover_loads_whole(net):
    with pair(net) as (primary, standby):
        enc = BatchEncoder(CodecName.ZSTD_STREAM)
        for first, n in ((1, 400), (401, 300), (701, 250), (951, 300)):
            if first < 951:
                primary_takes(net, primary, first, n)
            else:  # no snapshot after these
                net.call_pb("n", "Push", frame(link(first, n)))
                loop_once(primary)
            net.call_pb("s", "Backup", backup_frame(enc, [link(first, n)]))
        frames = standby.snapshots.chain.frames()
        assert [f.base for f in frames] == [0, 400, 700] and standby.snapshots.through() == 950
        assert primary.counters["snapshot_deltas_sent"] == 2 and standby.counters["snapshot_deltas"] == 2
        assert standby.snapshots.status()["held_deltas"] == 2
        standby.state.become(Role.PROMOTING, epoch=2)
        loop_once(standby)
        loop_once(standby)
        assert standby.counters["snapshot_loads"] == 1 and standby.processed == primary.processed
        assert standby.counters["processed_tuples"] == 300  # only what follows the chain's last snapshot
        made, at = primary.processed.output_count, frames[-1].at.output_count
        assert made > at and outputs(standby, at + 1, made) == outputs(primary, at + 1, made)


def test_a_delta_the_standby_cannot_chain_is_refused_and_the_next_snapshot_is_full(net):
    with pair(net) as (primary, standby):
        primary_takes(net, primary, 1, 400)
        standby.snapshots.chain.clear()  # the standby lost what the delta builds on (it restarted, say)
        primary_takes(net, primary, 401, 100)
        assert standby.snapshots.held is None and standby.counters["snapshots_refused"] == 1
        assert primary.counters["snapshots_refused"] == 1
        primary_takes(net, primary, 501, 100)
        assert [f.base for f in standby.snapshots.chain.frames()] == [0]  # full again
        assert standby.snapshots.through() == 600
        # A delta that never arrives: the next one is full too.
        net.down("s")
        primary_takes(net, primary, 601, 100)
        assert primary.counters["snapshot_errors"] == 1
        net.up("s")
        primary_takes(net, primary, 701, 100)
        assert [f.base for f in standby.snapshots.chain.frames()] == [0] and standby.snapshots.through() == 800


def test_a_due_snapshot_waits_a_little_for_nd_to_acknowledge_the_outputs_it_would_carry(net):
    primary = node(net, "primary", "n", interval=10.0)
    try:
        primary.primary_side.standby_at = "s"
        net.call_pb("n", "Push", frame(link(1, 400)))
        now = [100.0]
        primary.clock = lambda: now[0]
        primary.snapshots.due_at = 100.0
        loop_once(primary)  # the watermarks closed windows: outputs Nd has not acknowledged
        made = primary.processed.output_count
        assert made > primary.level0 == 0
        with primary.lock:
            primary.snapshots.maybe_take()
            assert primary.snapshots.job is None and primary.counters["snapshots_waited"] == 1
            primary.on_level0(made)  # Nd has them all now
            primary.snapshots.maybe_take()
            job, primary.snapshots.job = primary.snapshots.job, None
            assert job is not None and job[2] is None  # taken, with no tail to carry
            now[0] += 10.0  # the next is due; Nd acknowledges nothing more
            net.call_pb("n", "Push", frame(link(401, 200)))
        loop_once(primary)
        with primary.lock:
            assert primary.processed.output_count > made
            primary.snapshots.maybe_take()
            assert primary.snapshots.job is None and primary.counters["snapshots_waited"] == 2
            now[0] += TAIL_WAIT_S
            primary.snapshots.maybe_take()
            assert primary.snapshots.job is not None and len(primary.snapshots.job[2]) > 0  # carries its tail
    finally:
        primary.stop()


def test_a_snapshot_older_than_the_one_held_is_not_taken_and_a_warm_standby_or_a_primary_refuses_one(net):
    standby = node(net, "standby", "s")
    try:
        new = m.SnapshotFrame(epoch=0, sender="N", at=m.Checkpoint(50, 3), state=b"x")
        assert standby.handle_snapshot(new).held_through == 50
        old = m.SnapshotFrame(epoch=0, sender="N", at=m.Checkpoint(20, 1), state=b"y")
        assert standby.handle_snapshot(old).held_through == 50 and standby.snapshots.held.state == b"x"
        standby.state.become(Role.PROMOTING, epoch=1)
        with pytest.raises(WrongRole):
            standby.handle_snapshot(new)
    finally:
        standby.stop()
    warm = OperatorNode(NodeConfig(role="standby", listen="w", query=QUERY), WindowAggregate(parse_query(QUERY)),
                        net.peer)
    try:
        with pytest.raises(WrongRole, match="keeps its state warm"):
            warm.handle_snapshot(m.SnapshotFrame(epoch=0, sender="N", at=m.Checkpoint(50, 3), state=b"x"))
    finally:
        warm.stop()


def test_a_rebuild_from_nu_forgets_the_snapshot(net):
    standby = node(net, "standby", "s")
    try:
        standby.handle_snapshot(m.SnapshotFrame(epoch=0, sender="N", at=m.Checkpoint(50, 3), state=b"x"))
        with standby.lock:
            standby.snapshots.forget()
            assert standby.snapshots.held is None and not standby.snapshots.due()
    finally:
        standby.stop()


@pytest.mark.parametrize("settings, why", [
    ({"standby_state": "cold"}, "warm or snapshot"),
    ({"standby_state": "snapshot"}, "window query on the Python operator"),
    ({"standby_state": "snapshot", "query": QUERY, "operator": "spark"}, "window query on the Python operator"),
    ({"snapshot_interval": 0}, "> 0"),
])
def test_passive_standby_settings_are_refused_where_they_cannot_hold(settings, why):
    with pytest.raises(SettingError, match=why):
        NodeConfig(**settings)
