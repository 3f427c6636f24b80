"""Nd's inbound link (node/delivery_inbound.py): nothing is acknowledged that the sink did not take, and a
refused frame writes nothing."""

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core.errors import PeerError
from lazystandby.node.downstream import DownstreamNode
from lazystandby.sinks.base import MemorySink
from tests.unit.node.support import out_frame


class FailsOnce(MemorySink):
    """A sink whose first write fails, as a results topic whose broker is gone would."""

    def __init__(self):
        super().__init__()
        self.failed = False

    def append(self, outputs, *, epoch=0):
        if not self.failed:
            self.failed = True
            raise OSError("the results topic's broker is gone")
        super().append(outputs, epoch=epoch)


def test_a_write_that_fails_is_not_acknowledged_and_the_resend_is_written_once(net):
    nd = DownstreamNode(NodeConfig(role="downstream", listen="nd"), FailsOnce())
    net.register("nd", nd)
    with pytest.raises(OSError):
        net.call_pb("nd", "Deliver", out_frame(1, 4))
    assert nd.inbound.delivered_through == 0 and nd.counters["delivered_tuples"] == 0
    # The primary sends the frame again: it is new to Nd, written once, and acknowledged.
    assert net.call_pb("nd", "Deliver", out_frame(1, 4)).received_through == 4
    assert len(nd.sink.rows) == 4 and nd.counters["duplicates_dropped"] == 0


def test_a_refused_frame_writes_nothing_and_moves_nothing(net, nd):
    net.call_pb("nd", "Deliver", out_frame(1, 3))
    refused = [out_frame(5, 2),                    # a gap
               out_frame(4, 2, sender="mallory"),  # not the primary of epoch 1
               out_frame(4, 2, epoch=2)]           # an epoch no takeover made
    for frame in refused:
        with pytest.raises(PeerError):
            net.call_pb("nd", "Deliver", frame)
    assert len(nd.sink.rows) == 3 and nd.inbound.delivered_through == 3 and nd.fence.epoch == 1
    assert nd.inbound.primary_node == "N" and nd.snapshot()["delivered_through"] == 3
