"""Nu's side of a takeover: made durable before it answers, refused when it cannot be trusted, restored
after a restart."""

import pytest

from lazystandby.core import messages as m
from lazystandby.core.errors import LazyStandbyError
from lazystandby.core.tuples import TupleBatch
from tests.unit.node.support import RecordingSource, nu_with


def test_nu_makes_a_takeover_durable_before_answering_and_again_on_a_retry():
    src = RecordingSource(fail=1)
    nu = nu_with(src)
    req = m.TakeoverRequest(node="N'", epoch=2, address="s", resend_from=11)
    with pytest.raises(LazyStandbyError) as e:
        nu.handle_takeover(req)
    assert e.value.status == "UNAVAILABLE" and "not yet durable" in e.value.message and src.recorded == []
    reply = nu.handle_takeover(req)  # the standby's retry
    assert reply.resend_from == 11 and nu.outbound.push.address == "s" and nu.fence.epoch == 2
    assert [(x.epoch, x.primary, x.standby) for x in src.recorded] == [(2, "s", "")]
    assert nu.handle_takeover(req) == reply and len(src.recorded) == 1  # durable already: nothing more
    nu.stop()


@pytest.mark.parametrize("req, status, text", [
    (m.TakeoverRequest(node="X", epoch=2, address="mallory:1"), "PERMISSION_DENIED", "this Nu's standby is s"),
    (m.TakeoverRequest(node="N'", epoch=1, address="s"), "ABORTED", "current epoch is 1"),
    # The current epoch's primary announcing itself from an address this Nu does not push to: not stale.
    (m.TakeoverRequest(node="N", epoch=1, address="10.0.0.5:50051"), "PERMISSION_DENIED",
     "set its advertise to n"),
    (m.TakeoverRequest(node="N'", epoch=2, address="s", resend_from=10**9 + 1), "OUT_OF_RANGE",
     "holds positions up to 40"),
])
def test_nu_refuses_a_takeover_it_cannot_trust_and_changes_nothing(req, status, text):
    src = RecordingSource()
    nu = nu_with(src)
    with pytest.raises(LazyStandbyError) as e:
        nu.handle_takeover(req)
    assert e.value.status == status and text in e.value.message
    out = nu.outbound
    assert nu.fence.epoch == 1 and out.push.address == "n" and out.standby.address == "s" and src.recorded == []
    nu.stop()


def test_a_restarted_nu_restores_the_takeover_and_the_standby():
    from lazystandby.core.acks import Checkpoint
    from lazystandby.sources.base import Restored

    class Restarted(RecordingSource):
        def restore(self):
            return Restored(checkpoint=Checkpoint(0, 0), epoch=2, primary="s", held=TupleBatch(first=1),
                            last_seqs={}, standby="spare")

    nu = nu_with(Restarted())
    assert nu.fence.epoch == 2 and nu.outbound.push.address == "s" and nu.outbound.standby.address == "spare"
    # The primary of epoch 2 announcing itself to this Nu changes nothing.
    reply = nu.handle_takeover(m.TakeoverRequest(node="N'", epoch=2, address="s", resend_from=5))
    assert reply.epoch == 2 and nu.counters["takeovers"] == 0
    nu.stop()


def test_a_registration_never_replaces_a_standby_in_sync_that_answers(net):
    """A forged RegisterStandby (plaintext, a raw client) once moved Nu's backup to a port where nothing
    listened. A standby at another address is taken only once the one in place is gone or out of sync;
    the same standby registering again, or one after a takeover (which leaves Nu with none), is taken."""
    from lazystandby.config import NodeConfig
    from lazystandby.node.operator_node import OperatorNode
    from lazystandby.node.upstream import UpstreamNode
    from lazystandby.operators.selection import Selection
    from lazystandby.sources.base import GeneratorSource

    s2 = OperatorNode(NodeConfig(role="standby", listen="s2"), Selection("price > 100"), net.peer)
    net.register("s2", s2)
    nu = UpstreamNode(NodeConfig(role="upstream", listen="nu", primary="n", standby="s2", bsize="10"),
                      GeneratorSource(["I1", "I2"], total=0, rate=0.0), net.peer)
    try:
        nu.handle_register_standby(m.RegisterStandby(node="N'", address="s2"))
        with pytest.raises(LazyStandbyError) as e:
            nu.handle_register_standby(m.RegisterStandby(node="mallory", address="127.0.0.1:9"))
        assert e.value.status == "ALREADY_EXISTS" and "s2 is registered, in sync and answering" in e.value.message
        assert nu.outbound.standby.address == "s2" and nu.counters["standby_registrations_refused"] == 1
        nu.handle_register_standby(m.RegisterStandby(node="N'", address="s2"))  # itself again: taken
        net.down("s2")
        nu.outbound.backup._status_seen = None  # the last answer is kept for a second; the standby has gone since
        nu.handle_register_standby(m.RegisterStandby(node="spare", address="s3"))  # the one in place is gone
        assert nu.outbound.standby.address == "s3"
    finally:
        nu.stop()


def _restarted_window_nu(trimmed: int, checkpoint: int, head: int):
    """A window-query Nu restarted after recording the takeover to epoch 2 (primary s): it holds the
    inputs after its trim point, before its checkpoint, as the source restores them."""
    from lazystandby.config import NodeConfig
    from lazystandby.core.acks import Checkpoint
    from lazystandby.node.upstream import UpstreamNode
    from lazystandby.sources.base import GeneratorSource, Restored
    from lazystandby.transport.memory import MemoryNetwork

    n = head - trimmed
    held = TupleBatch(trimmed + 1, [1] * n, list(range(trimmed + 1, head + 1)),
                      [f"A,1.0,1,{1000 + 10 * i},X".encode() for i in range(n)])

    class Restarted(GeneratorSource):
        def restore(self):
            return Restored(checkpoint=Checkpoint(checkpoint, 2), epoch=2, primary="s", held=held,
                            last_seqs={"I1": head}, standby="")

    cfg = NodeConfig(role="upstream", listen="nu", primary="n", standby="s",
                     query="SELECT symbol, count(*) FROM ticks GROUP BY window(ts, '100 milliseconds'), symbol")
    return UpstreamNode(cfg, Restarted(["I1"], total=0), MemoryNetwork().peer)


@pytest.mark.parametrize("asked, resent", [(13, 16), (18, 18)])
def test_a_takeover_retried_at_a_restarted_nu_is_resent_from_what_the_standby_lacks(asked, resent):
    """The standby's takeover reached the last Nu, which recorded it and died before answering; the retry
    reaches the restarted Nu, which already knows epoch 2 and its primary. It is answered as the takeover
    itself would be: from what the standby lacks, or from the trim point (a rebuild), never from where the
    restarted Nu's cursor happens to be (a standby that holds its state would drop it)."""
    nu = _restarted_window_nu(trimmed=15, checkpoint=20, head=40)
    try:
        out = nu.outbound
        assert out.oqu.trimmed_through == 15 and out.oqu.last == 40 and out.checkpoint.input_pos == 20
        nu.outbound.push.cursor = 41  # where a push to the new primary may have left it
        reply = nu.handle_takeover(m.TakeoverRequest(node="N'", epoch=2, address="s", resend_from=asked))
        assert (reply.resend_from, reply.checkpoint.input_pos, reply.head_pos) == (resent, 20, 40)
        assert nu.outbound.push.cursor == resent and nu.fence.epoch == 2 and nu.counters["takeovers"] == 0
    finally:
        nu.stop()
