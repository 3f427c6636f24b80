"""The in-memory twin of the gRPC transport: same handlers, same wire conversions (each message is
encoded, serialized, parsed and decoded again, so a field the wire would lose is lost here too), no
sockets. Tests run one body against both."""

from __future__ import annotations

import threading

from ..core.errors import LazyStandbyError, PeerError, Status
from . import wire
from .peer import Handler, PeerBase
from .refusals import RefusalLog, refuse


class MemoryNetwork:
    """Addresses -> handlers. `down(addr)` makes a node unreachable, as a kill would."""

    def __init__(self) -> None:
        self._nodes: dict[str, Handler] = {}
        self._down: set[str] = set()
        self._refusals: dict[str, RefusalLog] = {}
        self._lock = threading.Lock()

    def register(self, address: str, handler: Handler) -> None:
        with self._lock:
            self._nodes[address] = handler
            self._down.discard(address)

    def down(self, address: str) -> None:
        with self._lock:
            self._down.add(address)

    def up(self, address: str) -> None:
        with self._lock:
            self._down.discard(address)

    def call_bytes(self, address: str, rpc: str, data: bytes) -> bytes:
        """One call with the request's bytes, answered with the reply's: what a gRPC server gets and sends
        (tests use it to put bytes on the wire that no well-behaved peer would)."""
        with self._lock:
            node = None if address in self._down else self._nodes.get(address)
            refusals = self._refusals.setdefault(address, RefusalLog(address))
        if node is None:
            raise PeerError(Status.UNAVAILABLE, f"{address} {rpc}: unreachable")
        try:
            reply = wire.serve_bytes(wire.RPCS[rpc], node, data, node=node.name)
        except LazyStandbyError as e:
            refuse(node, refusals, rpc, e)
            raise PeerError(e.status, f"{address} {rpc}: {e.message}") from None
        with self._lock:
            if address in self._down:  # died while answering: the reply is lost
                raise PeerError(Status.UNAVAILABLE, f"{address} {rpc}: connection lost")
        return reply

    def call_pb(self, address: str, rpc: str, request_pb):
        """One call with a protobuf request, answered with a protobuf reply."""
        return wire.RPCS[rpc].reply_pb.FromString(self.call_bytes(address, rpc, request_pb.SerializeToString()))

    def call(self, address: str, rpc: str, msg):
        r = wire.RPCS[rpc]
        request_pb = r.req_to(msg)
        return wire.reply_with_size(r, self.call_pb(address, rpc, request_pb), request_pb)

    def peer(self, address: str) -> MemoryPeer:
        return MemoryPeer(self, address)


class MemoryPeer(PeerBase):
    """A Peer whose calls go straight to a handler in this process."""

    def __init__(self, net: MemoryNetwork, address: str) -> None:
        self.net = net
        self.address = address

    def _call(self, rpc: str, msg, timeout: float):
        return self.net.call(self.address, rpc, msg)
