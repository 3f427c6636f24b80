"""core.recovery_model: the fitted call cost, the operator's rate and the sum of the terms."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lazystandby.core.recovery_model import (
    CallCost,
    RecoveryTerms,
    calls_seconds,
    crash_detection_s,
    units_within,
)


def test_the_call_cost_separates_the_round_trip_from_the_rate():
    cost = CallCost()
    for nbytes in (1_000, 5_000, 20_000, 80_000) * 4:  # 10 Mbit/s (1.25 MB/s) and a 2 ms round trip
        cost.add(nbytes, 0.002 + nbytes / 1_250_000)
    per_call, per_byte = cost.fit()
    assert per_call == pytest.approx(0.002, rel=1e-6)
    assert per_byte == pytest.approx(1 / 1_250_000, rel=1e-6)
    # 1 MB in frames of 100 kB: ten calls
    assert cost.seconds_for(1_000_000, 100_000) == pytest.approx(10 * 0.002 + 0.8, rel=1e-6)
    assert cost.seconds_for(0, 100_000) == 0.0


def test_calls_of_one_size_put_the_whole_cost_on_the_call():
    cost = CallCost()
    for _ in range(10):
        cost.add(4_000, 0.005)
    assert cost.fit() == (pytest.approx(0.005), 0.0)


def test_a_slope_that_noise_made_negative_is_read_as_no_slope():
    cost = CallCost()
    for nbytes, s in [(1_000, 0.004), (50_000, 0.002)] * 5:
        cost.add(nbytes, s)
    per_call, per_byte = cost.fit()
    assert per_byte == 0.0 and per_call == pytest.approx(0.003)


def test_no_fit_before_enough_calls_and_none_from_a_bad_sample():
    cost = CallCost(min_samples=3)
    cost.add(100, 0.001)
    cost.add(-1, 0.001)  # not a sample
    cost.add(100, -0.5)  # not a sample either
    assert cost.fit() is None and cost.seconds_for(1_000, 100) is None
    cost.add(200, 0.002)
    cost.add(400, 0.004)
    assert cost.fit() is not None


def test_the_oldest_calls_leave_the_window():
    cost = CallCost(window=8, min_samples=8)
    for nbytes in (1_000, 4_000) * 4:
        cost.add(nbytes, 0.5)  # a slow link, long ago
    for nbytes in (1_000, 4_000) * 4:
        cost.add(nbytes, 0.001)
    assert cost.fit()[0] == pytest.approx(0.001)


def test_an_operators_cost_per_call_makes_a_replay_in_large_calls_faster_than_the_steady_rate():
    cost = CallCost()
    for tuples in (10, 40, 160) * 4:  # steady state: small calls, 1 ms each plus 5 us a tuple
        cost.add(tuples, 0.001 + tuples * 5e-6)
    steady_rate = (10 + 40 + 160) / (3 * 0.001 + 210 * 5e-6)
    replay = cost.seconds_for(32_768, 32_768)
    assert replay == pytest.approx(0.001 + 32_768 * 5e-6)
    assert replay < 32_768 / steady_rate / 3


def test_a_few_calls_held_up_by_a_pause_do_not_tilt_the_fit():
    cost = CallCost()
    for i in range(250):  # steady state: 0.85 ms a call and 1.5 us a tuple, in calls of 1 to 50 tuples
        tuples = 1 + i % 50
        cost.add(tuples, 0.00085 + tuples * 1.5e-6)
    for _ in range(3):
        cost.add(50, 0.060)  # a collector's pause in three of the largest calls
    per_call, per_tuple = cost.fit()
    assert per_call == pytest.approx(0.00085, rel=0.1) and per_tuple == pytest.approx(1.5e-6, rel=0.3)
    cost.add(400, 0.032)  # one larger call, slow as a cold start: alone of its size, it does not count
    assert cost.fit() == (per_call, per_tuple)
    cost.add(400, 0.032, keep=True)  # a probe counts alone
    assert cost.fit()[1] > 10 * per_tuple


def test_the_terms_add_up():
    t = RecoveryTerms(detection_s=0.1, reconnection_s=0.01, resend_s=0.5, replay_s=0.1, replay_tuples=10_000,
                      restore_s=0.2)
    assert t.seconds == pytest.approx(0.1 + 0.01 + 0.5 + 0.1 + 0.2)
    d = t.as_dict()
    assert d["seconds"] == pytest.approx(0.91) and d["replay_tuples"] == 10_000 and d["complete"] is True


def test_a_crash_is_suspected_at_the_third_quarter_interval_miss_or_after_an_interval_of_refusals():
    assert crash_detection_s(0.1, 3) == pytest.approx(0.05 + 0.05)  # three misses: first + two quarter polls
    assert crash_detection_s(0.1, 10) == pytest.approx(0.05 + 0.1)  # an interval of refusals comes first
    assert crash_detection_s(0.1, 1) == pytest.approx(0.05)


def test_a_detection_takes_as_long_again_as_its_heartbeats_start_late_and_its_calls_take():
    # Every beat 8 ms late: half a period of 108 ms, two polls of 33 ms, the last refused call's 1 ms.
    assert crash_detection_s(0.1, 3, late_s=0.008, call_s=0.001) == pytest.approx(0.054 + 0.066 + 0.001)
    # A call slower than a quarter interval: the next poll waits for it.
    assert crash_detection_s(0.1, 3, call_s=0.04) == pytest.approx(0.05 + 2 * 0.04 + 0.04)
    # Late polls make an interval of refusals take fewer of them: 4 polls of 25 ms, 3 of 35 ms.
    assert crash_detection_s(0.1, 10, late_s=0.01) == pytest.approx(0.055 + 3 * 0.035)


def test_a_detection_told_of_the_lost_connection_takes_the_hold_whatever_the_heartbeats_phase():
    # The notice a round trip after the crash, the suspecting beat at the hold's end (2 ms late), its
    # refusal back in a round trip; the allowed misses do not enter.
    assert crash_detection_s(0.1, 3, late_s=0.002, call_s=0.001, notice_hold_s=0.075) == pytest.approx(0.079)
    assert crash_detection_s(0.1, 10, notice_hold_s=0.075) == pytest.approx(0.075)
    assert crash_detection_s(0.1, 3, notice_hold_s=0.0) == 0.0  # no lease: the first refusal suspects


def test_the_largest_bsize_whose_prediction_meets_the_target_within_the_margin_is_chosen():
    from lazystandby.core.recovery_model import choose_cheapest

    predicted = {1: 0.10, 10: 0.11, 100: 0.2, 1_000: 0.39, 10_000: 0.41, 100_000: 2.0, None: 3.0}
    c = choose_cheapest(0.5, predicted.__getitem__)  # 0.8 x 0.5 = 0.4
    assert (c.value, c.predicted_s, c.met) == (1_000, 0.39, True)
    assert c.candidates == {"1": 0.1, "10": 0.11, "100": 0.2, "1000": 0.39, "10000": 0.41, "100000": 2.0, "inf": 3.0}
    assert choose_cheapest(10.0, predicted.__getitem__).value is None  # everything meets it: Upstream Backup
    none = choose_cheapest(0.05, predicted.__getitem__)
    assert (none.value, none.predicted_s, none.met) == (1, 0.10, False)  # nothing meets it: the fastest


def test_what_a_crash_makes_nu_resend_grows_with_bsize_and_is_everything_held_at_inf():
    from lazystandby.core.recovery_model import resend_at

    assert resend_at(100, unbounded=50_000, rate=4_000, linger_s=0.005) == 100 + 20
    assert resend_at(10_000, unbounded=50_000, rate=4_000, linger_s=0.005) == 10_020
    assert resend_at(None, unbounded=50_000, rate=4_000, linger_s=0.005) == 50_000


def test_probes_of_one_size_count_at_their_median_so_one_held_up_does_not_set_the_slope():
    cost = CallCost()
    for i in range(200):
        cost.add(20 + i % 40, 0.002)
    for s in (0.030, 0.031, 0.090, 0.029):  # the third held up threefold by a busy core
        cost.add(4_096, s, keep=True)
    call, per_tuple = cost.fit()
    assert per_tuple == pytest.approx((0.0305 - 0.002) / (4_096 - 39.5), rel=0.02)


@settings(max_examples=300, deadline=None)
@given(seconds=st.floats(0, 30), take=st.integers(1, 50_000), per_call=st.floats(0, 0.5),
       per_unit=st.floats(0, 1e-3))
@example(seconds=1.0, take=4, per_call=0.005, per_unit=0.0)  # 200 calls fit exactly, where 1.0 // 0.005 is 199
def test_units_within_is_the_inverse_of_calls_seconds(seconds, take, per_call, per_unit):
    n = units_within(seconds, take, per_call, per_unit)
    if n is None:  # free units, or so cheap that no backlog reaches the bound
        assert per_call + take * per_unit <= 0 or seconds / (per_call + take * per_unit) * take >= 1 << 50
        return
    assert calls_seconds(n, take, per_call, per_unit) <= seconds
    assert calls_seconds(n + 1, take, per_call, per_unit) > seconds


def test_units_within_counts_full_calls_then_what_a_last_call_leaves():
    # 1 s at 100 ms a call and 1 ms a unit in calls of 100: each full call 200 ms, five of them
    assert units_within(1.0, 100, 0.1, 0.001) == 500
    # 1.1755 s: five full calls, then 175.5 ms for a sixth: 100 ms fixed, 75 units
    assert units_within(1.1755, 100, 0.1, 0.001) == 575
    assert units_within(0.05, 100, 0.1, 0.001) == 0  # not even one call's fixed cost
    assert units_within(1.0, 100, 0.0, 0.0) is None


def test_replay_room_counts_the_backlog_and_the_unconfirmed_and_lets_a_batch_wait():
    from lazystandby.core.recovery_model import StandbyView, replay_room

    view = StandbyView(fixed_s=0.1, call_s=0.01, tuple_s=0.0001, take=100, backlog=100)  # 500 in 100 ms
    assert replay_room(0.1, view, 150, 10) == 250
    assert replay_room(0.1, view, 900, 10) == 0
    assert replay_room(0.001, StandbyView(0.1, 0.01, 0.0001, 100, 0), 0, 10) == 10  # below a call: a batch
    assert replay_room(0.1, StandbyView(0.1, 0.0, 0.0, 100, 5), 0, 10) is None  # free tuples: no bound


def test_replay_room_prices_a_view_once():
    from lazystandby.core.recovery_model import StandbyView, replay_room

    view = StandbyView(fixed_s=0.1, call_s=0.0123, tuple_s=0.000456, take=789, backlog=0)
    first = replay_room(0.7, view, 10, 10)
    before = units_within.cache_info()
    for unconfirmed in range(10, 1000, 10):  # the source's turns between two answers: one price, kept
        assert replay_room(0.7, view, unconfirmed, 10) == max(0, first + 10 - unconfirmed)
    after = units_within.cache_info()
    assert after.misses == before.misses and after.hits == before.hits + 99
