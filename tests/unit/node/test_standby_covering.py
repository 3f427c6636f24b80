"""A standby skipping what Nu's Level-1 point covers: where it numbers on, what it drops, and the
checkpoints it does not trust."""

import pytest

from lazystandby.core.codec import BatchEncoder, CodecName
from lazystandby.core.errors import PeerError
from lazystandby.v1 import lazystandby_pb2 as pb
from tests.unit.node.support import backup_frame, covered_frame, loop_once, run


def test_a_standby_that_skips_a_parameter_change_still_switches_at_its_position(net, standby):
    """A control record inside the positions a checkpoint skips is never seen by the standby; the params
    sent with the checkpoint switch it as if it had (once a standby missed it, and after a failover its
    output followed the old predicate)."""
    from lazystandby.formats import control

    standby.standby_side.primary_received = 100  # the primary's heartbeats showed it got that far
    frame_ = pb.BackupFrame(epoch=1, sender="Nu", checkpoint=pb.Level1Ack(epoch=1, input_pos=20, output_count=3),
                            params=pb.Params(pos=7, payload=control.encode("price < 5")))
    assert net.call_pb("s", "Backup", frame_).applied_through == 20
    standby._operator_loop()
    assert standby.operator.switches == [(7, "price < 5")] and standby.processed.input_pos == 20


def test_a_standby_skips_inputs_a_checkpoint_covers_and_numbers_on_from_it(net, standby):
    standby.standby_side.primary_received = 100
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
    standby.standby_side.primary_received = 100
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", backup_frame(enc, [run(1, 40)]))
    assert net.call_pb("s", "Backup", covered_frame(enc, run(61, 40), (70, 70))).applied_through == 100
    assert standby.counters["backup_covered_dropped"] == 10 and standby.counters["backup_tuples"] == 70
    loop_once(standby)
    assert standby.processed.input_pos == 100 and standby.processed.output_count == 100
    # 1..40 are covered too (skipped); 71..100 processed, their outputs numbered on from the checkpoint's 70.
    assert standby.counters["skipped_tuples"] == 40 and standby.counters["processed_tuples"] == 30


def test_a_run_wholly_inside_its_checkpoint_is_a_jump_and_a_forged_one_is_still_a_gap(net, standby):
    standby.standby_side.primary_received = 80
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", backup_frame(enc, [run(1, 40)]))
    assert net.call_pb("s", "Backup", covered_frame(enc, run(61, 10), (80, 80))).applied_through == 80
    assert standby.inbound.received_through == 80 and standby.counters["backup_covered_dropped"] == 10
    # A checkpoint past what the primary's heartbeats say it holds is not trusted: the skip is refused.
    with pytest.raises(PeerError) as e:
        net.call_pb("s", "Backup", covered_frame(enc, run(91, 20), (100, 100)))
    assert e.value.status == "OUT_OF_RANGE" and standby.inbound.received_through == 80


def test_a_checkpoint_that_counts_too_few_outputs_is_not_skipped_to(net, standby, caplog):
    standby.standby_side.primary_received = 100
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
    # The heartbeats say the primary got only this far: the checkpoint is forged.
    standby.standby_side.primary_received = 5
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", covered_frame(enc, run(1, 20), (10, 10)))
    standby._operator_loop()
    assert standby.counters["skipped_tuples"] == 0 and standby.counters["processed_tuples"] == 20


def test_a_checkpoint_that_comes_before_the_heartbeat_vouching_for_it_is_applied_when_that_comes(net, standby):
    """Covering is applied only up to what the primary's heartbeats show it received; a checkpoint that came
    first waits for that heartbeat instead of being dropped (covering then lagged by up to 0.7 s at
    10,000 tuples/s). One the primary never reaches is never applied."""
    standby.standby_side.primary_received = 5
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", covered_frame(enc, run(1, 20), (10, 10)))
    assert standby.covered[0].input_pos == 0
    with standby.lock:
        standby.standby_side.primary_reached(8, 0.0)
    assert standby.covered[0].input_pos == 0  # not there yet
    with standby.lock:
        standby.standby_side.primary_reached(12, 0.0)
    assert standby.covered[0].input_pos == 10 and standby.standby_side.primary_received == 12
    standby._operator_loop()
    assert standby.counters["skipped_tuples"] == 10 and standby.counters["processed_tuples"] == 10


def test_a_skip_past_covered_inputs_says_when_processed_moved_but_is_no_frame_run(net, standby):
    standby.standby_side.primary_received = 100
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    net.call_pb("s", "Backup", covered_frame(enc, run(1, 20), (20, 20)))
    standby._operator_loop()
    s = standby.snapshot()
    assert s["processed"] == [20, 20] and standby.counters["processed_tuples"] == 0
    assert s["processed_at"] is not None and s["first_processed_at"] is None


def test_a_standby_without_backup_counts_its_cpu_from_the_primarys_first_input(standby):
    """Bsize inf sends a Passive Standby no backup: the primary's heartbeat is what tells it inputs flow, so
    that its CPU and the primary's are counted over the same time (standby_cpu_ratio)."""
    with standby.lock:
        standby.standby_side.primary_reached(0, 0.0)
    assert standby.cpu_at_first_input is None
    with standby.lock:
        standby.standby_side.primary_reached(40, 0.1)
    first = standby.cpu_at_first_input
    assert first is not None
    with standby.lock:
        standby.standby_side.primary_reached(90, 0.2)
    assert standby.cpu_at_first_input == first
