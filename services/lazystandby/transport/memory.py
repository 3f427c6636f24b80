"""The in-memory twin of the gRPC transport: same handlers, same messages (serialized and parsed again,
so a field the wire would lose is lost here too), no sockets. Tests run one body against both."""

from __future__ import annotations

import threading

from ..core.seq import LazyStandbyError
from .peer import RPCS, Handler, PeerBase, PeerError


class MemoryNetwork:
    """Addresses -> handlers. `down(addr)` makes a node unreachable, as a kill would."""

    def __init__(self) -> None:
        self._nodes: dict[str, Handler] = {}
        self._down: set[str] = set()
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

    def call(self, address: str, rpc: str, msg):
        with self._lock:
            node = None if address in self._down else self._nodes.get(address)
        if node is None:
            raise PeerError("UNAVAILABLE", f"{address} {rpc}: unreachable")
        attr, req_type = RPCS[rpc]
        request = req_type.FromString(msg.SerializeToString())
        try:
            reply = getattr(node, attr)(request)
        except LazyStandbyError as e:
            node.count_error(e.counter)
            raise PeerError(e.status, f"{address} {rpc}: {e.message}") from None
        with self._lock:
            if address in self._down:  # died while answering: the reply is lost
                raise PeerError("UNAVAILABLE", f"{address} {rpc}: connection lost")
        return type(reply).FromString(reply.SerializeToString())

    def peer(self, address: str) -> MemoryPeer:
        return MemoryPeer(self, address)


class MemoryPeer(PeerBase):
    """A Peer whose calls go straight to a handler in this process."""

    def __init__(self, net: MemoryNetwork, address: str) -> None:
        self.net = net
        self.address = address

    def _call(self, rpc: str, msg, timeout: float):
        return self.net.call(self.address, rpc, msg)
