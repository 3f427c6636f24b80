"""Protobuf <-> core: the one place that knows the wire format of the node protocol.

Every message a node sends or receives is a core type (core/messages.py); the gRPC servicer and client
and the in-memory twin convert here, in both directions. Decoding a message checks what the format alone
can check (a frame's tuples against its header, enum values) and raises the core error for it, so a
handler only ever sees well-formed core values.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from ..core import messages as m
from ..core import tuples
from ..core.acks import Checkpoint
from ..core.codec import CodecName, EncodedBatch, EncodedRun
from ..core.errors import MalformedMessage
from ..core.recovery_model import StandbyView
from ..core.roles import Role
from ..v1 import lazystandby_pb2 as pb

_CODEC_PB = {
    CodecName.NONE: pb.CODEC_NONE,
    CodecName.ZLIB: pb.CODEC_ZLIB,
    CodecName.ZSTD: pb.CODEC_ZSTD,
    CodecName.ZSTD_DICT: pb.CODEC_ZSTD_DICT,
    CodecName.ZSTD_STREAM: pb.CODEC_ZSTD_STREAM,
    CodecName.ZSTD_STREAM_DICT: pb.CODEC_ZSTD_STREAM_DICT,
}
_CODEC_FROM_PB = {v: k for k, v in _CODEC_PB.items()}

_ROLE_PB = {
    Role.UPSTREAM: pb.ROLE_UPSTREAM,
    Role.PRIMARY: pb.ROLE_PRIMARY,
    Role.STANDBY: pb.ROLE_STANDBY,
    Role.PROMOTING: pb.ROLE_PROMOTING,
    Role.FENCED: pb.ROLE_FENCED,
    Role.DOWNSTREAM: pb.ROLE_DOWNSTREAM,
    Role.LEAVING: pb.ROLE_LEAVING,
}
_ROLE_FROM_PB = {v: k for k, v in _ROLE_PB.items()}


# --- small pieces -------------------------------------------------------------------------------------
def codec_to_pb(codec: CodecName) -> int:
    return _CODEC_PB[codec]


def codec_from_pb(value: int) -> CodecName:
    try:
        return _CODEC_FROM_PB[value]
    except KeyError:
        raise MalformedMessage(f"unknown codec {value}; expected one of {sorted(_CODEC_FROM_PB)}") from None


def role_to_pb(role: Role) -> int:
    return _ROLE_PB.get(role, pb.ROLE_UNSPECIFIED)


def role_from_pb(value: int) -> Role:
    return _ROLE_FROM_PB.get(value, Role.STARTING)


def level1_to_pb(c: Checkpoint, epoch: int) -> pb.Level1Ack:
    return pb.Level1Ack(epoch=epoch, input_pos=c.input_pos, output_count=c.output_count)


def checkpoint_from_pb(msg: pb.Level1Ack) -> Checkpoint:
    return Checkpoint(msg.input_pos, msg.output_count)


def params_to_pb(p: m.Params | None) -> pb.Params | None:
    return None if p is None else pb.Params(pos=p.pos, payload=p.payload)


def params_from_pb(msg, field: str = "params") -> m.Params | None:
    return m.Params(msg.params.pos, msg.params.payload) if msg.HasField(field) else None


def _batch(data: bytes, first: int, count: int, what: str) -> tuples.TupleBatch | None:
    """A frame's tuples, checked against its header; None for an empty frame (a poll)."""
    if not count and not data:
        return None
    return tuples.decode_frame(data, first, count, what=what)


# --- Push -----------------------------------------------------------------------------------------------
def frame_to_pb(f: m.Frame) -> pb.Frame:
    out = pb.Frame(epoch=f.epoch, sender=f.sender, checkpoint=level1_to_pb(f.checkpoint, f.epoch),
                   params=params_to_pb(f.params))
    if f.batch is not None:
        out.first_pos, out.count, out.tuples = f.batch.first, len(f.batch), tuples.encode(f.batch)
    return out


def frame_from_pb(msg: pb.Frame, *, node: str) -> m.Frame:
    return m.Frame(epoch=msg.epoch, sender=msg.sender, checkpoint=checkpoint_from_pb(msg.checkpoint),
                   batch=_batch(msg.tuples, msg.first_pos, msg.count, f"{node}: frame {msg.first_pos}"),
                   params=params_from_pb(msg))


def frame_ack_to_pb(a: m.FrameAck) -> pb.FrameAck:
    return pb.FrameAck(level1=level1_to_pb(a.level1, a.epoch), received_through=a.received_through)


def frame_ack_from_pb(msg: pb.FrameAck) -> m.FrameAck:
    return m.FrameAck(epoch=msg.level1.epoch, level1=checkpoint_from_pb(msg.level1),
                      received_through=msg.received_through)


# --- Backup ---------------------------------------------------------------------------------------------
def _run_to_pb(r: m.BackupRun) -> pb.BackupRun:
    e = r.encoded
    width, sizes = _packed_sizes(e.payload_sizes, e.raw_sizes)
    count = tuples.common_count(r.counts)  # 0 tuples a batch goes as a list: batch_tuples 0 means none
    return pb.BackupRun(first_pos=r.first, codec=codec_to_pb(e.codec), session=e.session, first_index=e.first_index,
                        batch_tuples=count or 0, counts=None if count else r.counts,
                        size_width=width, sizes=sizes, payloads=e.payload, dictionary=e.dictionary, fresh=e.fresh)


# struct's little-endian codes of 1, 2 and 4 bytes, unsigned. One byte serves Bsize 1, where a batch is a
# tuple and protobuf's varints would take three bytes a batch. struct packs a list of ints faster than
# array, and a width too narrow fails at its first size too big.
_WIDTHS = ((1, "B"), (2, "H"), (4, "I"))
_WIDTH_BYTES = tuple(width for width, _ in _WIDTHS)  # what a reader takes as size_width, besides 0


def _packed_sizes(payload_sizes: list[int], raw_sizes: list[int]) -> tuple[int, bytes]:
    """BackupRun's packed form of the two size lists: (size_width, sizes), the narrowest width that holds
    every size."""
    n = len(payload_sizes) + len(raw_sizes)
    for width, code in _WIDTHS:
        try:
            return width, struct.pack(f"<{n}{code}", *payload_sizes, *raw_sizes)
        except struct.error:
            continue
    raise ValueError(f"a backup batch size does not fit in {_WIDTHS[-1][0]} bytes")


def _sizes_from_pb(r: pb.BackupRun, what: str) -> tuple[list[int], list[int], list[int]]:
    """A run's counts, payload sizes and raw sizes from either form (proto BackupRun), each one per batch."""
    width = r.size_width
    if width == 0:
        if r.sizes:
            raise MalformedMessage(f"{what}: backup run from {r.first_pos} has packed sizes but no size_width")
        payload_sizes, raw_sizes = list(r.payload_sizes), list(r.raw_sizes)
    elif width in _WIDTH_BYTES:
        if r.payload_sizes or r.raw_sizes:
            raise MalformedMessage(f"{what}: backup run from {r.first_pos} has its sizes both packed and repeated")
        if len(r.sizes) % (2 * width):
            raise MalformedMessage(f"{what}: backup run from {r.first_pos} has {len(r.sizes)} bytes of sizes, "
                                   f"not two lists of {width}-byte sizes")
        packed = np.frombuffer(r.sizes, dtype=f"<u{width}")
        half = len(packed) // 2
        payload_sizes, raw_sizes = packed[:half].tolist(), packed[half:].tolist()
    else:
        raise MalformedMessage(f"{what}: backup run from {r.first_pos} has size_width {width} "
                               f"({', '.join(map(str, _WIDTH_BYTES))} or 0)")
    if r.batch_tuples and r.counts:
        raise MalformedMessage(f"{what}: backup run from {r.first_pos} has both batch_tuples and counts")
    counts = [r.batch_tuples] * len(raw_sizes) if r.batch_tuples else list(r.counts)
    return counts, payload_sizes, raw_sizes


def _run_from_pb(r: pb.BackupRun, what: str) -> m.BackupRun:
    counts, payload_sizes, raw_sizes = _sizes_from_pb(r, what)
    n = len(counts)
    if len(payload_sizes) != n or len(raw_sizes) != n:
        raise MalformedMessage(f"{what}: backup run from {r.first_pos} has {n} counts, {len(payload_sizes)} "
                               f"payload sizes and {len(raw_sizes)} raw sizes")
    if sum(payload_sizes) != len(r.payloads):
        raise MalformedMessage(f"{what}: backup run from {r.first_pos} says {sum(payload_sizes)} payload bytes; "
                               f"{len(r.payloads)} arrived")
    return m.BackupRun(first=r.first_pos, counts=counts, encoded=EncodedRun(
        codec=codec_from_pb(r.codec), session=r.session, first_index=r.first_index, payload=r.payloads,
        payload_sizes=payload_sizes, raw_sizes=raw_sizes, dictionary=r.dictionary, fresh=r.fresh))


def backup_frame_to_pb(f: m.BackupFrame) -> pb.BackupFrame:
    return pb.BackupFrame(epoch=f.epoch, sender=f.sender, checkpoint=level1_to_pb(f.checkpoint, f.epoch),
                          params=params_to_pb(f.params), batches=[
        pb.BackupBatch(first_pos=b.first, count=b.count, codec=codec_to_pb(b.encoded.codec),
                       session=b.encoded.session, index=b.encoded.index, payload=b.encoded.payload,
                       dictionary=b.encoded.dictionary, raw_bytes=b.encoded.raw_bytes)
        for b in f.batches], runs=[_run_to_pb(r) for r in f.runs], hint=_hint_to_pb(f.hint))


def _hint_to_pb(h: m.RecoveryHint | None) -> pb.RecoveryHint | None:
    if h is None:
        return None
    return pb.RecoveryHint(head_pos=h.head_pos, resend_floor=h.resend_floor, per_call_s=h.per_call_s,
                           per_byte_s=h.per_byte_s, tuple_bytes=h.tuple_bytes, frame_max=h.frame_max)


def _hint_from_pb(msg: pb.BackupFrame) -> m.RecoveryHint | None:
    if not msg.HasField("hint"):
        return None
    h = msg.hint
    return m.RecoveryHint(head_pos=h.head_pos, resend_floor=h.resend_floor, per_call_s=h.per_call_s,
                          per_byte_s=h.per_byte_s, tuple_bytes=h.tuple_bytes, frame_max=h.frame_max)


def backup_frame_from_pb(msg: pb.BackupFrame, *, node: str = "") -> m.BackupFrame:
    return m.BackupFrame(epoch=msg.epoch, sender=msg.sender, checkpoint=checkpoint_from_pb(msg.checkpoint),
                         params=params_from_pb(msg), batches=[
        m.BackupBatch(first=b.first_pos, count=b.count, encoded=EncodedBatch(
            codec=codec_from_pb(b.codec), session=b.session, index=b.index, payload=b.payload,
            raw_bytes=b.raw_bytes, dictionary=b.dictionary))
        for b in msg.batches], runs=[_run_from_pb(r, node) for r in msg.runs], hint=_hint_from_pb(msg))


def backup_ack_to_pb(a: m.BackupAck) -> pb.BackupAck:
    v = a.view
    view = None if v is None else pb.StandbyView(fixed_s=v.fixed_s, call_s=v.call_s, tuple_s=v.tuple_s, take=v.take,
                                                 backlog=v.backlog)
    return pb.BackupAck(applied_through=a.applied_through, view=view)


def backup_ack_from_pb(msg: pb.BackupAck) -> m.BackupAck:
    v = msg.view
    view = StandbyView(fixed_s=v.fixed_s, call_s=v.call_s, tuple_s=v.tuple_s, take=v.take,
                       backlog=v.backlog) if msg.HasField("view") else None
    return m.BackupAck(applied_through=msg.applied_through, view=view)


# --- Deliver --------------------------------------------------------------------------------------------
def output_frame_to_pb(f: m.OutputFrame) -> pb.OutputFrame:
    out = pb.OutputFrame(epoch=f.epoch, sender=f.sender, leaving=f.leaving)
    if f.batch is not None:
        out.first_oseq, out.count, out.tuples = f.batch.first, len(f.batch), tuples.encode(f.batch)
    return out


def output_frame_from_pb(msg: pb.OutputFrame, *, node: str) -> m.OutputFrame:
    return m.OutputFrame(epoch=msg.epoch, sender=msg.sender, leaving=msg.leaving,
                         batch=_batch(msg.tuples, msg.first_oseq, msg.count, f"{node}: output frame {msg.first_oseq}"))


def level0_to_pb(a: m.Level0Ack) -> pb.Level0Ack:
    return pb.Level0Ack(epoch=a.epoch, received_through=a.received_through)


def level0_from_pb(msg: pb.Level0Ack) -> m.Level0Ack:
    return m.Level0Ack(epoch=msg.epoch, received_through=msg.received_through)


# --- Heartbeat, Takeover, RegisterStandby, Handover, Status ---------------------------------------------
def heartbeat_to_pb(h: m.HeartbeatRequest) -> pb.HeartbeatRequest:
    return pb.HeartbeatRequest(sender=h.sender, epoch=h.epoch, address=h.address,
                               predicted_recovery_s=h.predicted_recovery_s, snapshot_interval_s=h.snapshot_interval_s)


def heartbeat_from_pb(msg: pb.HeartbeatRequest, *, node: str = "") -> m.HeartbeatRequest:
    return m.HeartbeatRequest(sender=msg.sender, epoch=msg.epoch, address=msg.address,
                              predicted_recovery_s=msg.predicted_recovery_s,
                              snapshot_interval_s=msg.snapshot_interval_s)


def heartbeat_reply_to_pb(r: m.HeartbeatReply) -> pb.HeartbeatReply:
    return pb.HeartbeatReply(node=r.node, role=role_to_pb(r.role), epoch=r.epoch,
                             level0=pb.Level0Ack(epoch=r.epoch, received_through=r.level0),
                             received_through=r.received_through, stalled_ms=r.stalled_ms,
                             operator_call_s=r.operator_call_s, operator_tuple_s=r.operator_tuple_s)


def heartbeat_reply_from_pb(msg: pb.HeartbeatReply) -> m.HeartbeatReply:
    return m.HeartbeatReply(node=msg.node, role=role_from_pb(msg.role), epoch=msg.epoch,
                            level0=msg.level0.received_through, received_through=msg.received_through,
                            stalled_ms=msg.stalled_ms, operator_call_s=msg.operator_call_s,
                            operator_tuple_s=msg.operator_tuple_s)


def takeover_to_pb(t: m.TakeoverRequest) -> pb.TakeoverRequest:
    return pb.TakeoverRequest(node=t.node, epoch=t.epoch, address=t.address, resend_from=t.resend_from,
                              primary_unheard_ms=t.primary_unheard_ms)


def takeover_from_pb(msg: pb.TakeoverRequest, *, node: str = "") -> m.TakeoverRequest:
    return m.TakeoverRequest(node=msg.node, epoch=msg.epoch, address=msg.address, resend_from=msg.resend_from,
                             primary_unheard_ms=msg.primary_unheard_ms)


def takeover_reply_to_pb(r: m.TakeoverReply) -> pb.TakeoverReply:
    return pb.TakeoverReply(epoch=r.epoch, delivered_through=r.delivered_through,
                            checkpoint=level1_to_pb(r.checkpoint, r.epoch), head_pos=r.head_pos,
                            resend_from=r.resend_from, params=params_to_pb(r.params))


def takeover_reply_from_pb(msg: pb.TakeoverReply) -> m.TakeoverReply:
    return m.TakeoverReply(epoch=msg.epoch, delivered_through=msg.delivered_through,
                           checkpoint=checkpoint_from_pb(msg.checkpoint), head_pos=msg.head_pos,
                           resend_from=msg.resend_from, params=params_from_pb(msg))


def register_to_pb(r: m.RegisterStandby) -> pb.RegisterStandbyRequest:
    return pb.RegisterStandbyRequest(node=r.node, address=r.address)


def register_from_pb(msg: pb.RegisterStandbyRequest, *, node: str = "") -> m.RegisterStandby:
    return m.RegisterStandby(node=msg.node, address=msg.address)


def register_reply_to_pb(r: m.RegisterStandbyReply) -> pb.RegisterStandbyReply:
    return pb.RegisterStandbyReply(epoch=r.epoch, primary_address=r.primary_address)


def register_reply_from_pb(msg: pb.RegisterStandbyReply) -> m.RegisterStandbyReply:
    return m.RegisterStandbyReply(epoch=msg.epoch, primary_address=msg.primary_address)


def handover_to_pb(h: m.HandoverNotice) -> pb.HandoverNotice:
    return pb.HandoverNotice(sender=h.sender, epoch=h.epoch)


def handover_from_pb(msg: pb.HandoverNotice, *, node: str = "") -> m.HandoverNotice:
    return m.HandoverNotice(sender=msg.sender, epoch=msg.epoch)


def handover_ack_to_pb(a: m.HandoverAck) -> pb.HandoverAck:
    return pb.HandoverAck(node=a.node, role=role_to_pb(a.role), epoch=a.epoch, beats=a.beats)


def handover_ack_from_pb(msg: pb.HandoverAck) -> m.HandoverAck:
    return m.HandoverAck(node=msg.node, role=role_from_pb(msg.role), epoch=msg.epoch, beats=msg.beats)


def status_to_pb(_: None) -> pb.StatusRequest:
    return pb.StatusRequest()


def status_from_pb(_: pb.StatusRequest, *, node: str = "") -> None:
    return None


def status_reply_to_pb(r: m.StatusReply) -> pb.StatusReply:
    return pb.StatusReply(node=r.node, role=role_to_pb(r.role), epoch=r.epoch, json=json.dumps(r.snapshot))


def status_reply_from_pb(msg: pb.StatusReply) -> m.StatusReply:
    return m.StatusReply(node=msg.node, role=role_from_pb(msg.role), epoch=msg.epoch,
                         snapshot=json.loads(msg.json) if msg.json else {})


def snapshot_to_pb(f: m.SnapshotFrame) -> pb.SnapshotFrame:
    out = pb.SnapshotFrame(epoch=f.epoch, sender=f.sender, at=level1_to_pb(f.at, f.epoch), state=f.state,
                           encode_s=f.encode_s, base=f.base)
    if f.tail is not None and len(f.tail):
        out.tail_first, out.tail_count, out.tail = f.tail.first, len(f.tail), tuples.encode(f.tail)
        if f.tail.sources is not None:
            out.tail_sources = np.asarray(f.tail.sources, "<i8").tobytes()
    return out


def snapshot_from_pb(msg: pb.SnapshotFrame, *, node: str = "") -> m.SnapshotFrame:
    tail = _batch(msg.tail, msg.tail_first, msg.tail_count, f"{node}: snapshot tail {msg.tail_first}")
    if tail is not None and msg.tail_sources:
        sources = np.frombuffer(msg.tail_sources, "<i8")
        if len(sources) != len(tail):
            raise MalformedMessage(f"{node}: snapshot tail of {len(tail)} outputs with {len(sources)} sources")
        tail = tuples.TupleBatch.of_columns(tail.first, tail.streams, tail.seqs, tail.payloads, sources)
    return m.SnapshotFrame(epoch=msg.epoch, sender=msg.sender, at=checkpoint_from_pb(msg.at), state=msg.state,
                           tail=tail, encode_s=msg.encode_s, base=msg.base)


def snapshot_ack_to_pb(a: m.SnapshotAck) -> pb.SnapshotAck:
    return pb.SnapshotAck(held_through=a.held_through)


def snapshot_ack_from_pb(msg: pb.SnapshotAck) -> m.SnapshotAck:
    return m.SnapshotAck(held_through=msg.held_through)


def probe_to_pb(p: m.Probe) -> pb.ProbeRequest:
    return pb.ProbeRequest(padding=p.padding)


def probe_from_pb(msg: pb.ProbeRequest, *, node: str = "") -> m.Probe:
    return m.Probe(padding=msg.padding)


def probe_ack_to_pb(a: m.ProbeAck) -> pb.ProbeReply:
    return pb.ProbeReply(received=a.received)


def probe_ack_from_pb(msg: pb.ProbeReply) -> m.ProbeAck:
    return m.ProbeAck(received=msg.received)


# --- the RPC table --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Rpc:
    """One RPC: the handler method it calls and the conversions around it. Request decoders take the
    receiving node's name, for their error messages. `counts_bytes`: the reply carries the request's size."""

    name: str
    handler: str
    req_pb: type
    reply_pb: type
    req_to: Callable[[Any], Any]
    req_from: Callable[..., Any]
    reply_to: Callable[[Any], Any]
    reply_from: Callable[[Any], Any]
    counts_bytes: bool = False


RPCS: dict[str, Rpc] = {r.name: r for r in [
    Rpc("Push", "handle_push", pb.Frame, pb.FrameAck, frame_to_pb, frame_from_pb, frame_ack_to_pb,
        frame_ack_from_pb, counts_bytes=True),
    Rpc("Backup", "handle_backup", pb.BackupFrame, pb.BackupAck, backup_frame_to_pb, backup_frame_from_pb,
        backup_ack_to_pb, backup_ack_from_pb, counts_bytes=True),
    Rpc("Deliver", "handle_deliver", pb.OutputFrame, pb.Level0Ack, output_frame_to_pb, output_frame_from_pb,
        level0_to_pb, level0_from_pb, counts_bytes=True),
    Rpc("Heartbeat", "handle_heartbeat", pb.HeartbeatRequest, pb.HeartbeatReply, heartbeat_to_pb,
        heartbeat_from_pb, heartbeat_reply_to_pb, heartbeat_reply_from_pb),
    Rpc("Takeover", "handle_takeover", pb.TakeoverRequest, pb.TakeoverReply, takeover_to_pb, takeover_from_pb,
        takeover_reply_to_pb, takeover_reply_from_pb),
    Rpc("RegisterStandby", "handle_register_standby", pb.RegisterStandbyRequest, pb.RegisterStandbyReply,
        register_to_pb, register_from_pb, register_reply_to_pb, register_reply_from_pb),
    Rpc("Handover", "handle_handover", pb.HandoverNotice, pb.HandoverAck, handover_to_pb, handover_from_pb,
        handover_ack_to_pb, handover_ack_from_pb),
    Rpc("Status", "handle_status", pb.StatusRequest, pb.StatusReply, status_to_pb, status_from_pb,
        status_reply_to_pb, status_reply_from_pb),
    Rpc("Probe", "handle_probe", pb.ProbeRequest, pb.ProbeReply, probe_to_pb, probe_from_pb, probe_ack_to_pb,
        probe_ack_from_pb),
    Rpc("Snapshot", "handle_snapshot", pb.SnapshotFrame, pb.SnapshotAck, snapshot_to_pb, snapshot_from_pb,
        snapshot_ack_to_pb, snapshot_ack_from_pb, counts_bytes=True),
]}


def parse_request(rpc: Rpc, data: bytes, *, node: str):
    """A request's bytes as protobuf; MalformedMessage when they are not one."""
    try:
        return rpc.req_pb.FromString(data)
    except DecodeError as e:
        raise MalformedMessage(f"{node}: {rpc.name} request of {len(data)} bytes is not a protobuf "
                               f"{rpc.req_pb.__name__}: {e}") from None


def serve_call(rpc: Rpc, handler, request_pb, *, node: str):
    """The server side of one call: decode, hand to the node, encode the reply (errors propagate)."""
    return rpc.reply_to(getattr(handler, rpc.handler)(rpc.req_from(request_pb, node=node)))


def serve_bytes(rpc: Rpc, handler, data: bytes, *, node: str) -> bytes:
    """The server side of one call, from the request's bytes to the reply's."""
    return serve_call(rpc, handler, parse_request(rpc, data, node=node), node=node).SerializeToString()


def reply_with_size(rpc: Rpc, reply_pb, request_pb):
    """The client side's decoded reply, with the request's size on the wire where the reply carries it."""
    reply = rpc.reply_from(reply_pb)
    if rpc.counts_bytes:
        reply.wire_bytes = request_pb.ByteSize()
    return reply
