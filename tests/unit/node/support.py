"""What the node tests share: tuples, frames and messages as they arrive on the wire, and the fixtures
that give each test fresh nodes on an in-memory network (this folder's conftest.py offers the fixtures)."""

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core import tuples
from lazystandby.core.tuples import TupleBatch
from lazystandby.formats.ticks import Tick
from lazystandby.node.downstream import DownstreamNode
from lazystandby.node.operator_node import OperatorNode
from lazystandby.operators.selection import Selection
from lazystandby.sinks.base import MemorySink
from lazystandby.transport.memory import MemoryNetwork
from lazystandby.transport.wire import codec_to_pb
from lazystandby.v1 import lazystandby_pb2 as pb


def run(first, n, stream=1, seq0=None, payload=None):
    seq0 = first if seq0 is None else seq0
    p = payload or Tick("ACME", 150.0, 100, 1, "XTKS").encode()
    return TupleBatch(first=first, streams=[stream] * n, seqs=list(range(seq0, seq0 + n)), payloads=[p] * n)


def frame(batch, epoch=1, checkpoint=(0, 0)):
    return pb.Frame(epoch=epoch, sender="Nu", first_pos=batch.first, count=len(batch), tuples=tuples.encode(batch),
                    checkpoint=pb.Level1Ack(epoch=epoch, input_pos=checkpoint[0], output_count=checkpoint[1]))


@pytest.fixture
def net():
    return MemoryNetwork()


@pytest.fixture
def primary(net):
    cfg = NodeConfig(role="primary", listen="n", max_tuple_bytes=200, iq_capacity=100)
    n = OperatorNode(cfg, Selection("price > 100"), net.peer)
    net.register("n", n)
    yield n
    n.stop()


def state(n):
    return (n.inbound.received_through, len(n.inbound.iq), dict(n.inbound.seqcheck.last), n.state.role, n.state.epoch)


def push(net, msg):
    return net.call_pb("n", "Push", msg)  # protobuf as it arrives on the wire: a peer may send any bytes


@pytest.fixture
def standby(net):
    # Processes what it receives at once (standby_defer 0): these tests call its operator loop once.
    n = OperatorNode(NodeConfig(role="standby", listen="s", standby_defer=0), Selection("price > 100"), net.peer)
    net.register("s", n)
    yield n
    n.stop()


def backup_frame(enc, batches):
    msgs = []
    for b in batches:
        e = enc.encode(tuples.encode(b))
        msgs.append(pb.BackupBatch(first_pos=b.first, count=len(b), codec=codec_to_pb(e.codec), session=e.session,
                                   index=e.index, payload=e.payload, raw_bytes=e.raw_bytes))
    return pb.BackupFrame(epoch=1, sender="Nu", batches=msgs)


@pytest.fixture
def nd(net):
    """Nd on a clock the test moves (`nd.tick(s)`): its primary's lease runs out only when told."""
    now = [0.0]
    sink = MemorySink()
    d = DownstreamNode(NodeConfig(role="downstream", listen="nd"), sink, clock=lambda: now[0])
    d.tick = lambda s: now.__setitem__(0, now[0] + s)
    net.register("nd", d)
    return d


def out_frame(first, n, epoch=1, sender=None):
    """An output frame from the primary of `epoch`: N in epoch 1, then N' (which took over)."""
    r = run(first, n)
    b = TupleBatch(r.first, r.streams, r.seqs, r.payloads, sources=list(range(first, first + n)))
    return pb.OutputFrame(epoch=epoch, sender=sender or ("N" if epoch == 1 else "N'"), first_oseq=first, count=n,
                          tuples=tuples.encode(b))


class RecordingSource:
    """A generator source that records what Nu makes durable, and can fail to."""

    def __init__(self, fail: int = 0):
        from lazystandby.sources.base import GeneratorSource

        self.inner = GeneratorSource(["I1", "I2"], total=40, rate=0.0)
        self.recorded: list = []
        self.fail = fail

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def record_membership(self, members):
        if self.fail:
            self.fail -= 1
            raise TimeoutError("broker unreachable")
        self.recorded.append(members)


def nu_with(source, standby="s"):
    from lazystandby.node.upstream import UpstreamNode

    cfg = NodeConfig(role="upstream", listen="nu", primary="n", standby=standby)
    nu = UpstreamNode(cfg, source, MemoryNetwork().peer)
    while nu.outbound.oqu.last < 40:
        nu._source_loop()
    return nu


def covered_frame(enc, batch, checkpoint):
    f = backup_frame(enc, [batch])
    f.checkpoint.CopyFrom(pb.Level1Ack(epoch=1, input_pos=checkpoint[0], output_count=checkpoint[1]))
    return f


def loop_once(node):
    """One pass of the operator loop, which must not wait for ever (a deferring loop waits for time)."""
    import threading

    th = threading.Thread(target=node._operator_loop, daemon=True)
    th.start()
    th.join(5)
    alive = th.is_alive()
    if alive:
        node.stop()
        th.join(5)
    assert not alive, "the operator loop waited for ever"


