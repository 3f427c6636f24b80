"""The standby's input: backup batches checked whole, refused precisely, and Push refused until promoted."""

import pytest

from lazystandby.core.codec import BatchEncoder, CodecName
from lazystandby.core.errors import PeerError
from tests.unit.node.support import backup_frame, frame, run, state


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


def test_a_backup_from_an_older_epoch_is_refused(net, standby):
    standby.state.fence.advance(2)  # learnt from Nu at registration
    enc = BatchEncoder(CodecName.ZSTD)
    old = backup_frame(enc, [run(1, 5)])
    old.epoch = 1
    with pytest.raises(PeerError) as e:
        net.call_pb("s", "Backup", old)
    assert e.value.status == "ABORTED" and standby.inbound.received_through == 0
