"""A primary asked to stop hands over (OperatorNode.hand_over): it takes no more input, its last frame ends
its lease at Nd, it tells its standby to heartbeat now, and the standby takes over on that heartbeat's
LEAVING, not after the detector's timeout. Real nodes on the in-memory network; the processes run the same
in the `stop-primary` fault (tests/integration)."""

import time

import pytest

from lazystandby.core import messages as m
from lazystandby.core.errors import PeerError, WrongRole
from lazystandby.core.roles import Role
from lazystandby.harness.check import compare, expected_outputs
from lazystandby.harness.inprocess import InProcessTopology
from lazystandby.v1 import lazystandby_pb2 as pb
from tests.unit.test_metrics import scrape

NAMES = {1: "I1", 2: "I2"}
# A detector that takes 2 s: a standby that waited for it could not be live within the 1 s asserted below.
SLOW_DETECTOR = {"heartbeat_interval": 0.2, "heartbeat_misses": 10, "takeover_lease": 0.15}
# Heartbeats 3 s apart: a standby that waited for its next one could not take over within the 1 s asserted.
SLOW_BEATS = {"heartbeat_interval": 3.0, "heartbeat_misses": 3, "takeover_lease": 0.15}


def test_a_primary_asked_to_stop_hands_over_at_once_and_the_output_is_exact():
    total = 20_000
    with InProcessTopology("memory", total=total, rate=10_000.0, bsize="10", **SLOW_DETECTOR) as t:
        n, n2, nd = t.nodes["n"], t.nodes["n2"], t.nodes["nd"]
        exp = expected_outputs(["I1", "I2"], seed=7, total=total, predicate="price > 100")
        assert t.wait(lambda: nd.inbound.delivered_through > 1000)
        t0 = time.monotonic()
        assert n.hand_over() == "told"
        assert n.state.role is Role.LEAVING and not n.serving()
        try:
            n.handle_push(m.Frame(epoch=1, sender="Nu", checkpoint=n.processed))
            raise AssertionError("a leaving primary took a frame")
        except WrongRole as e:
            assert "hands over" in str(e)
        t.kill("n")  # the process exits once its standby has heard it
        assert t.wait(lambda: n2.state.role is Role.PRIMARY and n2.takeover.recovery.get("live_at") is not None, 5)
        live_s = time.monotonic() - t0
        assert t.wait(lambda: nd.inbound.delivered_through >= len(exp), 30)
        res = compare(exp, [(o, NAMES[s], q) for o, s, q, _ in t.sink.rows])
        assert res.ok, res
        assert live_s < 1.0, f"N' was live {live_s:.2f} s after the handover: it waited for its detector"
        assert n2.takeover.recovery["cause"] == "handover" and n2.counters["takeovers_declined"] == 0
        assert nd.counters["lease_released"] == 1 and nd.counters["duplicates_dropped"] == 0
        assert nd.inbound.takeovers.last is not None and nd.inbound.takeovers.last.facts["handed_over"] is True
        assert n.counters["handovers"] == 1
        scraped = scrape(n)
        assert scraped['lazystandby_handovers_total{node="N"}'] == 1
        assert scraped['lazystandby_role{node="N",role="leaving"}'] == 1


def test_the_primary_tells_its_standby_to_heartbeat_now_so_the_takeover_waits_for_no_interval():
    total = 40_000
    with InProcessTopology("memory", total=total, rate=10_000.0, bsize="10", **SLOW_BEATS) as t:
        n, n2, nd = t.nodes["n"], t.nodes["n2"], t.nodes["nd"]
        exp = expected_outputs(["I1", "I2"], seed=7, total=total, predicate="price > 100")
        assert t.wait(lambda: nd.inbound.delivered_through > 1000 and n.counters["heartbeats_answered"] > 0)
        beats = n.counters["heartbeats_answered"]
        assert t.wait(lambda: n.counters["heartbeats_answered"] > beats, 5)  # just beat: the next is 3 s away
        t0 = time.monotonic()
        assert n.hand_over() == "told"
        told_s = time.monotonic() - t0
        t.kill("n")
        assert t.wait(lambda: n2.state.role is Role.PRIMARY and n2.takeover.recovery.get("live_at") is not None, 5)
        live_s = time.monotonic() - t0
        assert told_s < 1.0 and live_s < 1.0, f"told after {told_s:.2f} s, live after {live_s:.2f} s"
        assert n.counters["handover_notices_heard"] == 1 and n2.counters["handover_notices"] == 1
        assert n2.takeover.recovery["cause"] == "handover" and nd.counters["lease_released"] == 1
        assert t.wait(lambda: nd.inbound.delivered_through >= len(exp), 30)
        assert compare(exp, [(o, NAMES[s], q) for o, s, q, _ in t.sink.rows]).ok


def test_a_handover_notice_alone_moves_nothing_and_a_stale_one_is_ignored():
    """Anyone may send the notice (a forged one, an old primary's): it costs the standby one heartbeat at
    most, and the takeover still waits for the primary it watches to say LEAVING."""
    with InProcessTopology("memory", total=2_000, rate=0.0, bsize="10", **SLOW_BEATS) as t:
        n, n2, nd = t.nodes["n"], t.nodes["n2"], t.nodes["nd"]
        assert t.wait(lambda: n2.standby_side.registered.is_set() and n.counters["heartbeats_answered"] > 0)
        stale = t.net.call_pb("n2", "Handover", pb.HandoverNotice(sender="mallory", epoch=0))
        assert not stale.beats and stale.epoch == 1 and n2.counters["handover_notices_ignored"] == 1
        beats = n.counters["heartbeats_answered"]
        assert t.net.call_pb("n2", "Handover", pb.HandoverNotice(sender="mallory", epoch=1)).beats
        assert t.wait(lambda: n.counters["heartbeats_answered"] > beats, 1)  # now, not 3 s later
        time.sleep(0.3)
        assert n2.state.role is Role.STANDBY and n.state.role is Role.PRIMARY and nd.fence.epoch == 1
        assert n2.takeover.recovery == {} and n2.counters["heartbeat_primary_leaving"] == 0
        to_primary = t.net.call_pb("n", "Handover", pb.HandoverNotice(sender="mallory", epoch=1))
        assert not to_primary.beats and to_primary.role == pb.ROLE_PRIMARY
        with pytest.raises(PeerError) as e:
            t.net.call_pb("nd", "Handover", pb.HandoverNotice(sender="mallory", epoch=1))
        assert e.value.status == "FAILED_PRECONDITION"


def test_a_notice_that_fails_still_hands_over_at_the_next_heartbeat(caplog):
    total = 10_000
    with InProcessTopology("memory", total=total, rate=10_000.0, bsize="10", **SLOW_DETECTOR) as t:
        n, n2, nd = t.nodes["n"], t.nodes["n2"], t.nodes["nd"]
        exp = expected_outputs(["I1", "I2"], seed=7, total=total, predicate="price > 100")

        def deaf(msg):
            raise WrongRole("N': not now")

        n2.handle_handover = deaf  # the notice is refused (as by a standby too old to know the RPC)
        assert t.wait(lambda: nd.inbound.delivered_through > 500)
        assert n.hand_over() == "told"
        assert n.counters["handover_notices_failed"] == 1 and not n2.counters["handover_notices"]
        said = [r.getMessage() for r in caplog.records if "handover notice" in r.getMessage()]
        assert len(said) == 1 and "failed after" in said[0] and "not now" in said[0], said  # N says why
        t.kill("n")
        assert t.wait(lambda: n2.state.role is Role.PRIMARY and n2.takeover.recovery.get("live_at") is not None, 5)
        assert n2.takeover.recovery["cause"] == "handover"  # on its own heartbeat's LEAVING
        assert t.wait(lambda: nd.inbound.delivered_through >= len(exp), 30)
        assert compare(exp, [(o, NAMES[s], q) for o, s, q, _ in t.sink.rows]).ok


def test_a_primary_with_no_standby_asking_only_ends_its_lease_and_a_standby_cannot_hand_over():
    with InProcessTopology("memory", total=2_000, rate=0.0, bsize="10", **SLOW_DETECTOR) as t:
        n, n2, nd = t.nodes["n"], t.nodes["n2"], t.nodes["nd"]
        assert n2.hand_over() == "not primary" and n2.state.role is Role.STANDBY
        assert t.wait(lambda: nd.inbound.delivered_through > 0)
        t.kill("n2")
        t0 = time.monotonic()
        assert n.hand_over(timeout=5.0) == "no standby"  # nobody asked for the detector's timeout (2 s)
        assert 1.5 <= time.monotonic() - t0 < 3.0  # from N''s last heartbeat, at most an interval before
        assert n.state.role is Role.LEAVING and nd.inbound.lease.released
        assert n.hand_over() == "not primary"  # once


def test_a_primary_whose_standby_is_long_gone_stops_at_once():
    """`docker stop` of a pipeline with no standby took the detector's timeout, waiting for nobody."""
    detector = {"heartbeat_interval": 0.1, "heartbeat_misses": 5, "takeover_lease": 0.075}  # timeout 0.5 s
    with InProcessTopology("memory", total=2_000, rate=0.0, bsize="10", **detector) as t:
        n, nd = t.nodes["n"], t.nodes["nd"]
        assert t.wait(lambda: nd.inbound.delivered_through > 0 and n.counters["heartbeats_answered"] > 0)
        t.kill("n2")
        time.sleep(0.7)  # N''s last heartbeat is older than the detector's timeout
        t0 = time.monotonic()
        assert n.hand_over(timeout=5.0) == "no standby"
        assert time.monotonic() - t0 < 0.3, "waited for a standby gone for longer than the timeout"
        assert n.state.role is Role.LEAVING and nd.inbound.lease.released


def test_a_takeover_declined_before_the_lease_ended_is_asked_again_at_the_next_leaving_heartbeat():
    """N' heard LEAVING, but Nd has not had the last frame yet (it failed): the lease runs out by itself
    within takeover_lease, and the next heartbeat's LEAVING sends N' again: still well inside the detector's
    timeout."""
    total = 10_000
    with InProcessTopology("memory", total=total, rate=10_000.0, bsize="10", **SLOW_DETECTOR) as t:
        n, n2, nd = t.nodes["n"], t.nodes["n2"], t.nodes["nd"]
        exp = expected_outputs(["I1", "I2"], seed=7, total=total, predicate="price > 100")
        assert t.wait(lambda: nd.inbound.delivered_through > 500)
        t.net.down("nd")  # N's last frame cannot reach Nd
        t0 = time.monotonic()
        assert n.hand_over() == "told"
        assert not nd.inbound.lease.released
        t.net.up("nd")
        t.kill("n")
        assert t.wait(lambda: n2.state.role is Role.PRIMARY and n2.takeover.recovery.get("live_at") is not None, 5)
        assert time.monotonic() - t0 < 1.5
        assert t.wait(lambda: nd.inbound.delivered_through >= len(exp), 30)
        assert compare(exp, [(o, NAMES[s], q) for o, s, q, _ in t.sink.rows]).ok
        assert n2.takeover.recovery["cause"] == "handover"  # asked again on N's word, not on its detector's


def test_the_stop_signal_hands_over_once_and_a_second_one_stops_at_once():
    import logging

    from lazystandby.cli import _on_stop

    with InProcessTopology("memory", total=2_000, rate=0.0, bsize="10", **SLOW_DETECTOR) as t:
        n, nd = t.nodes["n"], t.nodes["nd"]
        assert t.wait(lambda: nd.inbound.delivered_through > 0)
        t.kill("n2")  # nobody to hand over to: the handover would wait out the detector's timeout (2 s)
        handler = _on_stop(n, logging.getLogger("test"))
        handler()
        assert t.wait(lambda: n.state.role is Role.LEAVING, 2) and not n.halt.is_set()
        handler()  # the second signal
        assert n.halt.is_set()
        handler_nd = _on_stop(nd, logging.getLogger("test"))
        handler_nd()  # any other node stops at once
        assert nd.halt.is_set()
