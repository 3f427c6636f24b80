"""The unit tier's topology test bodies, run over real gRPC servers on loopback."""

from tests.unit.harness.test_topology_twin import body_kill_primary, body_no_failure


def test_no_failure_grpc():
    body_no_failure("grpc")


def test_kill_primary_grpc():
    rec = body_kill_primary("grpc", "10")
    assert rec["reconnection_ms"] < 2000


def test_a_second_node_on_a_taken_port_fails_instead_of_sharing_it():
    import pytest

    from lazystandby.config import NodeConfig
    from lazystandby.harness.launcher import free_ports
    from lazystandby.node.downstream import DownstreamNode
    from lazystandby.sinks.base import MemorySink
    from lazystandby.transport.grpc_transport import serve

    ports = free_ports(50)
    assert len(set(ports)) == 50
    addr = f"127.0.0.1:{ports[0]}"
    first = serve(DownstreamNode(NodeConfig(role="downstream", listen=addr), MemorySink()), addr)
    try:
        with pytest.raises(OSError, match="cannot listen"):
            serve(DownstreamNode(NodeConfig(role="downstream", listen=addr), MemorySink()), addr)
    finally:
        first.stop(grace=0)


def test_health_follows_the_role_a_fenced_primary_is_not_serving():
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from lazystandby.config import NodeConfig
    from lazystandby.core.roles import Role
    from lazystandby.harness.launcher import free_ports
    from lazystandby.node.operator_node import OperatorNode
    from lazystandby.operators.selection import Selection
    from lazystandby.transport.grpc_transport import GrpcPeer, serve

    addr = f"127.0.0.1:{free_ports(1)[0]}"
    n = OperatorNode(NodeConfig(role="primary", listen=addr), Selection("price > 1"), GrpcPeer)
    server = serve(n, addr)
    ch = grpc.insecure_channel(addr)
    try:
        check = health_pb2_grpc.HealthStub(ch).Check
        assert check(health_pb2.HealthCheckRequest(), timeout=3).status == health_pb2.HealthCheckResponse.SERVING
        n.state.become(Role.FENCED)
        assert check(health_pb2.HealthCheckRequest(), timeout=3).status == health_pb2.HealthCheckResponse.NOT_SERVING
    finally:
        ch.close()
        server.stop(grace=0)
        n.stop()


def test_nothing_there_is_told_apart_from_a_late_answer():
    """A refused port and a name that resolves to nothing (a removed container) are `refused`: the
    detector suspects them after one interval. A call that times out is not."""
    import signal
    import subprocess
    import sys
    import time

    from lazystandby.core import messages as m
    from lazystandby.core.errors import PeerError
    from lazystandby.harness.launcher import free_ports
    from lazystandby.transport.grpc_transport import GrpcPeer

    def heartbeat(address: str) -> PeerError:
        peer = GrpcPeer(address)
        try:
            peer.heartbeat(m.HeartbeatRequest(sender="t", epoch=1), 0.5)
        except PeerError as e:
            return e
        finally:
            peer.close()
        raise AssertionError(f"{address} answered")

    (port,) = free_ports(1)
    nothing = heartbeat(f"127.0.0.1:{port}")
    gone = heartbeat("no-such-node.invalid:50051")
    assert nothing.refused and gone.refused and "Domain name not found" in gone.message, (nothing, gone)
    # A listener that never answers: the call times out, and that is no refusal.
    silent = subprocess.Popen([sys.executable, "-c", f"import socket,time; s=socket.socket(); "
                               f"s.bind(('127.0.0.1',{port})); s.listen(); time.sleep(30)"])
    try:
        time.sleep(0.5)
        late = heartbeat(f"127.0.0.1:{port}")
        assert late.status == "DEADLINE_EXCEEDED" and not late.refused, late
    finally:
        silent.send_signal(signal.SIGKILL)
        silent.wait()


def test_a_warmed_channel_connects_without_a_call_and_an_unreachable_one_fails_calls_as_before(tmp_path):
    """Peer.warm on real gRPC with mutual TLS: the channel is ready though no call was made, and the first
    call then takes a warm channel's time; warming a port nobody listens on raises nothing, the call there
    fails UNAVAILABLE as an unwarmed one does, and close() stops the warming."""
    import time

    import pytest

    from lazystandby.config import NodeConfig
    from lazystandby.core.errors import PeerError
    from lazystandby.harness.launcher import free_ports, make_certs
    from lazystandby.node.downstream import DownstreamNode
    from lazystandby.sinks.base import MemorySink
    from lazystandby.transport.grpc_transport import GrpcPeer, serve
    from lazystandby.transport.tls import TlsFiles

    make_certs(tmp_path, ["nd:downstream", "s:operator"])
    server_tls = TlsFiles(str(tmp_path / "ca.crt"), str(tmp_path / "nd.crt"), str(tmp_path / "nd.key"))
    client_tls = TlsFiles(str(tmp_path / "ca.crt"), str(tmp_path / "s.crt"), str(tmp_path / "s.key"))
    live, dead = (f"127.0.0.1:{p}" for p in free_ports(2))
    server = serve(DownstreamNode(NodeConfig(role="downstream", listen=live), MemorySink()), live, tls=server_tls)
    peer, nowhere = GrpcPeer(live, tls=client_tls), GrpcPeer(dead, tls=client_tls)
    try:
        peer.warm()
        peer._warming.result(timeout=10)  # ready, no call made
        t0 = time.perf_counter()
        assert peer.status(5.0).node
        assert time.perf_counter() - t0 < 1.0
        nowhere.warm()
        with pytest.raises(PeerError) as e:
            nowhere.status(2.0)
        assert e.value.status == "UNAVAILABLE"
        nowhere.close()
        assert nowhere._warming.cancelled()
    finally:
        peer.close()
        server.stop(grace=0)


def test_a_killed_peers_lost_connection_is_told_and_a_closed_peer_says_nothing():
    """Peer.watch over a real connection: the kernel of a SIGKILLed server process closes its socket, and
    the watcher hears of it; closing the watching peer itself is no loss."""
    import os
    import signal
    import subprocess
    import sys
    import threading

    from lazystandby.harness.launcher import free_ports
    from lazystandby.transport.grpc_transport import GrpcPeer

    addr = f"127.0.0.1:{free_ports(1)[0]}"
    child = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
from lazystandby.config import NodeConfig
from lazystandby.node.downstream import DownstreamNode
from lazystandby.sinks.base import MemorySink
from lazystandby.transport.grpc_transport import serve
server = serve(DownstreamNode(NodeConfig(role="downstream", listen="{addr}"), MemorySink()), "{addr}")
print("up", flush=True)
time.sleep(120)
"""], stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    peer = GrpcPeer(addr)
    try:
        assert child.stdout.readline().strip() == b"up"
        lost = threading.Event()
        assert peer.watch(lost.set) is True
        peer.status(5.0)  # the connection made
        assert not lost.wait(0.3)  # a live peer: nothing
        os.kill(child.pid, signal.SIGKILL)
        assert lost.wait(10.0), "the killed peer's closed connection was not told"
        lost.clear()
        peer.close()
        assert not lost.wait(0.3)
    finally:
        child.kill()
        child.wait()
        peer.close()
