"""Nu with a window query: watermark records placed at their positions, late ticks out of the link order
and into the late data, and OQu trimmed only as far as no open window needs."""

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core.acks import Checkpoint
from lazystandby.core.errors import MalformedRecord
from lazystandby.core.seq import StreamRegistry
from lazystandby.core.tuples import TupleBatch
from lazystandby.formats import control
from lazystandby.node.upstream import UpstreamNode
from lazystandby.sources.base import GeneratorSource
from lazystandby.transport.memory import MemoryNetwork


def nu(every=4):
    cfg = NodeConfig(role="upstream", listen="nu", primary="n", query="window 100ms by symbol agg count",
                     watermark_every=every)
    return UpstreamNode(cfg, GeneratorSource(["I1", "I2"], total=0), MemoryNetwork().peer)


def ticks(first, ts):
    return TupleBatch(first, [1] * len(ts), list(range(1, len(ts) + 1)), [f"A,1.0,1,{t},X".encode() for t in ts])


def test_records_at_their_positions_and_late_ticks_out():
    n = nu()
    out = n._place(ticks(1, [1000, 1010, 1020, 1300, 900, 1310]))
    assert out.streams.tolist() == [1, 1, 1, 0, 1, 1]  # position 4 is a record; 900 was late
    assert control.watermark_of(out.payload(3)) == 1020 and out.seqs[3] == 4
    assert n.counters["late_tuples"] == 1 and n.late_data.items[0][1].payload == b"A,1.0,1,900,X"
    assert n._params_at(5).pos == 4  # the watermark in force, sent with checkpoints
    # A poll of late ticks only adds nothing to the link order.
    n.placer.watermark = 5000
    assert len(n._place(ticks(7, [1000, 1001]))) == 0
    assert n.counters["late_tuples"] == 3


def test_oqu_keeps_the_inputs_of_windows_not_delivered():
    n = nu(every=8)
    batch = n._place(ticks(1, [1000, 1010, 1100, 1110, 1120, 1200, 1210, 1220, 1230]))
    n.oqu.append(batch)
    # Nd holds everything through position 8 (the record at 8, watermark 1210, closed [1000, 1100) and
    # [1100, 1200)); the window [1200, 1300) from position 6 on is open: positions 6 on stay.
    n.checkpoint = Checkpoint(8, 2)
    n._trim()
    assert n.oqu.trimmed_through == 5


def test_a_predicate_switch_is_refused_for_a_window_query():
    with pytest.raises(MalformedRecord, match="no predicate switch"):
        nu().inject_control(control.encode("price > 5"))
    assert StreamRegistry.CONTROL == 0
