"""How a node says a link is down, reminds, and says it recovered; refusals counted per kind."""



def test_a_link_that_stays_down_is_said_once_then_reminded_and_its_recovery_said(caplog):
    import logging

    from lazystandby.node.common import Links

    now = [0.0]
    links = Links("N", logging.getLogger("lazystandby.test-links"), lambda: now[0], remind=30.0)
    with caplog.at_level(logging.WARNING, logger="lazystandby.test-links"):
        for t in (0.0, 1.0, 29.0, 31.0, 40.0):
            now[0] = t
            links.failed("downstream", "nd:1", "UNAVAILABLE", "connection refused")
        now[0] = 50.0
        links.ok("downstream", "nd:1")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert "link to downstream nd:1 failed" in lines[0]
    assert "still down after 31 s" in lines[1]
    assert "recovered after 50.0 s (5 calls failed meanwhile)" in lines[2]


def test_a_peer_that_keeps_earning_a_refusal_gets_one_line_per_kind_with_the_count_of_the_rest(caplog):
    import logging

    from lazystandby.core.errors import MalformedMessage, QueueFull, StaleEpoch
    from lazystandby.transport.refusals import RefusalLog

    now = [0.0]
    log = RefusalLog("test-refusals", every=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="lazystandby.test-refusals"):
        for t in (0.0, 1.0, 2.0, 11.0):
            now[0] = t
            log.refused("Push", MalformedMessage("not protobuf"))
        log.refused("Push", QueueFull("full"))  # backpressure: counted by the node, never logged
        log.refused("Push", StaleEpoch("old"))  # ABORTED: an ordinary answer, not logged either
        log.refused("Backup", MalformedMessage("not protobuf"))  # another RPC: a kind of its own
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["refused Push (INVALID_ARGUMENT): not protobuf",
                     "refused Push (INVALID_ARGUMENT): not protobuf [2 more like it since the last line]",
                     "refused Backup (INVALID_ARGUMENT): not protobuf"]
