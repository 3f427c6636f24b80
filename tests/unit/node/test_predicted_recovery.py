"""The predicted recovery at the nodes: Nu's hint with the backup, the standby's terms from it and from its
own measures, and the primary showing its standby's figure."""

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core import messages as m
from lazystandby.core.detector import FailureDetector
from lazystandby.core.roles import Role
from lazystandby.node.operator_node import OperatorNode
from lazystandby.operators.selection import Selection
from lazystandby.transport.peer import PeerBase
from tests.unit.node.test_upstream_backup import upstream_holding

RATE_BPS = 1_250_000  # a 10 Mbit/s link
RTT = 0.002


def timed_pushes(nu, tuple_bytes=50):
    """Pushes to the primary as Nu times them, on a 10 Mbit/s link with a 2 ms round trip."""
    for n in (100, 400, 1_600) * 4:
        nu.outbound.tuning.push_cost.add(n * tuple_bytes, RTT + n * tuple_bytes / RATE_BPS)
    nu.counters["primary_tuples"] += 1_000
    nu.counters["primary_bytes"] += 1_000 * tuple_bytes


def test_nu_sends_its_hint_with_the_backup_once_its_pushes_were_timed(net, standby):
    nu = upstream_holding(net.peer, "s", total=40, backup_linger_ms=0)
    nu.outbound.backup.loop()
    assert standby.standby_side.forecast.hint is None  # no push timed yet: nothing to say
    timed_pushes(nu)
    nu.outbound.backup.next_hint_at = 0.0
    nu.outbound.backup.loop()
    h = standby.standby_side.forecast.hint
    assert h is not None and h.head_pos == 40 and h.frame_max == nu.cfg.frame_max
    assert h.per_byte_s == pytest.approx(1 / RATE_BPS) and h.per_call_s == pytest.approx(RTT)
    assert h.tuple_bytes == pytest.approx(50) and h.resend_floor == nu.outbound.checkpoint.input_pos + 1


def test_nu_sends_a_hint_alone_when_nothing_else_goes_and_not_more_often_than_its_period(net, standby):
    from lazystandby.node.upstream import UpstreamNode
    from lazystandby.sources.base import GeneratorSource

    nu = UpstreamNode(NodeConfig(role="upstream", listen="nu", primary="n", standby="s", bsize="inf"),
                      GeneratorSource(["I1", "I2"], total=40, rate=0.0), net.peer)
    while nu.outbound.oqu.last < 40:
        nu._source_loop()
    timed_pushes(nu)
    calls = []
    orig = standby.handle_backup
    standby.handle_backup = lambda msg: (calls.append(msg), orig(msg))[1]
    nu.outbound.backup.loop()
    nu.outbound.backup.loop()  # within HINT_EVERY_S of the first: nothing to send at Bsize inf
    assert len(calls) == 1 and calls[0].hint is not None and not calls[0].runs
    assert standby.inbound.received_through == 0  # a hint moves nothing


def standby_watching(standby, *, received, primary_received, hint, cost=(0.001, 2e-5)):
    standby.standby_side.detector = FailureDetector(0.1, 3, now=0.0)
    standby.standby_side.forecast.rtts.extend([0.001, 0.003, 0.002])
    standby.inbound.received_through, standby.standby_side.primary_received = received, primary_received
    standby.standby_side.forecast.hint, standby.standby_side.forecast.primary_cost = hint, cost


def test_the_standby_predicts_detection_reconnection_resend_and_replay(standby):
    hint = m.RecoveryHint(head_pos=10_500, resend_floor=1, per_call_s=RTT, per_byte_s=1 / RATE_BPS, tuple_bytes=50,
                          frame_max=4_096)
    standby_watching(standby, received=500, primary_received=10_000, hint=hint)
    standby.calls.take = 4_000
    t = standby.standby_side.predicted_recovery()
    # Three misses a quarter interval apart after half an interval, the last call back a round trip later.
    assert t.detection_s == pytest.approx(0.05 + 0.05 + 0.002) and t.reconnection_s == pytest.approx(0.004)
    resend = 10_500 - 500  # Nu's head is newer than the primary's heartbeat
    assert t.resend_s == pytest.approx(3 * RTT + resend * 50 / RATE_BPS)
    assert t.replay_tuples == resend + 500  # nothing processed here yet
    assert t.replay_s == pytest.approx(3 * 0.001 + (resend + 500) * 2e-5)  # in three calls of 4,000
    assert t.complete and t.seconds == pytest.approx(0.102 + 0.004 + t.resend_s + t.replay_s)


def test_a_standby_behind_nus_floor_rebuilds_from_it_and_its_backlog_does_not_count(standby):
    hint = m.RecoveryHint(head_pos=1_000, resend_floor=801, per_call_s=RTT, per_byte_s=0.0, tuple_bytes=50,
                          frame_max=4_096)
    standby_watching(standby, received=300, primary_received=1_000, hint=hint)
    t = standby.standby_side.predicted_recovery()
    assert t.replay_tuples == 200 and t.resend_s == pytest.approx(RTT)


def test_without_a_hint_or_a_timed_call_the_prediction_says_it_is_incomplete(standby):
    standby_watching(standby, received=100, primary_received=400, hint=None, cost=(0.0, 0.0))
    t = standby.standby_side.predicted_recovery()
    assert t.resend_s == 0.0 and t.replay_s == 0.0 and t.replay_tuples == 300 + 100 and not t.complete
    # Its own calls, when the primary's are unknown.
    standby.calls.cost.samples.extend([(100, 0.002), (400, 0.005)] * 4)
    assert standby.standby_side.predicted_recovery().replay_s > 0
    assert standby.standby_side.predicted_recovery() is not None
    standby.state.become(Role.PROMOTING, epoch=1)
    assert standby.standby_side.predicted_recovery() is None  # no standby now


def test_the_primary_shows_its_standbys_figure_while_its_heartbeats_come(primary):
    reply = primary.handle_heartbeat(m.HeartbeatRequest(sender="N'", epoch=1, predicted_recovery_s=0.42))
    assert (reply.operator_call_s, reply.operator_tuple_s) == (0.0, 0.0)  # no call timed yet
    assert primary.snapshot()["predicted_recovery"] == {"seconds": 0.42, "of": "standby"}
    primary.primary_side.heartbeat_at -= 2 * primary.cfg.heartbeat_timeout
    assert primary.snapshot()["predicted_recovery"] is None
    for tuples in (100, 400) * 4:
        primary.calls.cost.add(tuples, 0.001 + tuples * 1e-5)
    reply = primary.handle_heartbeat(m.HeartbeatRequest(sender="N'", epoch=1))
    assert reply.operator_call_s == pytest.approx(0.001) and reply.operator_tuple_s == pytest.approx(1e-5)


def tuned_nu(net, target_ms, view):
    from lazystandby.core.recovery_model import StandbyView
    from lazystandby.node.upstream import UpstreamNode
    from lazystandby.sources.base import GeneratorSource

    t = [0.0]
    nu = UpstreamNode(NodeConfig(role="upstream", listen="nu", primary="n", standby="s", bsize="10",
                                 recovery_target_ms=target_ms), GeneratorSource(["I1", "I2"], total=0, rate=0.0),
                      net.peer, clock=lambda: t[0])
    timed_pushes(nu)
    nu.outbound.tuning.standby_view = StandbyView(**view)
    return nu, t


def tune(nu, t, admitted):
    """One choice, `admitted` tuples after the last (4,000 tuples/s over TUNE_EVERY_S)."""
    from lazystandby.core.recovery_model import TUNE_EVERY_S

    with nu.lock:
        nu.outbound.oqu.last = getattr(nu, "_fake_head", 0) + admitted
        nu._fake_head = nu.outbound.oqu.last
        nu.outbound.backup.tune(t[0])
    t[0] += TUNE_EVERY_S


VIEW = {"fixed_s": 0.1, "call_s": 0.001, "tuple_s": 2e-5, "take": 32_768, "backlog": 100}


def test_nu_takes_its_first_choice_at_once_and_a_later_larger_one_once_two_choices_agree(net, monkeypatch):
    from lazystandby.core.queues import KeyedQueue

    monkeypatch.setattr(KeyedQueue, "last", 0, raising=False)
    nu, t = tuned_nu(net, 1_000, VIEW)
    gen = nu.outbound.backup.gen
    tune(nu, t, 0)  # the first look only marks the rate
    tune(nu, t, 8_000)
    first = nu.outbound.tuning.choice.value
    assert nu.outbound.tuning.choice.met and (first is None or first > 10)  # less backup than the configured 10
    backup = nu.outbound.backup
    assert backup.bsize == first and backup.batcher.bsize == first and backup.run_encoder.bsize == first
    assert nu.outbound.backup.gen > gen and nu.counters["bsize_changes"] == 1
    status = nu.snapshot()["recovery_target"]
    assert status["target_ms"] == 1_000 and status["met"] and status["predicted_ms"] <= 800
    # The rate falls: a larger Bsize would do, but is taken only when the next choice agrees.
    nu.outbound.backup.set_bsize(100)
    tune(nu, t, 100)
    assert nu.outbound.tuning.choice.value != 100 and nu.outbound.backup.bsize == 100
    later = nu.outbound.tuning.choice.value
    tune(nu, t, 100)
    assert nu.outbound.tuning.choice.value == later and nu.outbound.backup.bsize == later


def test_nu_takes_bsize_1_at_once_for_a_target_nothing_meets_and_says_so(net, monkeypatch):
    from lazystandby.core.queues import KeyedQueue

    monkeypatch.setattr(KeyedQueue, "last", 0, raising=False)
    nu, t = tuned_nu(net, 50, VIEW)  # below the fixed terms alone (100 ms)
    tune(nu, t, 0)
    tune(nu, t, 8_000)
    assert nu.outbound.backup.bsize == 1 and not nu.outbound.tuning.choice.met
    assert nu.snapshot()["recovery_target"]["met"] is False


def test_without_a_target_nu_keeps_its_bsize_and_chooses_nothing(net):
    nu, t = tuned_nu(net, 0, VIEW)
    tune(nu, t, 0)
    tune(nu, t, 8_000)
    out = nu.outbound
    assert out.backup.bsize == 10 and out.tuning.choice is None and nu.snapshot()["recovery_target"] is None


def test_nu_probes_its_standbys_link_when_the_backup_is_idle_and_fits_the_resend_cost_from_it(net):
    from lazystandby.core import messages as msgs
    from lazystandby.node.bsize_tuning import PROBE_BYTES, PROBE_EVERY_S, PROBES_AT_ONCE
    from lazystandby.node.upstream import UpstreamNode
    from lazystandby.sources.base import GeneratorSource
    from lazystandby.transport.peer import PeerBase

    t, sizes = [0.0], []

    class Link(PeerBase):  # 10 Mbit/s, 2 ms a call: the test's clock moves by what a probe takes
        address = "s"

        def probe(self, msg, timeout):
            sizes.append(len(msg.padding))
            t[0] += RTT + len(msg.padding) / RATE_BPS
            return msgs.ProbeAck(received=len(msg.padding))

    nu = UpstreamNode(NodeConfig(role="upstream", listen="nu", primary="n", standby="s", bsize="inf"),
                      GeneratorSource(["I1", "I2"], total=0, rate=0.0), lambda a: Link() if a == "s" else net.peer(a),
                      clock=lambda: t[0])
    nu.outbound.backup.resync = False
    for _ in range(PROBES_AT_ONCE):
        assert nu.outbound.backup.probe_link()
    assert not nu.outbound.backup.probe_link()  # the next one waits PROBE_EVERY_S
    assert sizes == [PROBE_BYTES[i % 2] for i in range(PROBES_AT_ONCE)]
    per_call, per_byte = nu.outbound.tuning.standby_cost.fit()
    assert per_call == pytest.approx(RTT) and per_byte == pytest.approx(1 / RATE_BPS)
    assert nu.outbound.tuning.resend_cost() is nu.outbound.tuning.standby_cost  # not the pushes' (none timed here)
    assert nu.snapshot()["standby_link_cost"]["bytes_per_s"] == pytest.approx(RATE_BPS, rel=1e-6)
    t[0] += PROBE_EVERY_S
    nu.outbound.backup.awaiting_since = t[0]  # a backup call in flight: the link is not idle
    assert not nu.outbound.backup.probe_link()
    nu.outbound.backup.awaiting_since = None
    assert nu.outbound.backup.probe_link() and nu.counters["probes"] == PROBES_AT_ONCE + 1


def test_a_warm_standby_defers_as_long_as_its_target_allows_and_a_passive_one_asks_for_an_interval(net):
    from lazystandby.core.recovery_model import TUNE_EVERY_S, RecoveryTerms
    from lazystandby.formats.query import parse_query
    from lazystandby.operators.window import WindowAggregate

    q = "SELECT symbol, count(*) FROM ticks GROUP BY window(ts, '1 second'), symbol"
    for passive in (False, True):
        settings = {"query": q, "standby_state": "snapshot"} if passive else {}
        op = WindowAggregate(parse_query(q)) if passive else Selection("price > 1")
        n = OperatorNode(NodeConfig(role="standby", listen=f"s{passive}", recovery_target_ms=500, **settings), op,
                         net.peer)
        try:
            with n.lock:
                n.standby_side.forecast.predicted = RecoveryTerms(detection_s=0.1, reconnection_s=0.004, resend_s=0.0,
                                                                  replay_s=0.0, replay_tuples=0)
                n.standby_side.forecast.primary_cost = (0.001, 2e-5)  # 50,000 tuples/s in large calls
                n.standby_side.forecast.tune(0.0, n.standby_side.backlog())  # marks the rate
                # 10,000/s, all held here
                n.standby_side.primary_received = n.inbound.received_through = round(10_000 * TUNE_EVERY_S)
                n.standby_side.forecast.tune(TUNE_EVERY_S, n.standby_side.backlog())
            ch = n.standby_side.forecast.choice
            # 0.8 x 500 ms less 104 ms leaves ~296 ms of replay: about 14,800 inputs, 1.48 s of input
            assert ch.met and ch.predicted_s <= 0.4 and ch.value == 1.0
            if passive:
                assert n.standby_side.forecast.defer == n.cfg.standby_defer  # the interval is the primary's to take
                assert n.snapshot()["recovery_target"]["snapshot_interval"] == 1.0
            else:
                assert n.standby_side.forecast.defer == 1.0 and n.snapshot()["recovery_target"]["standby_defer"] == 1.0
        finally:
            n.stop()


def test_the_primary_takes_the_snapshot_interval_its_passive_standby_asks_for(net):
    from lazystandby.formats.query import parse_query
    from lazystandby.operators.window import WindowAggregate

    q = "SELECT symbol, count(*) FROM ticks GROUP BY window(ts, '1 second'), symbol"
    n = OperatorNode(NodeConfig(role="primary", listen="p", query=q, standby_state="snapshot"),
                     WindowAggregate(parse_query(q)), net.peer)
    try:
        n.handle_heartbeat(m.HeartbeatRequest(sender="N'", epoch=1, snapshot_interval_s=5.0))
        assert n.snapshots.interval == 5.0
        n.handle_heartbeat(m.HeartbeatRequest(sender="N'", epoch=1))  # 0: no choice; the last one stands
        assert n.snapshots.interval == 5.0
    finally:
        n.stop()


def test_a_standby_times_how_late_its_heartbeats_start_and_predicts_a_detection_that_late(standby):
    """On busy cores a heartbeat starts after it is due (the thread's wake-up, the node's lock): every beat
    of a crash's detection does, so the standby measures it on the beats it makes and adds it there."""
    now = [0.0]

    class Primary(PeerBase):
        address = "n"

        def heartbeat(self, msg, timeout):
            now[0] += 0.002  # the round trip
            return m.HeartbeatReply(node="N", role=Role.PRIMARY, epoch=1)

    class Beat:
        """The wait between heartbeats, on the test's clock: each wake-up 7 ms late, one woken early."""

        def __init__(self):
            self.early = False

        def wait(self, seconds):
            now[0] += 0.001 if self.early else seconds + 0.007

        def clear(self):
            pass

        def set(self):
            pass

    standby.standby_side.primary, standby.clock, standby.standby_side.beat_now = Primary(), lambda: now[0], Beat()
    standby.standby_side.registered.set()
    standby.state.fence.advance(1)
    standby.standby_side.detector = FailureDetector(0.1, 3, now=0.0)
    for _ in range(4):
        standby.standby_side.heartbeat_loop()
    assert list(standby.standby_side.forecast.beat_late) == pytest.approx([0.007] * 3)
    standby.standby_side.beat_now.early = True  # from now a notice wakes it before the next beat is due
    standby.standby_side.heartbeat_loop()  # after an ordinary wait: a sample
    standby.standby_side.heartbeat_loop()  # woken early: none
    assert len(standby.standby_side.forecast.beat_late) == 4
    t = standby.standby_side.predicted_recovery()
    # Half a period of 107 ms, two polls of 25 + 7 ms, the last call back 2 ms later.
    assert t.detection_s == pytest.approx(0.0535 + 2 * 0.032 + 0.002)


def test_nus_large_probe_grows_to_about_probe_transfer_s_of_the_link_it_measured():
    from lazystandby.node.bsize_tuning import PROBE_BYTES, PROBE_MAX_BYTES, PROBE_TRANSFER_S, probe_bytes

    small, large = PROBE_BYTES
    assert [probe_bytes(n, None) for n in range(4)] == [small, large, small, large]  # nothing fitted yet
    assert probe_bytes(1, 1 / 1_250_000) == large  # 10 Mbit/s: 32 KB is already 26 ms
    assert probe_bytes(3, 1 / 12_500_000) == int(PROBE_TRANSFER_S * 12_500_000)  # 100 Mbit/s: 250 KB
    assert probe_bytes(5, 1 / 125_000_000) == PROBE_MAX_BYTES  # a gigabit: capped
    assert probe_bytes(5, 0.0) == PROBE_MAX_BYTES and probe_bytes(6, 0.0) == small  # too fast to tell


def test_nus_probes_of_a_fast_link_read_its_rate_where_32_kb_could_not(net):
    # 100 Mbit/s and a call whose time varies by 1.5 ms: a 32 KB probe (2.6 ms) reads anything from
    # 2 to 60 MB/s; once fitted, the large probes take about PROBE_TRANSFER_S and the rate comes out right.
    from lazystandby.core import messages as msgs
    from lazystandby.node.bsize_tuning import PROBE_EVERY_S
    from lazystandby.node.upstream import UpstreamNode
    from lazystandby.sources.base import GeneratorSource
    from lazystandby.transport.peer import PeerBase

    rate, t, sizes = 12_500_000, [0.0], []
    jitter = iter([0.0, 0.0015, 0.0015, 0.0] + [0.0015 * (k % 2) for k in range(100)])

    class Link(PeerBase):
        address = "s"

        def probe(self, msg, timeout):
            sizes.append(len(msg.padding))
            t[0] += RTT + next(jitter) + len(msg.padding) / rate
            return msgs.ProbeAck(received=len(msg.padding))

    nu = UpstreamNode(NodeConfig(role="upstream", listen="nu", primary="n", standby="s", bsize="inf"),
                      GeneratorSource(["I1", "I2"], total=0, rate=0.0), lambda a: Link() if a == "s" else net.peer(a),
                      clock=lambda: t[0])
    nu.outbound.backup.resync = False
    for _ in range(12):
        nu.outbound.backup.probe_link()
        t[0] += PROBE_EVERY_S
    assert max(sizes) > 150_000
    assert 1 / nu.outbound.tuning.standby_cost.fit()[1] == pytest.approx(rate, rel=0.15)
