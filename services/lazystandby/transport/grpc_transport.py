"""The gRPC adapter: a servicer that hands each call to the node's handler, and a client Peer.

Standard shape (grpc route_guide): pure handlers live in node/; messages are converted in wire.py; this
file only carries them and turns protocol errors into gRPC statuses.
"""

from __future__ import annotations

import logging
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ..core.authz import authorize
from ..core.errors import LazyStandbyError, PeerError, Status
from ..v1 import lazystandby_pb2_grpc as pb_grpc
from . import wire
from .peer import Handler, PeerBase
from .refusals import RefusalLog, refuse
from .tls import TlsFiles, peer_common_name

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
        # A peer restarted in a container or a pod comes back at another address under the same name. gRPC
        # re-resolves a name at most once every 30 s by default, and gives a connection attempt 20 s: a
        # standby's Takeover would go on to the old address for that long after the peer is back. Both
        # limits lowered, a takeover reaches the new address within a second or two of its return.
        ("grpc.dns_min_time_between_resolutions_ms", 500),
        ("grpc.min_reconnect_backoff_ms", 2000),  # C-core's minimum connect timeout, despite the name
        # A channel with no call for 30 minutes (gRPC's default) drops its connection, and the next call makes
        # a new one: a standby's channel to Nd, warmed for its takeover (Peer.warm), would be cold again.
        ("grpc.client_idle_timeout_ms", 2**31 - 1),
    ]


def _method(handler: Handler, rpc: wire.Rpc, refusals: RefusalLog, tls: bool):
    def call(request: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            if tls:
                # One place decides who may send what; handlers never look at identity.
                authorize(rpc.name, peer_common_name(context), node=handler.name)
            return wire.serve_bytes(rpc, handler, request, node=handler.name)
        except LazyStandbyError as e:
            refuse(handler, refusals, rpc.name, e)
            context.abort(getattr(grpc.StatusCode, e.status.value), e.message)

    return call


def service(handler: Handler, *, tls: bool = False) -> grpc.GenericRpcHandler:
    """Every RPC of the node service, delegated to `handler`. Requests arrive as bytes and are parsed in
    wire.py, so bytes that are not protobuf are answered INVALID_ARGUMENT by the protocol's own error
    (gRPC's generated servicer would answer INTERNAL with a traceback); protocol errors become gRPC
    statuses, the node's state untouched."""
    refusals = RefusalLog(handler.name)
    return grpc.method_handlers_generic_handler(SERVICE, {
        name: grpc.unary_unary_rpc_method_handler(_method(handler, rpc, refusals, tls))
        for name, rpc in wire.RPCS.items()})


class Listener:
    """A gRPC server that holds its address from construction, before the node it will serve exists: the
    port is the node's before anything slow starts (a Spark session opens sockets of its own, in the
    ephemeral range, which would otherwise be free to draw it). `serve` then starts it for the node;
    `close` lets the address go when no node comes. OSError: the address cannot be had."""

    def __init__(self, address: str, *, max_message: int = MAX_MESSAGE, workers: int = 8,
                 tls: TlsFiles | None = None) -> None:
        self.address, self.tls = address, tls
        # No SO_REUSEPORT (gRPC's default on Linux): a second server on a taken port must fail, not share it.
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers),
                                  options=[*channel_options(max_message), ("grpc.so_reuseport", 0)])
        try:
            bound = (self.server.add_secure_port(address, tls.server()) if tls
                     else self.server.add_insecure_port(address))
        except RuntimeError as e:  # grpcio raises this for an address in use
            raise OSError(f"cannot listen on {address}: {e}") from e
        if bound == 0:
            raise OSError(f"cannot listen on {address}")
        self.port = bound

    def serve(self, handler: Handler) -> grpc.Server:
        """Start answering on the address for `handler`, grpc.health.v1 registered; returns the server."""
        self.server.add_generic_rpc_handlers((service(handler, tls=self.tls is not None),))
        health_pb2_grpc.add_HealthServicer_to_server(RoleHealth(handler), self.server)
        self.server.start()
        return self.server

    def close(self) -> None:
        # gRPC closes a listening socket only for a server that started: started with no handlers, it
        # answers nothing for the moment it lives.
        self.server.start()
        self.server.stop(grace=0).wait()


def serve(handler: Handler, address: str, *, max_message: int = MAX_MESSAGE, workers: int = 8,
          tls: TlsFiles | None = None) -> grpc.Server:
    """Start a gRPC server for `handler` on `address` with grpc.health.v1 registered; returns it started.
    With `tls`, only clients with a certificate from the deployment's CA get through the handshake, and
    each RPC is accepted only from the roles that may send it."""
    return Listener(address, max_message=max_message, workers=workers, tls=tls).serve(handler)


class RoleHealth(health.HealthServicer):
    """grpc.health.v1 that follows the node's role: a fenced (or stopping) node is NOT_SERVING, so an
    orchestrator's health check sees a demoted primary as unhealthy, not as a working node."""

    def __init__(self, handler: Handler) -> None:
        super().__init__()
        self.handler = handler

    def Check(self, request, context):
        if request.service not in ("", SERVICE):
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {request.service!r}")
        serving = self.handler.serving()
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING if serving
                                              else health_pb2.HealthCheckResponse.NOT_SERVING)


def _closed(e: ValueError, address: str, rpc: str) -> PeerError:
    """A call begun on a peer that another thread closed meanwhile (a replaced standby): to the caller
    this is a cancelled call, never an exception that ends its loop."""
    if "closed channel" not in str(e):
        raise e
    return PeerError(Status.CANCELLED, f"{address} {rpc}: the channel was closed")


def _peer_error(e: grpc.RpcError, what: str) -> PeerError:
    code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
    details = e.details() if hasattr(e, "details") else str(e)
    # gRPC says that nothing is there only in its text (the code is UNAVAILABLE, as for a timeout): a refused
    # TCP connection, or a name that resolves to nothing (a removed container or pod; a slow peer keeps its
    # name and its port). A connection reset while it is made is a listener going away: a SIGKILLed
    # process's kernel still completes handshakes on its listening socket while it frees its memory, then
    # resets them as it closes its files (seen for tens of milliseconds after a kill, before any refusal).
    text = (details or "").lower()
    refused = code is grpc.StatusCode.UNAVAILABLE and (
        "connection refused" in text or "domain name not found" in text
        or ("failed to connect" in text and "connection reset by peer" in text))
    return PeerError(code.name, f"{what}: {details}", refused=refused)


class _Background:
    """A blocking call running on a worker thread; `result()` waits for it (raising PeerError as it did)."""

    def __init__(self, future: futures.Future) -> None:
        self._future = future

    def done(self) -> bool:
        return self._future.done()

    def result(self):
        return self._future.result()


class GrpcPeer(PeerBase):
    """A Peer over a gRPC channel. Channels reconnect by themselves; a dead peer raises UNAVAILABLE."""

    def __init__(self, address: str, *, max_message: int = MAX_MESSAGE, tls: TlsFiles | None = None) -> None:
        self.address = address
        # A private subchannel pool: gRPC otherwise shares connections between channels to one address, and
        # closing one peer (a replaced standby) should not touch another's connection to the same node.
        options = [*channel_options(max_message), ("grpc.use_local_subchannel_pool", 1)]
        self._channel = (grpc.secure_channel(address, tls.channel(), options=options) if tls
                         else grpc.insecure_channel(address, options=options))
        self._stub = pb_grpc.LazyStandbyStub(self._channel)
        self._worker: futures.ThreadPoolExecutor | None = None
        self._warming: grpc.Future | None = None
        self._watchers: list = []

    def _call(self, rpc: str, msg, timeout: float):
        # Blocking, not a future and a wait: gRPC runs a Python thread that spins on the completion queue
        # while futures are outstanding, a fifth of Nu's samples when every call went that way.
        r = wire.RPCS[rpc]
        request = r.req_to(msg)
        try:
            return wire.reply_with_size(r, getattr(self._stub, rpc)(request, timeout=timeout), request)
        except grpc.RpcError as e:
            raise _peer_error(e, f"{self.address} {rpc}") from None
        except ValueError as e:
            raise _closed(e, self.address, rpc) from None

    def backup_async(self, msg, timeout: float) -> _Background:
        # A blocking call on a thread of this peer's own rather than a gRPC future: futures keep a Python
        # thread spinning on the channel's completion queue, which cost more CPU than the call itself.
        if self._worker is None:
            self._worker = futures.ThreadPoolExecutor(1, thread_name_prefix=f"call-{self.address}")
        return _Background(self._worker.submit(self.backup, msg, timeout))

    def warm(self) -> None:
        """The connection (TCP, TLS handshake, HTTP/2 settings) made in the background: a first call on a
        cold channel pays the handshakes (several times a warm call's time on loopback with TLS), and a
        standby's first call to Nd is its takeover's. Until it is ready gRPC keeps trying, within its backoff."""
        if self._warming is None or self._warming.done():
            self._warming = grpc.channel_ready_future(self._channel)

    def watch(self, on_lost) -> bool:
        """The channel's connectivity, watched: READY to anything but SHUTDOWN (which `close` causes) is a
        lost connection. A SIGKILLed peer's kernel closes its sockets, and gRPC saw it about 4 ms after the
        kill on loopback, where a heartbeat would have found it up to an interval later. gRPC polls the
        channel on a thread of its own, waking five times a second."""
        last = [None]

        def changed(state: grpc.ChannelConnectivity) -> None:
            if last[0] is grpc.ChannelConnectivity.READY and state not in (grpc.ChannelConnectivity.READY,
                                                                          grpc.ChannelConnectivity.SHUTDOWN):
                on_lost()
            last[0] = state

        self._channel.subscribe(changed, try_to_connect=False)
        self._watchers.append(changed)
        return True

    def close(self) -> None:
        for changed in self._watchers:
            self._channel.unsubscribe(changed)
        self._watchers.clear()
        if self._warming is not None:
            self._warming.cancel()  # stops watching the channel (it would otherwise outlive the peer)
        self._channel.close()  # a call in flight on the worker ends (CANCELLED) and the worker with it
        if self._worker is not None:
            self._worker.shutdown(wait=False)
