"""Nd's input: repeats dropped, gaps refused, old epochs fenced, forged and replayed deliveries refused,
and the epoch of its last output kept across a restart."""

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core.errors import PeerError
from lazystandby.node.downstream import DownstreamNode
from lazystandby.transport.memory import MemoryNetwork
from lazystandby.v1 import lazystandby_pb2 as pb
from tests.unit.node.support import out_frame


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


def test_nd_refuses_a_takeover_that_does_not_bring_a_newer_epoch(net, nd):
    net.call_pb("nd", "Deliver", out_frame(1, 2, epoch=1))
    with pytest.raises(PeerError) as e:
        net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="N'", epoch=1))
    assert e.value.status == "ABORTED"
    nd.tick(0.1)
    assert net.call_pb("nd", "Takeover", pb.TakeoverRequest(node="N'", epoch=2)).delivered_through == 2
    retry = pb.TakeoverRequest(node="N'", epoch=2)
    assert net.call_pb("nd", "Takeover", retry).delivered_through == 2  # a retry is fine


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
    assert again.fence.epoch == 2 and again.inbound.delivered_through == 3
    with pytest.raises(PeerError) as e:  # the demoted primary, resumed, is still refused
        net.call_pb("nd", "Deliver", out_frame(4, 1, epoch=1))
    assert e.value.status == "ABORTED"


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


def test_nd_answers_status_while_its_sink_holds_a_delivery(net):
    """A results topic whose broker is down holds a Deliver in the sink's flush, with Nd's lock; Status
    and the metrics still answer within their wait, and say the snapshot was taken without the lock."""
    import threading
    import time

    from lazystandby.metrics import NodeCollector
    from lazystandby.sinks.base import MemorySink

    release = threading.Event()

    class Stuck(MemorySink):
        def append(self, outputs, *, epoch=0):
            release.wait(10)
            super().append(outputs, epoch=epoch)

    d = DownstreamNode(NodeConfig(role="downstream", listen="nd"), Stuck())
    net.register("nd", d)
    t = threading.Thread(target=lambda: net.call_pb("nd", "Deliver", out_frame(1, 5)), daemon=True)
    t.start()
    try:
        time.sleep(0.1)  # the delivery is in the sink now, holding the lock
        t0 = time.monotonic()
        snap = d.handle_status(None).snapshot
        families = list(NodeCollector(d).collect())
        took = time.monotonic() - t0
        assert took < 1.0 and snap["consistent"] is False and snap["delivered_through"] == 0 and families
    finally:
        release.set()
        t.join(5)
    assert d.handle_status(None).snapshot["consistent"] is True and d.inbound.delivered_through == 5
