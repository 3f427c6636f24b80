"""Every protocol error answers with a status gRPC knows."""

from lazystandby.core.errors import LazyStandbyError


def test_every_protocol_error_has_a_status_the_transport_knows():
    import grpc

    for cls in LazyStandbyError.__subclasses__():
        assert hasattr(grpc.StatusCode, cls.status.value), cls


class _Failed(Exception):
    def __init__(self, code, details):
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


def test_a_refused_connection_and_a_listener_reset_while_connecting_say_nothing_is_there():
    import grpc

    from lazystandby.transport.grpc_transport import _peer_error

    unavailable = grpc.StatusCode.UNAVAILABLE
    said = {
        "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:10.0.0.2:7000: "
        "Failed to connect to remote host: Connection refused": True,
        "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:10.211.135.2:27297: "
        "recvmsg:Connection reset by peer (104)": True,  # a SIGKILLed primary's listener, going away
        "DNS resolution failed for n: C-ares status is not ARES_SUCCESS: Domain name not found": True,
        "recvmsg:Connection reset by peer (104)": False,  # a call cut short: the peer may still be there
        "Deadline Exceeded": False,
    }
    for details, refused in said.items():
        assert _peer_error(_Failed(unavailable, details), "n Heartbeat").refused is refused, details
    assert not _peer_error(_Failed(grpc.StatusCode.DEADLINE_EXCEEDED, "Connection refused"), "n").refused
