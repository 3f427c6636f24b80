"""What a node needs from another node, independent of how the call travels (gRPC or in memory).

Both sides speak core types (core/messages.py); transport/wire.py maps them onto the wire."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..core import messages as m
from ..core.errors import PeerError


class Pending(Protocol):
    """A call in flight: `result()` waits for its reply (raising PeerError as the call would have)."""

    def result(self): ...
    def done(self) -> bool: ...


class Done:
    """A call already made (transports without asynchronous calls)."""

    def __init__(self, call) -> None:
        self._reply, self._error = None, None
        try:
            self._reply = call()
        except PeerError as e:
            self._error = e

    def done(self) -> bool:
        return True

    def result(self):
        if self._error is not None:
            raise self._error
        return self._reply


class Peer(Protocol):
    """One remote node. Every call raises PeerError on failure."""

    address: str

    def push(self, msg: m.Frame, timeout: float) -> m.FrameAck: ...
    def backup(self, msg: m.BackupFrame, timeout: float) -> m.BackupAck: ...
    def backup_async(self, msg: m.BackupFrame, timeout: float) -> Pending: ...
    def deliver(self, msg: m.OutputFrame, timeout: float) -> m.Level0Ack: ...
    def heartbeat(self, msg: m.HeartbeatRequest, timeout: float) -> m.HeartbeatReply: ...
    def takeover(self, msg: m.TakeoverRequest, timeout: float) -> m.TakeoverReply: ...
    def register_standby(self, msg: m.RegisterStandby, timeout: float) -> m.RegisterStandbyReply: ...
    def handover(self, msg: m.HandoverNotice, timeout: float) -> m.HandoverAck: ...
    def status(self, timeout: float) -> m.StatusReply: ...
    def probe(self, msg: m.Probe, timeout: float) -> m.ProbeAck: ...
    def snapshot(self, msg: m.SnapshotFrame, timeout: float) -> m.SnapshotAck: ...
    def warm(self) -> None: ...
    def watch(self, on_lost: Callable[[], None]) -> bool: ...
    def close(self) -> None: ...


class PeerBase:
    """The named calls of a Peer, each one `_call(rpc, msg, timeout)`; a transport implements `_call`."""

    address: str

    def _call(self, rpc: str, msg, timeout: float):
        raise NotImplementedError

    def push(self, msg: m.Frame, timeout: float) -> m.FrameAck:
        return self._call("Push", msg, timeout)

    def backup(self, msg: m.BackupFrame, timeout: float) -> m.BackupAck:
        return self._call("Backup", msg, timeout)

    def backup_async(self, msg: m.BackupFrame, timeout: float) -> Pending:
        """`backup` without waiting for the reply, where the transport can (here: it waits)."""
        return Done(lambda: self.backup(msg, timeout))

    def deliver(self, msg: m.OutputFrame, timeout: float) -> m.Level0Ack:
        return self._call("Deliver", msg, timeout)

    def heartbeat(self, msg: m.HeartbeatRequest, timeout: float) -> m.HeartbeatReply:
        return self._call("Heartbeat", msg, timeout)

    def takeover(self, msg: m.TakeoverRequest, timeout: float) -> m.TakeoverReply:
        return self._call("Takeover", msg, timeout)

    def register_standby(self, msg: m.RegisterStandby, timeout: float) -> m.RegisterStandbyReply:
        return self._call("RegisterStandby", msg, timeout)

    def handover(self, msg: m.HandoverNotice, timeout: float) -> m.HandoverAck:
        return self._call("Handover", msg, timeout)

    def status(self, timeout: float) -> m.StatusReply:
        return self._call("Status", None, timeout)

    def probe(self, msg: m.Probe, timeout: float) -> m.ProbeAck:
        return self._call("Probe", msg, timeout)

    def snapshot(self, msg: m.SnapshotFrame, timeout: float) -> m.SnapshotAck:
        return self._call("Snapshot", msg, timeout)

    def warm(self) -> None:
        """Start connecting now, without waiting, so that the first call finds the connection made (a
        transport without connections has nothing to do). A peer that cannot be reached changes nothing:
        calls fail as they would have."""

    def watch(self, on_lost: Callable[[], None]) -> bool:
        """Call `on_lost()` (on a thread of the transport's, quickly) each time a connection to the peer that
        was made is lost: its process gone (the kernel closes its sockets) or the connection closed. A hint
        for a failure detector, never a verdict: a peer that is only cut off or paused sends nothing, and a
        peer that closed a connection may still answer on the next one. Whether the transport can tell
        (False: it has no connections to lose, and `on_lost` is never called)."""
        return False

    def close(self) -> None:
        pass


class Handler(Protocol):
    """The server side of a node: one method per RPC, raising LazyStandbyError on bad input."""

    name: str

    def handle_push(self, msg: m.Frame) -> m.FrameAck: ...
    def handle_backup(self, msg: m.BackupFrame) -> m.BackupAck: ...
    def handle_deliver(self, msg: m.OutputFrame) -> m.Level0Ack: ...
    def handle_heartbeat(self, msg: m.HeartbeatRequest) -> m.HeartbeatReply: ...
    def handle_takeover(self, msg: m.TakeoverRequest) -> m.TakeoverReply: ...
    def handle_register_standby(self, msg: m.RegisterStandby) -> m.RegisterStandbyReply: ...
    def handle_handover(self, msg: m.HandoverNotice) -> m.HandoverAck: ...
    def handle_status(self, msg: None) -> m.StatusReply: ...
    def handle_probe(self, msg: m.Probe) -> m.ProbeAck: ...
    def handle_snapshot(self, msg: m.SnapshotFrame) -> m.SnapshotAck: ...
    def count_error(self, counter: str) -> None: ...
    def serving(self) -> bool: ...
