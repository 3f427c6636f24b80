"""The gRPC adapter: a servicer that hands each call to the node's handler, and a client Peer.

Standard shape (grpc route_guide): pure handlers live in node/; messages are converted in wire.py; this
file only carries them and turns protocol errors into gRPC statuses.
"""

from __future__ import annotations

import logging
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ..core.seq import LazyStandbyError
from ..v1 import lazystandby_pb2_grpc as pb_grpc
from . import wire
from .peer import Handler, PeerBase, PeerError

log = logging.getLogger(__name__)

MAX_MESSAGE = 64 << 20  # frames of many tuples; gRPC's 4 MB default is too small for a backlog resend
SERVICE = "lazystandby.v1.LazyStandby"


def channel_options(max_message: int = MAX_MESSAGE) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", max_message),
        ("grpc.max_receive_message_length", max_message),
        ("grpc.enable_retries", 0),
        ("grpc.keepalive_time_ms", 10_000),
        ("grpc.initial_reconnect_backoff_ms", 50),
        ("grpc.max_reconnect_backoff_ms", 500),
    ]


def _method(handler: Handler, rpc: wire.Rpc):
    def call(request, context: grpc.ServicerContext):
        try:
            return wire.serve_call(rpc, handler, request, node=handler.name)
        except LazyStandbyError as e:
            handler.count_error(e.counter)
            context.abort(getattr(grpc.StatusCode, e.status.value), e.message)

    return call


class Servicer(pb_grpc.LazyStandbyServicer):
    """Delegates every RPC to the node; protocol errors become gRPC statuses, the node's state untouched."""

    def __init__(self, handler: Handler) -> None:
        for name, rpc in wire.RPCS.items():
            setattr(self, name, _method(handler, rpc))


def serve(handler: Handler, address: str, *, max_message: int = MAX_MESSAGE, workers: int = 8) -> grpc.Server:
    """Start a gRPC server for `handler` on `address` with grpc.health.v1 registered; returns it started."""
    # No SO_REUSEPORT (gRPC's default on Linux): a second server on a taken port must fail, not share it.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers),
                         options=[*channel_options(max_message), ("grpc.so_reuseport", 0)])
    pb_grpc.add_LazyStandbyServicer_to_server(Servicer(handler), server)
    hs = health.HealthServicer()
    hs.set("", health_pb2.HealthCheckResponse.SERVING)
    hs.set(SERVICE, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(hs, server)
    try:
        bound = server.add_insecure_port(address)
    except RuntimeError as e:  # grpcio raises this for an address in use
        raise OSError(f"cannot listen on {address}: {e}") from e
    if bound == 0:
        raise OSError(f"cannot listen on {address}")
    server.start()
    return server


class GrpcPeer(PeerBase):
    """A Peer over a gRPC channel. Channels reconnect by themselves; a dead peer raises UNAVAILABLE."""

    def __init__(self, address: str, *, max_message: int = MAX_MESSAGE) -> None:
        self.address = address
        # A private subchannel pool: gRPC otherwise shares connections between channels to one address, and
        # closing one peer (a replaced standby) should not touch another's connection to the same node.
        self._channel = grpc.insecure_channel(
            address, options=[*channel_options(max_message), ("grpc.use_local_subchannel_pool", 1)])
        self._stub = pb_grpc.LazyStandbyStub(self._channel)

    def _call(self, rpc: str, msg, timeout: float):
        r = wire.RPCS[rpc]
        request = r.req_to(msg)
        try:
            return wire.reply_with_size(r, getattr(self._stub, rpc)(request, timeout=timeout), request)
        except grpc.RpcError as e:
            code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
            details = e.details() if hasattr(e, "details") else str(e)
            raise PeerError(code.name, f"{self.address} {rpc}: {details}") from None

    def close(self) -> None:
        self._channel.close()
