"""bench/window.py's bound on a warm standby's throughput."""

from bench.window import bound_keys, operator_us_per_tuple


def test_the_bound_is_the_cores_over_the_no_standby_cost_plus_the_operators():
    no_ha = {"cpu_seconds_run": {"nu": 1.0, "n": 2.0, "nd": 1.0}, "tuples": 1_000_000}  # 4 us a tick
    peers = {"flink": {"tuples_per_s": 200_000}, "kstreams": {"tuples_per_s": 0}}
    k = bound_keys(no_ha, 1.0, peers, 2)
    assert k["window_no_ha_cpu_us_per_tuple"] == 4.0
    assert k["window_throughput_bound_tuples_per_s"] == 400_000  # 2 cores / (4 + 1) us
    assert k["window_throughput_bound_over_flink"] == 2.0
    assert k["window_throughput_bound_over_kstreams"] == 400_000.0  # a peer that read nothing: no division by 0


def test_the_operator_alone_costs_something_per_tick():
    us = operator_us_per_tuple(ticks=20_000, passes=1)
    assert 0 < us < 1_000


def test_a_run_that_cost_nothing_gives_no_bound_rather_than_a_division_by_zero():
    k = bound_keys({"cpu_seconds_run": {"nu": 0.0}, "tuples": 10}, 0.0, {"flink": {"tuples_per_s": 1},
                                                                        "kstreams": {"tuples_per_s": 1}}, 2)
    assert k["window_throughput_bound_tuples_per_s"] == 0
