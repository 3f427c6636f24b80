"""The in-memory twin of the gRPC transport: same handlers, same messages (serialized and parsed again,
so a field the wire would lose is lost here too), no sockets. Tests run one body against both."""

from __future__ import annotations

import threading

from ..core.seq import LazyStandbyError
from ..v1 import lazystandby_pb2 as pb
from .peer import RPCS, Handler, PeerError


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


class MemoryPeer:
    """A Peer whose calls go straight to a handler in this process."""

    def __init__(self, net: MemoryNetwork, address: str) -> None:
        self.net = net
        self.address = address

    def push(self, msg: pb.Frame, timeout: float) -> pb.FrameAck:
        return self.net.call(self.address, "Push", msg)

    def backup(self, msg: pb.BackupFrame, timeout: float) -> pb.BackupAck:
        return self.net.call(self.address, "Backup", msg)

    def deliver(self, msg: pb.OutputFrame, timeout: float) -> pb.Level0Ack:
        return self.net.call(self.address, "Deliver", msg)

    def heartbeat(self, msg: pb.HeartbeatRequest, timeout: float) -> pb.HeartbeatReply:
        return self.net.call(self.address, "Heartbeat", msg)

    def takeover(self, msg: pb.TakeoverRequest, timeout: float) -> pb.TakeoverReply:
        return self.net.call(self.address, "Takeover", msg)

    def register_standby(self, msg: pb.RegisterStandbyRequest, timeout: float) -> pb.RegisterStandbyReply:
        return self.net.call(self.address, "RegisterStandby", msg)

    def status(self, timeout: float) -> pb.StatusReply:
        return self.net.call(self.address, "Status", pb.StatusRequest())

    def close(self) -> None:
        pass
