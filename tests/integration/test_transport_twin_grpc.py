"""The unit tier's topology test bodies, run over real gRPC servers on loopback."""

from tests.unit.test_topology_twin import body_kill_primary, body_no_failure


def test_no_failure_grpc():
    body_no_failure("grpc")


def test_kill_primary_grpc():
    rec = body_kill_primary("grpc", "10")
    assert rec["reconnection_ms"] < 2000
