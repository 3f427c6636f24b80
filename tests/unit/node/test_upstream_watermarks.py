"""Nu with a window query: watermark records placed at their positions, late ticks out of the link order
and into the late data, and OQu trimmed only as far as no open window needs."""

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core.acks import Checkpoint
from lazystandby.core.errors import MalformedRecord
from lazystandby.core.seq import StreamRegistry
from lazystandby.core.tuples import TupleBatch
from lazystandby.formats import control
from lazystandby.harness.check import window_expected
from lazystandby.node.upstream import UpstreamNode
from lazystandby.sources.base import GeneratorSource
from lazystandby.transport.memory import MemoryNetwork


def nu(every=4, streams="I1", idle=0, operator="python"):
    cfg = NodeConfig(role="upstream", listen="nu", primary="n", query="SELECT symbol, count(*) FROM ticks "
                                                                      "GROUP BY window(ts, '100 milliseconds'), symbol",
                     watermark_every=every, streams=streams, watermark_idle=idle, operator=operator)
    return UpstreamNode(cfg, GeneratorSource(streams.split(","), total=0), MemoryNetwork().peer)


def ticks(first, ts, stream=1):
    return TupleBatch(first, [stream] * len(ts), list(range(1, len(ts) + 1)),
                      [f"A,1.0,1,{t},X".encode() for t in ts])


def test_a_stream_read_ahead_holds_no_tick_of_the_other_late():
    """I1 read far ahead of I2 (one partition's fetch before the other's): the watermark waits for I2,
    so none of I2's ticks is late; then it is the least of the two streams' largest event times."""
    n = nu(streams="I1,I2")
    ahead = n.intake.place(ticks(1, [1000, 2000, 3000, 4000, 5000, 6000], stream=1))
    marks = [control.watermark_of(ahead.payload(i)) for i in range(len(ahead)) if ahead.streams[i] == 0]
    assert marks == [0, 0]  # I2 not heard from: nothing is final, nothing late
    behind = n.intake.place(ticks(len(ahead) + 1, [1000, 1100, 1200, 1300], stream=2))
    assert n.counters["late_tuples"] == 0 and len(behind) == 5
    records = [i for i in range(len(behind)) if behind.streams[i] == 0]
    assert [control.watermark_of(behind.payload(i)) for i in records] == [1200]  # min(6000, 1200)
    # The record carries both streams' state: a restarted Nu resumes from it.
    assert control.watermark_state(behind.payload(records[0])) == {"1": [6000, 7], "2": [1200, 11]}


def test_with_the_spark_operator_the_watermark_is_the_largest_event_time_on_any_stream():
    """Spark's own watermark is the largest event time its query read: the records must carry that, so a
    stream read ahead makes the other's ticks late, as the single-stream truth table says."""
    n = nu(streams="I1,I2", operator="spark")
    ahead = n.intake.place(ticks(1, [1000, 2000, 3000, 4000, 5000, 6000], stream=1))
    marks = [control.watermark_of(ahead.payload(i)) for i in range(len(ahead)) if ahead.streams[i] == 0]
    assert marks == [3000, 6000]
    behind = n.intake.place(ticks(len(ahead) + 1, [1000, 1100], stream=2))
    assert len(behind) == 0 and n.counters["late_tuples"] == 2
    q = n.cfg.parsed_query
    payloads = [f"A,1.0,1,{t},X".encode() for t in [1000, 2000, 3000, 4000, 5000, 6000, 1000, 1100]]
    assert window_expected(payloads, q, every=4)[1] == [6, 7]


def test_a_quiet_stream_stops_holding_the_watermark_after_watermark_idle_positions():
    n = nu(streams="I1,I2", idle=4)
    out = n.intake.place(ticks(1, [1000, 2000, 3000, 4000, 5000, 6000, 7000], stream=1))
    marks = [control.watermark_of(out.payload(i)) for i in range(len(out)) if out.streams[i] == 0]
    # I2, never heard from, holds it until position 4 is more than 4 positions past its start (0).
    assert marks == [0, 6000]
    late = n.intake.place(ticks(len(out) + 1, [1000], stream=2))
    assert len(late) == 0 and n.counters["late_tuples"] == 1


def test_records_at_their_positions_and_late_ticks_out():
    n = nu()
    out = n.intake.place(ticks(1, [1000, 1010, 1020, 1300, 900, 1310]))
    assert out.streams.tolist() == [1, 1, 1, 0, 1, 1]  # position 4 is a record; 900 was late
    assert control.watermark_of(out.payload(3)) == 1020 and out.seqs[3] == 4
    assert n.counters["late_tuples"] == 1 and n.late_data.items[0][1].payload == b"A,1.0,1,900,X"
    assert n.intake.params_at(5).pos == 4  # the watermark in force, sent with checkpoints
    # A poll of late ticks only adds nothing to the link order.
    n.intake.placer.watermark = 5000
    assert len(n.intake.place(ticks(7, [1000, 1001]))) == 0
    assert n.counters["late_tuples"] == 3


def test_oqu_keeps_the_inputs_of_windows_not_delivered():
    n = nu(every=8)
    batch = n.intake.place(ticks(1, [1000, 1010, 1100, 1110, 1120, 1200, 1210, 1220, 1230]))
    n.outbound.oqu.append(batch)
    # Nd holds everything through position 8 (the record at 8, watermark 1210, closed [1000, 1100) and
    # [1100, 1200)); the window [1200, 1300) from position 6 on is open: positions 6 on stay.
    n.outbound.checkpoint = Checkpoint(8, 2)
    n.outbound.trim()
    assert n.outbound.oqu.trimmed_through == 5


def test_a_predicate_switch_is_refused_for_a_window_query():
    with pytest.raises(MalformedRecord, match="no predicate switch"):
        nu().inject_control(control.encode("price > 5"))
    assert StreamRegistry.CONTROL == 0
