"""The heartbeat failure detector: misses, refusals, the grace, and time the standby itself stood still."""

import pytest

from lazystandby.core.detector import FailureDetector


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


def test_a_lost_connection_and_a_refusal_suspect_the_primary_at_the_notices_hold_whatever_the_misses():
    d = FailureDetector(interval=0.1, allowed_misses=3, now=0.0, notice_hold=0.075)
    d.ok(1.0, rtt=0.001)
    d.lost(1.004)  # the kernel of the killed primary closed its socket
    assert d.next_beat_in(1.0) == 0.025  # asked at once, and every quarter interval from then
    d.missed(1.005, refused=True)
    d.missed(1.030, refused=True)
    d.missed(1.055, refused=True)  # three misses: without the notice this would suspect (and be declined)
    assert not d.suspects(1.055)
    assert d.next_beat_in(1.055) == pytest.approx(0.024)  # the next beat lands on the hold's end
    d.missed(1.0795, refused=True)
    assert d.suspects(1.0795) and d.suspected_at == 1.0795


def test_a_call_reset_by_the_dying_primary_keeps_the_quick_polls_of_the_notice():
    d = FailureDetector(interval=0.1, allowed_misses=3, now=0.0, notice_hold=0.075)
    d.ok(1.0, rtt=0.001)
    d.lost(1.004)
    d.missed(1.006)  # the heartbeat in flight: reset, not refused
    assert d.next_beat_in(1.006) == 0.025  # not a whole interval
    d.missed(1.031, refused=True)
    assert not d.suspects(1.078) and d.suspects(1.0795)


def test_a_refusal_before_the_notice_starts_the_hold():
    d = FailureDetector(interval=0.1, allowed_misses=5, now=0.0, notice_hold=0.075)
    d.ok(1.0, rtt=0.001)
    d.missed(1.002, refused=True)
    d.lost(1.010)
    assert not d.suspects(1.075) and d.suspects(1.0775)


def test_a_notice_without_refusals_or_followed_by_an_answer_proves_nothing():
    d = FailureDetector(interval=0.1, allowed_misses=3, now=0.0, notice_hold=0.075)
    d.ok(1.0, rtt=0.001)
    d.lost(1.004)  # the connection closed, and the primary answers the next call: it lives
    d.ok(1.006, rtt=0.002)
    assert d.lost_at is None and d.next_beat_in(1.006) == 0.1
    d.missed(1.1, refused=True)  # a refusal later, with no notice: the rules without one
    assert not d.suspects(1.19)
    d.ok(1.2, rtt=0.001)
    d.lost(1.3)
    d.missed(1.31)  # timeouts only (a slow primary holds its port): the allowed misses, not the hold
    d.missed(1.335)
    assert not d.suspects(1.39)
    d.missed(1.41)
    assert d.suspects(1.41)


def test_the_notices_hold_is_at_most_an_interval():
    with pytest.raises(ValueError):
        FailureDetector(interval=0.1, allowed_misses=3, now=0.0, notice_hold=0.2)
