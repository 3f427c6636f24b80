"""The protocol rules that live in core/, once each: frame admission, the epoch fence every role keeps,
per-stream sequence checks, takeover retries, retry policy by status, and the wire mapping."""

import pytest

from lazystandby.core import messages as m
from lazystandby.core.acks import Checkpoint
from lazystandby.core.admission import admit_runs, covered_head
from lazystandby.core.codec import BatchEncoder, CodecName
from lazystandby.core.errors import (
    CorruptBatch,
    DuplicateSequence,
    MalformedMessage,
    NonMonotonicSequence,
    SequenceGap,
    StaleEpoch,
    Status,
)
from lazystandby.core.recovery import RecoveryTimes, TakeoverLog, TakeoverRecord
from lazystandby.core.retry import after_backup_error, after_push_error, fenced_by
from lazystandby.core.roles import EpochFence, Role, RoleState
from lazystandby.core.seq import PerStreamSequence
from lazystandby.core.tuples import TupleBatch
from lazystandby.transport import wire


def test_admission_accepts_what_follows_on():
    assert admit_runs("N", 5, [(6, 8), (8, 10)], Checkpoint()) is False


def test_admission_refuses_repeats_and_gaps_naming_the_node():
    with pytest.raises(DuplicateSequence, match="N: positions 3..4 repeat what is held; expected 6"):
        admit_runs("N", 5, [(3, 5)], Checkpoint())
    with pytest.raises(SequenceGap, match="N: position 8 skips ahead; expected 6"):
        admit_runs("N", 5, [(8, 9)], Checkpoint(6, 2))
    with pytest.raises(SequenceGap, match="position 12 skips ahead; expected 10"):
        admit_runs("N", 5, [(8, 10), (12, 13)], Checkpoint(7, 2))  # only the first run may jump


def test_a_run_that_skips_ahead_drops_only_the_head_its_checkpoint_covers():
    assert covered_head(40, 61, Checkpoint(70, 70)) == 10  # 41..60 skipped, 61..70 covered: dropped
    assert covered_head(40, 61, Checkpoint(60, 60)) == 0  # the ordinary jump: nothing to drop
    assert covered_head(40, 61, Checkpoint(55, 55)) == 0  # the checkpoint does not cover the skip: a gap
    assert covered_head(40, 41, Checkpoint(70, 70)) == 0  # follows on: taken as it is (and skipped later)
    assert covered_head(40, 30, Checkpoint(70, 70)) == 0  # repeats what is held: refused as it is


def test_admission_jumps_only_over_what_the_checkpoint_covers():
    assert admit_runs("N'", 5, [(21, 23)], Checkpoint(20, 4)) is True
    with pytest.raises(SequenceGap):
        admit_runs("N'", 5, [(21, 23)], Checkpoint(19, 4))


def test_the_fence_refuses_older_epochs_and_only_moves_forward():
    f = EpochFence("Nd", 2)
    with pytest.raises(StaleEpoch, match="Nd: delivery from N carries epoch 1; current epoch is 2"):
        f.check(1, sender="N", what="delivery")
    assert f.is_newer(3) and not f.is_newer(2)
    assert f.advance(3) is True and f.advance(1) is False and f.epoch == 3
    assert f.admit(3, sender="N'", what="delivery") is False


def test_role_state_reads_its_epoch_from_its_fence():
    s = RoleState("N'")
    s.become(Role.STANDBY, epoch=0)
    s.fence.advance(2)
    assert s.epoch == 2
    s.become(Role.PROMOTING, epoch=1)  # an epoch never moves back, whatever a caller asks
    assert s.epoch == 2 and s.history[-1] == (Role.PROMOTING, 2)


def test_per_stream_sequence_one_record_at_a_time():
    p = PerStreamSequence("Nu")
    p.accept(1, 5)
    p.accept(2, 1)
    with pytest.raises(DuplicateSequence):
        p.accept(1, 5)
    with pytest.raises(NonMonotonicSequence):
        p.accept(1, 4)
    assert p.last == {1: 5, 2: 1}
    p.reset()
    p.accept(1, 1)


def test_takeover_log_recognises_a_retry_and_refuses_a_stale_takeover():
    fence, log = EpochFence("Nu", 1), TakeoverLog("Nu")
    assert log.check(fence, 2, "N'") is None
    fence.advance(2)
    rec = log.add(TakeoverRecord(2, "N'", 10.0, reply="r", facts={"resent": 3}))
    assert log.check(fence, 2, "N'") is rec  # the same takeover, retried
    with pytest.raises(StaleEpoch, match="Nu: takeover by N2 with epoch 2; current epoch is 2"):
        log.check(fence, 2, "N2")
    with pytest.raises(StaleEpoch):
        log.check(fence, 1, "N'")
    assert log.as_status() == [{"epoch": 2, "node": "N'", "at": 10.0, "resent": 3}]


def test_recovery_phases_add_up():
    t = RecoveryTimes(last_ok=1.0, detected=1.3, connected=1.32, live=1.4)
    assert t.phases() == pytest.approx({"detection": 0.3, "reconnection": 0.02, "data_recovery": 0.08})


def test_retry_policy_is_keyed_on_status():
    assert after_push_error(Status.RESOURCE_EXHAUSTED).resync is False
    assert after_push_error(Status.UNAVAILABLE).resync is True
    assert after_backup_error(Status.UNAVAILABLE).delay == 0.2 and not after_backup_error(Status.UNAVAILABLE).resync
    assert after_backup_error(Status.ALREADY_EXISTS).delay == 0.01 and after_backup_error(Status.ALREADY_EXISTS).resync
    assert after_backup_error(Status.RESOURCE_EXHAUSTED).resync is False
    assert fenced_by(Status.ABORTED) and not fenced_by(Status.FAILED_PRECONDITION)
    assert Status("UNAVAILABLE").unreachable and not Status.ABORTED.unreachable


def _batch(first, n, sources=False):
    return TupleBatch(first=first, streams=[1] * n, seqs=list(range(1, n + 1)), payloads=[b"x,1"] * n,
                      sources=list(range(first, first + n)) if sources else None)


@pytest.mark.parametrize("msg", [
    m.Frame(epoch=2, sender="Nu", checkpoint=Checkpoint(4, 1), batch=_batch(5, 3)),
    m.Frame(epoch=2, sender="Nu", checkpoint=Checkpoint(4, 1)),
    m.OutputFrame(epoch=3, sender="N", batch=_batch(7, 2, sources=True)),
    m.OutputFrame(epoch=3, sender="N", batch=_batch(7, 2), leaving=True),
    m.TakeoverRequest(node="N'", epoch=2, address="x:1", resend_from=9),
    m.RegisterStandby(node="N'", address="x:1"),
    m.HeartbeatRequest(sender="N'", epoch=2),
    m.HeartbeatRequest(sender="N'", epoch=2, address="x:1"),
    m.HandoverNotice(sender="N", epoch=3),
], ids=lambda x: type(x).__name__)
def test_requests_survive_the_wire(msg):
    name = {m.Frame: "Push", m.OutputFrame: "Deliver", m.TakeoverRequest: "Takeover",
            m.RegisterStandby: "RegisterStandby", m.HeartbeatRequest: "Heartbeat",
            m.HandoverNotice: "Handover"}[type(msg)]
    rpc = wire.RPCS[name]
    back = rpc.req_pb.FromString(rpc.req_to(msg).SerializeToString())
    assert rpc.req_from(back, node="x") == msg


def test_backup_frames_and_replies_survive_the_wire():
    enc = BatchEncoder(CodecName.ZSTD).encode(b"abc")
    f = m.BackupFrame(epoch=1, sender="Nu", checkpoint=Checkpoint(3, 1), batches=[m.BackupBatch(4, 2, enc)])
    assert wire.backup_frame_from_pb(wire.backup_frame_to_pb(f)) == f
    r = m.TakeoverReply(epoch=2, delivered_through=5, checkpoint=Checkpoint(9, 4), head_pos=20, resend_from=10)
    assert wire.takeover_reply_from_pb(wire.takeover_reply_to_pb(r)) == r
    for role in (Role.PRIMARY, Role.LEAVING, Role.FENCED):
        h = m.HeartbeatReply(node="N", role=role, epoch=2, level0=5, received_through=9)
        assert wire.heartbeat_reply_from_pb(wire.heartbeat_reply_to_pb(h)) == h
    for beats in (True, False):
        a = m.HandoverAck(node="N'", role=Role.STANDBY, epoch=3, beats=beats)
        assert wire.handover_ack_from_pb(wire.handover_ack_to_pb(a)) == a
    s = m.StatusReply(node="Nd", role=Role.DOWNSTREAM, epoch=2, snapshot={"a": 1})
    assert wire.status_reply_from_pb(wire.status_reply_to_pb(s)) == s


def test_the_wire_checks_a_frame_against_its_header_and_names_the_node():
    bad = wire.frame_to_pb(m.Frame(epoch=1, sender="Nu", checkpoint=Checkpoint(), batch=_batch(5, 3)))
    bad.count = 4
    with pytest.raises(CorruptBatch, match="N: frame 5 says 4 tuples from 5; its bytes hold 3 from 5"):
        wire.frame_from_pb(bad, node="N")


def test_an_unknown_codec_is_a_clear_error():
    msg = wire.backup_frame_to_pb(m.BackupFrame(epoch=1, sender="Nu", checkpoint=Checkpoint(), batches=[
        m.BackupBatch(1, 1, BatchEncoder(CodecName.NONE).encode(b"a"))]))
    msg.batches[0].codec = 42
    with pytest.raises(MalformedMessage, match=r"unknown codec 42; expected one of \[0, 1, 2, 3, 4, 5\]"):
        wire.backup_frame_from_pb(msg)


def test_authorization_by_the_role_in_the_certificate():
    from lazystandby.core.authz import MAY_SEND, authorize
    from lazystandby.core.errors import PermissionDenied, Unauthenticated

    authorize("Push", "upstream:nu", node="N")
    authorize("Deliver", "operator:n2", node="Nd")
    authorize("Status", "admin:ops", node="Nd")
    with pytest.raises(PermissionDenied, match="Nd: Deliver from upstream:nu refused: role upstream may not send"):
        authorize("Deliver", "upstream:nu", node="Nd")
    with pytest.raises(PermissionDenied):
        authorize("Push", "admin:ops", node="N")
    for cn in ("", "nu", "boss:nu", "upstream:"):
        with pytest.raises(Unauthenticated):
            authorize("Push", cn, node="N")
    assert set(MAY_SEND) == set(wire.RPCS)  # every RPC has its senders named


def test_the_fault_catalog_is_data_every_runner_can_read():
    from lazystandby.harness.faults import CATALOG, Runner, for_runner

    assert all(f.expect and (f.steps or f.name == "none") for f in CATALOG.values())  # "none": a run, no fault
    assert {"kill-primary-then-upstream", "kill-standby-then-primary", "kill-upstream-and-primary"} <= {
        n for n, f in CATALOG.items() if f.double}
    assert set(for_runner(Runner.CONTAINERS)) == {
        "kill-primary", "pause-primary", "kill-standby", "pause-standby", "pause-upstream", "pause-downstream",
        "kill-upstream-restart", "kill-downstream-restart", "kill-primary-repeatedly",
        "kill-primary-then-upstream", "kill-upstream-and-primary", "kill-standby-then-primary",
        "kill-primary-then-restart", "stop-primary", "rolling-restart",
        "pause-standby-then-kill-primary", "kill-primary-then-pause-downstream",
        "isolate-primary", "isolate-standby",
        "partition-primary-standby", "partition-upstream-primary", "partition-primary-downstream",
        "partition-upstream-standby", "partition-upstream-standby-then-kill-primary",
        "partition-primary-standby-then-kill-primary", "hang-operator",
        "kill-standby-then-hang-operator", "kill-operator", "kill-standby-operator"}


def test_the_fault_docs_list_every_fault_of_the_catalog():
    from pathlib import Path

    from lazystandby.harness.faults import CATALOG

    doc = (Path(__file__).resolve().parents[3] / "docs" / "faults.md").read_text()
    assert [n for n in CATALOG if f"`{n}`" not in doc] == []
