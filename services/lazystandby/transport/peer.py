"""What a node needs from another node, independent of how the call travels (gRPC or in memory)."""

from __future__ import annotations

from typing import Protocol

from ..v1 import lazystandby_pb2 as pb


class PeerError(Exception):
    """A call to a peer failed. `status` is the gRPC status name (UNAVAILABLE when unreachable)."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message

    @property
    def unreachable(self) -> bool:
        return self.status in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED", "UNKNOWN")


class Peer(Protocol):
    """One remote node. Every call raises PeerError on failure."""

    address: str

    def push(self, msg: pb.Frame, timeout: float) -> pb.FrameAck: ...
    def backup(self, msg: pb.BackupFrame, timeout: float) -> pb.BackupAck: ...
    def deliver(self, msg: pb.OutputFrame, timeout: float) -> pb.Level0Ack: ...
    def heartbeat(self, msg: pb.HeartbeatRequest, timeout: float) -> pb.HeartbeatReply: ...
    def takeover(self, msg: pb.TakeoverRequest, timeout: float) -> pb.TakeoverReply: ...
    def register_standby(self, msg: pb.RegisterStandbyRequest, timeout: float) -> pb.RegisterStandbyReply: ...
    def status(self, timeout: float) -> pb.StatusReply: ...
    def close(self) -> None: ...


class PeerBase:
    """The named calls of a Peer, each one `_call(rpc, msg, timeout)`; a transport implements `_call`."""

    address: str

    def _call(self, rpc: str, msg, timeout: float):
        raise NotImplementedError

    def push(self, msg: pb.Frame, timeout: float) -> pb.FrameAck:
        return self._call("Push", msg, timeout)

    def backup(self, msg: pb.BackupFrame, timeout: float) -> pb.BackupAck:
        return self._call("Backup", msg, timeout)

    def deliver(self, msg: pb.OutputFrame, timeout: float) -> pb.Level0Ack:
        return self._call("Deliver", msg, timeout)

    def heartbeat(self, msg: pb.HeartbeatRequest, timeout: float) -> pb.HeartbeatReply:
        return self._call("Heartbeat", msg, timeout)

    def takeover(self, msg: pb.TakeoverRequest, timeout: float) -> pb.TakeoverReply:
        return self._call("Takeover", msg, timeout)

    def register_standby(self, msg: pb.RegisterStandbyRequest, timeout: float) -> pb.RegisterStandbyReply:
        return self._call("RegisterStandby", msg, timeout)

    def status(self, timeout: float) -> pb.StatusReply:
        return self._call("Status", pb.StatusRequest(), timeout)

    def close(self) -> None:
        pass


class Handler(Protocol):
    """The server side of a node: one method per RPC, raising LazyStandbyError on bad input."""

    def handle_push(self, msg: pb.Frame) -> pb.FrameAck: ...
    def handle_backup(self, msg: pb.BackupFrame) -> pb.BackupAck: ...
    def handle_deliver(self, msg: pb.OutputFrame) -> pb.Level0Ack: ...
    def handle_heartbeat(self, msg: pb.HeartbeatRequest) -> pb.HeartbeatReply: ...
    def handle_takeover(self, msg: pb.TakeoverRequest) -> pb.TakeoverReply: ...
    def handle_register_standby(self, msg: pb.RegisterStandbyRequest) -> pb.RegisterStandbyReply: ...
    def handle_status(self, msg: pb.StatusRequest) -> pb.StatusReply: ...
    def count_error(self, counter: str) -> None: ...


# RPC name -> (handler method, request type); the gRPC servicer and the in-memory twin share it.
RPCS: dict[str, tuple[str, type]] = {
    "Push": ("handle_push", pb.Frame),
    "Backup": ("handle_backup", pb.BackupFrame),
    "Deliver": ("handle_deliver", pb.OutputFrame),
    "Heartbeat": ("handle_heartbeat", pb.HeartbeatRequest),
    "Takeover": ("handle_takeover", pb.TakeoverRequest),
    "RegisterStandby": ("handle_register_standby", pb.RegisterStandbyRequest),
    "Status": ("handle_status", pb.StatusRequest),
}
