"""Every protocol error answers with a status gRPC knows."""

from lazystandby.core.errors import LazyStandbyError


def test_every_protocol_error_has_a_status_the_transport_knows():
    import grpc

    for cls in LazyStandbyError.__subclasses__():
        assert hasattr(grpc.StatusCode, cls.status.value), cls
