"""Calls from a client that is no node: what a person (or a bug) with network access to a node port can
send. The fault catalog's forged calls and the decompression bomb are made here; each returns what the
node answered and how long it took. With TLS on, such a client has no node certificate and is refused at
the handshake; over plaintext, the protocol's own checks refuse it.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import zstandard as zstd

from ..v1 import lazystandby_pb2 as pb
from ..v1 import lazystandby_pb2_grpc as pb_grpc


@dataclass
class Answer:
    status: str  # the gRPC status name (OK when the node accepted it)
    details: str
    ms: float


def _channel(address: str, ca: str = "") -> grpc.Channel:
    """A client channel with no client certificate: plaintext, or TLS trusting `ca` (then refused)."""
    if ca:
        return grpc.secure_channel(address, grpc.ssl_channel_credentials(Path(ca).read_bytes()))
    return grpc.insecure_channel(address)


def _call(address: str, rpc: str, msg, ca: str = "", timeout: float = 5.0) -> Answer:
    ch = _channel(address, ca)
    t0 = time.perf_counter()
    try:
        getattr(pb_grpc.LazyStandbyStub(ch), rpc)(msg, timeout=timeout)
        return Answer("OK", "", (time.perf_counter() - t0) * 1000)
    except grpc.RpcError as e:
        return Answer(e.code().name, e.details() or "", (time.perf_counter() - t0) * 1000)
    finally:
        ch.close()


def deliver(address: str, epoch: int, ca: str = "") -> Answer:
    """A Deliver claiming `epoch`, with no tuples (an Nd that trusted any sender would adopt the epoch and
    fence the primary)."""
    return _call(address, "Deliver", pb.OutputFrame(epoch=epoch, sender="mallory"), ca)


def push(address: str, epoch: int, ca: str = "") -> Answer:
    """A Push claiming `epoch` (a primary that trusted it would fence itself)."""
    return _call(address, "Push", pb.Frame(epoch=epoch, sender="mallory"), ca)


def backup_jump(address: str, epoch: int, ca: str = "") -> Answer:
    """A Backup with no batches and a checkpoint at input 10^9 (a standby that trusted it would jump there)."""
    ckpt = pb.Level1Ack(epoch=epoch, input_pos=10**9, output_count=0)
    return _call(address, "Backup", pb.BackupFrame(epoch=epoch, sender="mallory", checkpoint=ckpt), ca)


def handover(address: str, epoch: int, ca: str = "") -> Answer:
    """A Handover notice in `epoch`, as a leaving primary sends its standby: heartbeat me now."""
    return _call(address, "Handover", pb.HandoverNotice(epoch=epoch, sender="mallory"), ca)


def bomb_payload(size: int = 1 << 30) -> bytes:
    """One zstd frame of `size` zero bytes whose header declares it, made without holding `size` bytes:
    about 32 KB for 1 GiB."""
    c = zstd.ZstdCompressor(level=3, write_content_size=True)
    chunk = b"\0" * (1 << 20)
    out = io.BytesIO()
    with c.stream_writer(out, size=size, closefd=False) as w:
        for _ in range(size // len(chunk)):
            w.write(chunk)
    return out.getvalue()


def bomb(address: str, epoch: int, ca: str = "", payload: bytes | None = None) -> Answer:
    """A backup batch that inflates to 1 GiB while claiming 100 raw bytes, in a new codec session."""
    batch = pb.BackupBatch(first_pos=1, count=1, codec=pb.CODEC_ZSTD, session=12345, index=0,
                           payload=payload if payload is not None else bomb_payload(), raw_bytes=100)
    return _call(address, "Backup", pb.BackupFrame(epoch=epoch, sender="mallory", batches=[batch]), ca)
