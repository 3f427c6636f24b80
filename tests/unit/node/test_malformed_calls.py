"""Calls whose bytes are no message of the protocol: INVALID_ARGUMENT, one log line, nothing changed."""

import pytest

from lazystandby.core.codec import BatchEncoder, CodecName
from lazystandby.core.errors import PeerError
from tests.unit.node.support import backup_frame, run


@pytest.mark.parametrize("rpc", ["Push", "Backup", "Deliver", "Heartbeat", "Takeover", "RegisterStandby",
                                 "Handover"])
def test_bytes_that_are_not_protobuf_get_invalid_argument_and_one_log_line(net, primary, rpc, caplog):
    caplog.set_level("WARNING", logger="lazystandby")
    for _ in range(3):
        with pytest.raises(PeerError) as e:
            net.call_bytes("n", rpc, b"\xff\xff\xff not protobuf")
        assert e.value.status == "INVALID_ARGUMENT" and "is not a protobuf" in e.value.message
    assert primary.errors["malformed_message"] == 3
    lines = [r for r in caplog.records if "not a protobuf" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelname == "WARNING"  # one line, however many calls


def test_an_unknown_codec_enum_is_invalid_argument_and_changes_nothing(net, standby):
    enc = BatchEncoder(CodecName.ZSTD)
    bad = backup_frame(enc, [run(1, 5)])
    bad.batches[0].codec = 42
    with pytest.raises(PeerError) as e:
        net.call_pb("s", "Backup", bad)
    assert e.value.status == "INVALID_ARGUMENT" and "unknown codec 42" in e.value.message
    assert standby.inbound.received_through == 0 and standby.standby_side.decoder.session == 0
