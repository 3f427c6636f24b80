"""Four nodes in one process, over the in-memory twin or real gRPC on loopback: the same test body runs
against both transports (and benchmarks use it to measure the protocol without process start-up)."""

from __future__ import annotations

from collections.abc import Callable

from ..config import NodeConfig
from ..node.downstream import DownstreamNode
from ..node.operator_node import OperatorNode
from ..node.upstream import UpstreamNode
from ..operators.base import Operator
from ..operators.selection import Selection
from ..sinks.base import MemorySink
from ..sources.base import GeneratorSource, Source
from ..transport.grpc_transport import GrpcPeer, serve
from ..transport.memory import MemoryNetwork
from .places import N2, ND, NU, N
from .wait import wait_until


class InProcessTopology:
    """Nu, N, N', Nd. `kill(key)` makes a node vanish (unreachable and stopped), as SIGKILL would."""

    def __init__(self, transport: str = "memory", *, source: Source | None = None,
                 operator: Callable[[str], Operator] = Selection, **settings) -> None:
        self.transport = transport
        self.settings = {"total": 20_000, "rate": 20_000.0, **settings}
        self.net = MemoryNetwork()
        self.servers: dict = {}
        if transport == "memory":
            self.addr = {k: k for k in (NU, N, N2, ND)}
            peers: Callable = self.net.peer
        else:
            from .launcher import free_ports

            self.addr = {k: f"127.0.0.1:{p}" for k, p in zip((NU, N, N2, ND), free_ports(4), strict=True)}
            peers = GrpcPeer
        a = self.addr
        s = self.settings
        predicate = s.get("predicate", "price > 100")
        self.sink = MemorySink()
        self.source = source or GeneratorSource(["I1", "I2"], total=s["total"], rate=s["rate"])
        self.nodes = {
            ND: DownstreamNode(NodeConfig(role="downstream", listen=a[ND], **s), self.sink),
            N: OperatorNode(NodeConfig(role="primary", listen=a[N], upstream=a[NU], downstream=a[ND], **s),
                              operator(predicate), peers),
            N2: OperatorNode(NodeConfig(role="standby", listen=a[N2], upstream=a[NU], downstream=a[ND],
                                          primary=a[N], **s), operator(predicate), peers),
            NU: UpstreamNode(NodeConfig(role="upstream", listen=a[NU], primary=a[N], standby=a[N2], **s),
                               self.source, peers),
        }

    def start(self) -> InProcessTopology:
        # Every node listens before any starts: N' registering with a Nu not yet listening would retry, and
        # a short stream could be acknowledged in full before N' got a single batch.
        for key, node in self.nodes.items():
            if self.transport == "memory":
                self.net.register(self.addr[key], node)
            else:
                self.servers[key] = serve(node, self.addr[key])
        for key in (ND, N, N2, NU):
            self.nodes[key].start()
        return self

    def kill(self, key: str) -> None:
        self.net.down(self.addr[key])
        if key in self.servers:
            self.servers.pop(key).stop(grace=0)
        self.nodes[key].stop()

    def wait(self, cond: Callable[[], bool], timeout: float = 20.0) -> bool:
        return wait_until(cond, timeout, step=0.01)

    def stop(self) -> None:
        for key, node in self.nodes.items():
            if key in self.servers:
                self.servers.pop(key).stop(grace=0)
            node.stop()

    def __enter__(self) -> InProcessTopology:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
