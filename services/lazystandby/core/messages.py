"""The node protocol's messages as core types: what node runtimes send and receive.

The transport maps them onto the wire (transport/wire.py: protobuf) and back; nothing in node/ sees the
wire format. Field meanings follow proto/lazystandby/v1/lazystandby.proto. `wire_bytes` on a reply is
filled in by the transport: the size of the request it answers, as sent (seed 000's overhead counts bytes
on the links, so the nodes need it without knowing the encoding).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .acks import Checkpoint
from .codec import EncodedBatch, EncodedRun
from .recovery_model import StandbyView
from .roles import Role
from .tuples import TupleBatch


@dataclass(frozen=True, slots=True)
class Params:
    """The operator parameters in force at a position: the latest control record at or before it."""

    pos: int
    payload: bytes


@dataclass(slots=True)
class Frame:
    """Nu -> primary: input tuples at link positions batch.first..; no batch = a poll for acks.
    `checkpoint` is Nu's trim point: a frame may skip positions only when it covers them exactly."""

    epoch: int
    sender: str
    checkpoint: Checkpoint
    batch: TupleBatch | None = None
    params: Params | None = None  # in force at the checkpoint


@dataclass(slots=True)
class FrameAck:
    """The primary's Level-1 ack (in `epoch`) and the last position it holds."""

    epoch: int
    level1: Checkpoint
    received_through: int
    wire_bytes: int = 0


@dataclass(slots=True)
class BackupBatch:
    """One Bsize batch of Algorithm 1: positions first..first+count-1, encoded by the link's codec."""

    first: int
    count: int
    encoded: EncodedBatch


@dataclass(slots=True)
class BackupRun:
    """Consecutive Bsize batches of Algorithm 1 travelling as one (each still compressed on its own):
    positions first .. first+sum(counts)-1, batch i holding counts[i] tuples."""

    first: int
    counts: list[int]
    encoded: EncodedRun


@dataclass(slots=True)
class BackupFrame:
    """Nu -> standby: batches, and Nu's trim checkpoint (all an idle or Upstream Backup standby gets)."""

    epoch: int
    sender: str
    checkpoint: Checkpoint
    batches: list[BackupBatch] = field(default_factory=list)
    params: Params | None = None  # in force at the checkpoint
    runs: list[BackupRun] = field(default_factory=list)  # after `batches`, in order (what Nu sends)
    hint: RecoveryHint | None = None  # Nu's part of the predicted recovery


@dataclass(frozen=True, slots=True)
class RecoveryHint:
    """Nu -> standby: what a takeover by this standby would be resent now, and at what cost per call (see
    the proto's RecoveryHint and core.recovery_model)."""

    head_pos: int
    resend_floor: int
    per_call_s: float
    per_byte_s: float
    tuple_bytes: float
    frame_max: int


@dataclass(slots=True)
class BackupAck:
    applied_through: int
    wire_bytes: int = 0
    view: StandbyView | None = None  # the standby's part of a predicted recovery (core.recovery_model)


@dataclass(slots=True)
class OutputFrame:
    """Primary -> Nd: outputs batch.first.. (output sequence numbers); no batch = a poll for the ack.
    `leaving`: the primary's last frame in its epoch (a planned handover): Nd ends its lease."""

    epoch: int
    sender: str
    batch: TupleBatch | None = None
    leaving: bool = False


@dataclass(slots=True)
class Level0Ack:
    """Nd's Level-0 ack: the last output sequence number it holds."""

    epoch: int
    received_through: int
    wire_bytes: int = 0


@dataclass(slots=True)
class SnapshotFrame:
    """Primary -> standby (Passive Standby): the operator's state after input `at.input_pos`, and the outputs
    Nd had not acknowledged then (`tail`, numbered from `tail.first`). `base` 0: the whole state; else a
    delta, what the inputs after `base` (the previous snapshot's position) added (core/snapshots.py)."""

    epoch: int
    sender: str
    at: Checkpoint
    state: bytes
    tail: TupleBatch | None = None
    encode_s: float = 0.0  # the primary's time to encode `state`
    base: int = 0


@dataclass(slots=True)
class SnapshotAck:
    held_through: int
    wire_bytes: int = 0


@dataclass(slots=True)
class Probe:
    """Nu -> standby: padding to time the link by (core.recovery_model.CallCost)."""

    padding: bytes


@dataclass(slots=True)
class ProbeAck:
    received: int


@dataclass(slots=True)
class HeartbeatRequest:
    """Standby -> primary; `address` is where the standby hears of a planned handover ("": not said)."""

    sender: str
    epoch: int
    address: str = ""
    predicted_recovery_s: float = 0.0  # the standby's predicted recovery (0: none yet)
    snapshot_interval_s: float = 0.0  # a Passive Standby's chosen snapshot_interval (0: none)


@dataclass(slots=True)
class HandoverNotice:
    """A primary handing over -> its standby, once Nd has its last frame: heartbeat me now. It moves nothing
    by itself: the standby takes over only when its own heartbeat hears LEAVING."""

    sender: str
    epoch: int


@dataclass(slots=True)
class HandoverAck:
    """Whether the standby heartbeats now (`beats`): not when the notice's epoch is not its primary's."""

    node: str
    role: Role
    epoch: int
    beats: bool = False


@dataclass(slots=True)
class HeartbeatReply:
    """A node's role and epoch; a primary adds Nd's Level-0 ack (Algorithm 3), what it received, and how
    long its operator has left a call unanswered, once that is past operator_stall_max (0: it has not)."""

    node: str
    role: Role
    epoch: int
    level0: int = 0
    received_through: int = 0
    stalled_ms: int = 0
    operator_call_s: float = 0.0  # the primary operator's measured cost per call and per tuple (0: not yet)
    operator_tuple_s: float = 0.0


@dataclass(slots=True)
class TakeoverRequest:
    """Standby -> Nd (step 3) and -> Nu (step 5, with the first position it lacks)."""

    node: str
    epoch: int
    address: str
    resend_from: int = 0
    # To Nd: how long the standby has surely not heard its primary (since its last good heartbeat, less one
    # interval), in ms; 0 = it does not say (core.recovery.PrimaryLease).
    primary_unheard_ms: int = 0


@dataclass(slots=True)
class TakeoverReply:
    """From Nd: the last output it holds. From Nu: its trim checkpoint, head and where it resends from."""

    epoch: int
    delivered_through: int = 0
    checkpoint: Checkpoint = field(default_factory=Checkpoint)
    head_pos: int = 0
    resend_from: int = 0
    params: Params | None = None  # from Nu: in force at its checkpoint


@dataclass(slots=True)
class RegisterStandby:
    node: str
    address: str


@dataclass(slots=True)
class RegisterStandbyReply:
    epoch: int
    primary_address: str


@dataclass(slots=True)
class StatusReply:
    node: str
    role: Role
    epoch: int
    snapshot: dict = field(default_factory=dict)
