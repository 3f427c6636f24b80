"""The unit tier's topology test bodies, run over real gRPC servers on loopback."""

from tests.unit.test_topology_twin import body_kill_primary, body_no_failure


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
