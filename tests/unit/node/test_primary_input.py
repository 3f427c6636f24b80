"""The primary's input: frames from Nu checked whole and refused precisely (a clear error naming
node, stream and position, a counter, no change of state); what a fenced primary answers; when it says
it finished its frames."""

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core import tuples
from lazystandby.core.errors import PeerError
from lazystandby.core.roles import Role
from lazystandby.node.operator_node import OperatorNode
from lazystandby.operators.selection import Selection
from lazystandby.v1 import lazystandby_pb2 as pb
from tests.unit.node.support import frame, push, run, state

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


def test_good_frames_are_queued_and_acked(net, primary):
    ack = push(net, frame(run(1, 5)))
    assert ack.received_through == 5 and len(primary.inbound.iq) == 5


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


def test_a_fenced_primary_answering_heartbeats_counts_as_a_failure(net, primary):
    s = OperatorNode(NodeConfig(role="standby", listen="s", primary="n", heartbeat_misses=2), Selection("price > 1"),
                     net.peer)
    from lazystandby.core.detector import FailureDetector

    s.standby_side.detector = FailureDetector(0.01, 2, s.clock())
    s.standby_side.registered.set()
    s.takeover.run = lambda: s.counters.update(["suspected"])  # the suspicion is what this test is about
    try:
        primary.state.become(Role.FENCED)
        s.standby_side.heartbeat_loop()
        s.standby_side.heartbeat_loop()
        assert s.counters["heartbeat_not_primary"] == 2 and s.counters["suspected"] == 1
    finally:
        s.stop()


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
