import pytest

from lazystandby.core.acks import Checkpoint
from lazystandby.core.admission import must_jump
from lazystandby.core.dedup import DeliveryDedup
from lazystandby.core.detector import FailureDetector
from lazystandby.core.errors import (
    DuplicateSequence,
    IllegalTransition,
    NonMonotonicSequence,
    SequenceGap,
    StaleEpoch,
    UnknownStream,
)
from lazystandby.core.recovery import PrimaryLease, plan_takeover, resend_start
from lazystandby.core.roles import EpochFence, Role, RoleState
from lazystandby.core.seq import PerStreamSequence, StreamRegistry


def test_failover_path_through_the_role_machine():
    s = RoleState("N'")
    s.become(Role.STANDBY)
    s.become(Role.PROMOTING, epoch=2)
    s.become(Role.PRIMARY)
    s.become(Role.FENCED)
    assert [r for r, _ in s.history] == ["starting", "standby", "promoting", "primary", "fenced"]
    assert s.epoch == 2


@pytest.mark.parametrize("path", [
    [Role.STANDBY, Role.PRIMARY],           # a standby must promote through PROMOTING
    [Role.PRIMARY, Role.STANDBY],           # a primary never goes back to standby
    [Role.PRIMARY, Role.FENCED, Role.PRIMARY],  # fenced is final
    [Role.STANDBY, Role.LEAVING],           # only a primary hands over
    [Role.PRIMARY, Role.LEAVING, Role.PRIMARY],  # and never takes the role back
])
def test_illegal_transitions_are_refused(path):
    s = RoleState("N")
    with pytest.raises(IllegalTransition):
        for r in path:
            s.become(r)


def test_a_leaving_primary_can_still_be_fenced_and_stops():
    s = RoleState("N")
    s.become(Role.PRIMARY, epoch=1)
    s.become(Role.LEAVING)
    s.become(Role.FENCED, epoch=2)  # its standby took over, and a peer said so
    s.become(Role.STOPPED)
    assert [r for r, _ in s.history] == ["starting", "primary", "leaving", "fenced", "stopped"]


def test_a_declined_takeover_withdraws_the_epoch_it_took_and_nothing_else_steps_an_epoch_back():
    r = RoleState("N'")
    r.become(Role.STANDBY, epoch=3)
    r.become(Role.PROMOTING, epoch=4)
    r.withdraw()
    assert (r.role, r.epoch) == (Role.STANDBY, 3)
    r.become(Role.PROMOTING, epoch=4)
    r.become(Role.PRIMARY)
    with pytest.raises(IllegalTransition):
        r.withdraw()  # a primary has announced its epoch: it can only be fenced
    assert r.epoch == 4


def test_only_a_primary_that_has_not_worked_rejoins_as_a_standby():
    r = RoleState("N")
    r.become(Role.PRIMARY, epoch=1)
    with pytest.raises(IllegalTransition, match="it has worked in this life"):
        r.rejoin(worked=True)  # its state belongs to a deposed epoch: fenced instead
    r.rejoin(worked=False)
    assert (r.role, r.epoch) == (Role.STANDBY, 1)  # the epoch moves forward only when Nu answers
    assert [x for x, _ in r.history] == ["starting", "primary", "standby"]
    r.become(Role.PROMOTING, epoch=3)  # and it can take over as any standby can
    r.become(Role.PRIMARY)
    r.become(Role.FENCED)
    with pytest.raises(IllegalTransition, match="it is fenced"):
        r.rejoin(worked=False)
    standby = RoleState("N'")
    standby.become(Role.STANDBY)
    with pytest.raises(IllegalTransition, match="it is standby"):
        standby.rejoin(worked=False)


def test_a_lease_holds_for_its_duration_after_the_last_delivery_and_declines_others_only():
    from lazystandby.core.errors import PrimaryAlive

    lease = PrimaryLease(0.075)
    lease.check(0.0, node="N'", primary="N", receiver="Nd")  # never renewed: nothing holds
    lease.renew(1.0)
    lease.renew(0.9)  # a frame stamped earlier, handled later, does not shorten it
    with pytest.raises(PrimaryAlive, match="N delivered 50 ms ago"):
        lease.check(1.05, node="N'", primary="N", receiver="Nd")
    lease.check(1.05, node="N", primary="N", receiver="Nd")  # the primary's own announcement
    lease.check(1.08, node="N'", primary="N", receiver="Nd")  # run out
    off = PrimaryLease(0)
    off.renew(1.0)
    assert not off.holds(1.0)
    with pytest.raises(ValueError):
        PrimaryLease(-1)


def test_a_lease_keeps_the_primarys_longest_silence_within_its_term_only():
    lease = PrimaryLease(0.15)
    lease.renew(1.0)
    lease.renew(1.12)
    lease.renew(1.05)  # handled late: no gap, and no shorter lease
    lease.renew(1.2)
    assert lease.longest_gap == pytest.approx(0.12)
    lease.grant(5.0)  # a takeover: the 3.8 s before it were the deposed primary's, not a silence of this one
    lease.renew(5.1)
    assert lease.longest_gap == pytest.approx(0.12) and lease.renewed_at == 5.1


def test_a_primary_that_hands_over_ends_its_lease_and_its_last_frame_is_not_weighed():
    from lazystandby.core.errors import PrimaryAlive

    lease = PrimaryLease(0.15, unheard_max=1.0)
    lease.arrived(1.0)
    with pytest.raises(PrimaryAlive):
        lease.check(1.05, node="N'", primary="N", receiver="Nd")  # the lease holds
    lease.release()  # N's last frame said it is leaving
    lease.check(1.05, node="N'", primary="N", receiver="Nd")  # taken at once
    lease.check(1.05, node="N'", primary="N", receiver="Nd", unheard=0.9)  # its frame is not weighed either
    lease.renew(1.06)  # a frame handled late renews no released lease
    assert not lease.holds(1.07)
    lease.grant(2.0)  # the next term has a lease of its own
    assert not lease.released and lease.holds(2.1)


def test_past_the_lease_nd_still_declines_a_standby_that_lost_a_primary_nd_heard_since():
    """A working primary silent at Nd past its lease (a busy machine), and a standby cut off from it that
    has not heard it for 850 ms: Nd heard it 200 ms ago, well inside that, so the takeover is declined. A
    crash, from the same standby's side: the last frame reached Nd no later than the crash, and the standby
    heard the primary at most an interval before it, so the frame is as old as `unheard`, less its
    transit, which the lease covers: taken."""
    from lazystandby.core.errors import PrimaryAlive

    lease = PrimaryLease(0.15)
    lease.arrived(1.0)
    lease.renew(1.01)  # Nd's answer: the lease counts from it, the arrival stays
    assert lease.renewed_at == 1.01 and lease.arrived_at == 1.0
    with pytest.raises(PrimaryAlive, match="N's last frame came 200 ms ago, and N' has not heard it for 850 ms"):
        lease.check(1.2, node="N'", primary="N", receiver="Nd", unheard=0.85)
    lease.check(1.2, node="N'", primary="N", receiver="Nd")  # a standby that does not say: the lease alone
    lease.check(1.2, node="N'", primary="N", receiver="Nd", unheard=0.3)  # 200 + 150 >= 300 ms: taken
    # The crash: N's last frame at 1.0 and its last heartbeat answer too; N' suspects at 2.0 after a 1 s
    # timeout with heartbeats 0.2 s apart: unheard 0.8, the frame 1.0 s old (20 ms transit: 0.98).
    lease.check(2.0, node="N'", primary="N", receiver="Nd", unheard=0.8)
    lease.check(1.98, node="N'", primary="N", receiver="Nd", unheard=0.8)
    # A takeover's new primary has sent nothing yet: nothing to weigh, the lease alone.
    lease.grant(3.0)
    assert lease.arrived_at is None
    lease.check(3.2, node="X", primary="N'", receiver="Nd", unheard=5.0)
    # Whatever a standby says, a primary silent at Nd past the detector's timeout (less the lease) is not
    # protected: a standby cut off from N that then died, its word counted from long before, is taken.
    capped = PrimaryLease(0.15, unheard_max=1.0)
    capped.arrived(1.0)
    with pytest.raises(PrimaryAlive, match="cut off from a primary that lives"):
        capped.check(1.8, node="N'", primary="N", receiver="Nd", unheard=30.0)  # 0.8 + 0.15 < 1.0
    capped.check(1.9, node="N'", primary="N", receiver="Nd", unheard=30.0)  # 0.9 + 0.15 >= 1.0: taken
    with pytest.raises(ValueError):
        PrimaryLease(0.15, unheard_max=-1)
    # No lease, no decline of either kind (seed 000).
    off = PrimaryLease(0)
    off.arrived(1.0)
    off.check(1.01, node="N'", primary="N", receiver="Nd", unheard=5.0)


def test_epoch_fence_refuses_older_epochs_and_names_them():
    f = EpochFence("Nd")
    assert f.admit(1, sender="N", what="delivery")
    assert f.admit(2, sender="N'", what="takeover")
    assert not f.admit(2, sender="N'", what="delivery")
    with pytest.raises(StaleEpoch, match="epoch 1; current epoch is 2"):
        f.check(1, sender="N", what="delivery")


def test_detector_suspects_after_the_allowed_misses():
    d = FailureDetector(interval=0.1, allowed_misses=3, now=0.0)
    d.missed(0.1)
    d.missed(0.2)
    assert not d.suspects(0.25)
    d.missed(0.3)
    assert d.suspects(0.3) and d.suspected_at == 0.3


def test_detector_success_resets_the_count():
    d = FailureDetector(interval=0.1, allowed_misses=3, now=0.0)
    d.missed(0.1)
    d.missed(0.2)
    d.ok(0.25, rtt=0.001)
    d.missed(0.35)
    assert not d.suspects(0.36)


def test_detector_suspects_a_silent_peer_even_without_counted_misses():
    d = FailureDetector(interval=0.1, allowed_misses=3, now=0.0)
    assert not d.suspects(0.35)
    assert d.suspects(0.41)


def test_refused_connections_for_one_interval_are_a_failure_without_waiting_out_the_misses():
    d = FailureDetector(interval=0.1, allowed_misses=5, now=0.0)
    d.missed(0.10, refused=True)
    assert d.next_beat_in() == 0.025  # asked again sooner while refused
    d.missed(0.125, refused=True)
    d.missed(0.15, refused=True)
    assert not d.suspects(0.175)
    d.missed(0.2, refused=True)
    assert d.suspects(0.2) and d.misses == 4 < d.allowed_misses


def test_a_timeout_between_refusals_restarts_the_refusal_window_and_an_answer_ends_it():
    d = FailureDetector(interval=0.1, allowed_misses=5, now=0.0)
    d.missed(0.10, refused=True)
    d.missed(0.15)  # a late answer: the port may be held by a live, slow process
    assert d.next_beat_in() == 0.1
    d.missed(0.2, refused=True)
    assert not d.suspects(0.25)
    d.ok(0.26, rtt=0.001)
    d.missed(0.3, refused=True)
    assert not d.suspects(0.35) and d.suspects(0.4)


def test_time_the_standby_itself_stood_still_does_not_count_against_the_primary():
    d = FailureDetector(interval=0.1, allowed_misses=3, now=0.0)
    d.beat(0.0)
    d.ok(0.01, rtt=0.01)
    d.beat(0.11)  # this heartbeat's call is in flight when the standby is paused for 5.6 s
    d.missed(5.7, started=0.11)  # back: past its deadline, 5.7 s after the last answer
    assert not d.suspects(5.7) and d.stalls == 1 and d.misses == 0
    d.beat(5.8)
    d.missed(5.9, started=5.8)
    d.missed(6.0, started=5.9)
    assert not d.suspects(6.0)
    d.missed(6.1, started=6.0)
    assert d.suspects(6.1)  # a primary that is really gone: the usual three misses from the stall
    d = FailureDetector(interval=0.1, allowed_misses=3, now=0.0)
    d.ok(0.1, rtt=0.01)
    d.beat(3.0)  # paused between two heartbeats
    assert not d.suspects(3.0) and d.stalls == 1
    d.missed(3.1, started=3.0)
    assert not d.suspects(3.1)
    d = FailureDetector(interval=0.1, allowed_misses=3, now=0.0)
    d.ok(0.1, rtt=0.01)
    d.beat(0.2)
    d.missed(0.8, started=0.2)  # a slow call, shorter than stall_after (1 s here): a miss as before
    assert d.suspects(0.8) and d.stalls == 0


def test_a_pause_between_an_answer_and_the_verdict_does_not_count_against_the_primary():
    d = FailureDetector(interval=0.1, allowed_misses=3, now=0.0)
    d.beat(0.0)
    d.ok(0.01, rtt=0.01)  # the primary answered; the standby is paused before it asks for the verdict
    assert d.suspects(2.01)  # the verdict on time alone: 2 s without an answer
    d = FailureDetector(interval=0.1, allowed_misses=3, now=0.0)
    d.beat(0.0)
    d.ok(0.01, rtt=0.01)
    assert not d.suspects_after_beat(2.01) and d.stalls == 1 and d.last_ok == 2.01
    d.beat(2.02)  # the next heartbeat is no second stall
    assert d.stalls == 1
    for t in (2.1, 2.2):
        d.missed(t, started=t - 0.1)
        assert not d.suspects_after_beat(t)
    d.missed(2.3, started=2.2)
    assert d.suspects_after_beat(2.3)  # a primary that is really gone: three misses from the stall
    d = FailureDetector(interval=0.1, allowed_misses=3, now=0.0)
    d.ok(0.1, rtt=0.01)
    d.missed(0.2, started=0.1)
    d.missed(0.3, started=0.2)
    d.missed(0.4, started=0.3)
    assert d.suspects_after_beat(0.4) and d.stalls == 0  # asked on time: the verdict as before


def test_a_primary_not_heard_from_yet_gets_the_grace_before_late_heartbeats_count():
    d = FailureDetector(interval=0.1, allowed_misses=3, now=0.0, grace=2.0)
    for t in (0.1, 0.2, 0.3):
        d.missed(t)
    assert not d.suspects(0.45) and d.suspected_at is None  # without the grace: suspected here
    assert not d.suspects(2.0)
    assert d.suspects(2.01) and d.suspected_at == 2.01


def test_the_grace_ends_with_the_first_answer_and_never_covers_a_refusing_port():
    d = FailureDetector(interval=0.1, allowed_misses=3, now=0.0, grace=2.0)
    d.missed(0.1, refused=True)
    d.missed(0.15, refused=True)
    assert d.suspects(0.2)  # nothing listens: a dead primary, however new
    d = FailureDetector(interval=0.1, allowed_misses=3, now=0.0, grace=2.0)
    d.ok(0.1, rtt=0.001)
    for t in (0.2, 0.3, 0.4):
        d.missed(t)
    assert d.suspects(0.4)  # heard once: the detector's own timing


def test_waiting_to_register_is_not_hearing_and_a_refused_takeover_keeps_what_was_heard():
    d = FailureDetector(interval=0.1, allowed_misses=3, now=0.0, grace=2.0)
    d.waiting(5.0)  # not registered yet: the grace starts from the last wait
    assert not d.heard
    for t in (5.1, 5.2, 5.3):
        d.missed(t)
    assert not d.suspects(6.9) and d.suspects(7.01)
    d.ok(8.0, rtt=0.001)
    d.restart(9.0)
    assert d.heard and d.suspected_at is None
    for t in (9.1, 9.2, 9.3):
        d.missed(t)
    assert d.suspects(9.3)


def test_plan_replays_only_what_nd_lacks_and_asks_for_what_we_never_received():
    p = plan_takeover(epoch=2, delivered_through=100, received_through=500, oq_first=90, oq_last=130)
    assert (p.replay_from, p.replay_count, p.resend_from) == (101, 30, 501)


def test_plan_with_empty_standby_is_upstream_backup():
    p = plan_takeover(epoch=2, delivered_through=100, received_through=0, oq_first=1, oq_last=0)
    assert (p.replay_count, p.resend_from) == (0, 1)


def test_nu_resends_from_its_trim_point_at_the_earliest():
    assert resend_start(1, Checkpoint(400, 120)) == 401
    assert resend_start(500, Checkpoint(400, 120)) == 500


def test_jump_only_when_the_checkpoint_covers_the_gap_exactly():
    assert must_jump(expected=1, first=401, checkpoint=Checkpoint(400, 120))
    assert not must_jump(expected=1, first=402, checkpoint=Checkpoint(400, 120))
    assert not must_jump(expected=401, first=401, checkpoint=Checkpoint(400, 120))


def test_dedup_skips_repeats_and_refuses_gaps():
    d = DeliveryDedup("Nd", 10)
    a = d.admit(8, 5)
    assert (a.skip, a.take) == (3, 2)
    assert d.admit(1, 5).take == 0
    with pytest.raises(SequenceGap, match="expected 11"):
        d.admit(12, 1)


def test_per_stream_sequence_refuses_repeats_and_regressions_without_changing_state():
    p = PerStreamSequence("Nu")
    p.commit(p.check([1, 2, 1], [1, 1, 3]))
    with pytest.raises(DuplicateSequence):
        p.check([1], [3])
    with pytest.raises(NonMonotonicSequence):
        p.check([2, 2], [5, 4])
    assert p.last == {1: 3, 2: 1}
    assert p.check([1], [10]) == {1: 10}  # gaps in a stream are allowed (Kafka offsets)


def test_registry_names_unknown_streams():
    r = StreamRegistry(["I1", "I2"])
    assert r.id_of("I2") == 2 and r.name_of(0) == "_control"
    with pytest.raises(UnknownStream, match="'I9'"):
        r.id_of("I9", node="Nu")
    with pytest.raises(UnknownStream, match="id 7 at seq 3"):
        r.check_ids([1, 7], [1, 3], node="N")


def test_a_condition_that_recurs_is_said_once_then_once_every_interval_with_what_was_not_said():
    from lazystandby.core.reminder import Reminder

    now = [0.0]
    r = Reminder(lambda: now[0], every=30.0)
    assert not r.recently() and r.due()
    now[0] = 29.9
    assert r.recently() and not r.due() and not r.due()
    now[0] = 30.0
    assert not r.recently() and r.due() and r.take_suppressed() == 2 and r.take_suppressed() == 0
    now[0] = 45.0
    r.say_now()  # said for another reason (a link just went down): the next reminder is 30 s from here
    now[0] = 74.9
    assert not r.due()
    now[0] = 75.0
    assert r.due() and r.take_suppressed() == 1
