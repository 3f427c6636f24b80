"""Link presets and the tc arguments they become (the namespaces themselves: tests/integration/test_links.py)."""

import pytest

from lazystandby.core.errors import SettingError
from lazystandby.harness.links import PRESETS, ShapedNetwork, parse_link, tbf_args


def test_the_presets_are_the_papers_links():
    assert {k: (p.rate_bps, p.delay_ms) for k, p in PRESETS.items()} == {
        "1gbit": (10**9, 0.5), "100mbit": (10**8, 1.0), "10mbit": (10**7, 5.0)}
    assert parse_link("10mbit") is PRESETS["10mbit"]


@pytest.mark.parametrize("spec, bps, delay", [("50mbit", 50_000_000, 0.0), ("800kbit:2", 800_000, 2.0),
                                              ("1.5gbit:0.25", 1_500_000_000, 0.25)])
def test_a_link_may_be_given_as_a_rate_and_a_delay(spec, bps, delay):
    p = parse_link(spec)
    assert (p.rate_bps, p.delay_ms, p.name) == (bps, delay, spec)


@pytest.mark.parametrize("spec", ["fast", "10mbps", "10mbit:x", "10mbit:-1", "4kbit", ""])
def test_a_link_that_is_no_rate_is_refused_with_the_forms_it_takes(spec):
    with pytest.raises(SettingError, match="link"):
        parse_link(spec)


def test_the_token_bucket_holds_a_millisecond_and_two_frames_and_queues_50_ms():
    slow = tbf_args(PRESETS["10mbit"])
    assert slow[:3] == ["tbf", "rate", "10000kbit"]
    burst, limit = int(slow[slow.index("burst") + 1]), int(slow[slow.index("limit") + 1])
    assert burst == 3100 and limit == 62_500  # two frames beat 1,250 bytes; 50 ms at 10 Mbit/s
    fast = tbf_args(PRESETS["1gbit"])
    assert int(fast[fast.index("burst") + 1]) == 125_000  # a millisecond at 1 Gbit/s


def test_each_place_has_its_namespace_address_and_command_line():
    net = ShapedNetwork(("nu", "n", "n2", "nd"), PRESETS["100mbit"], ident="abc123", subnet=7)
    assert net.address("nu") == "10.211.7.1" and net.address("nd") == "10.211.7.4"
    assert net.gateway == "10.211.7.254" and net.bridge == "lsbabc123" and len(net.bridge) <= 15
    assert net.wrap("n", ["python", "-V"])[:3] == ["ip", "netns", "exec"]
    assert net.wrap("n", ["python", "-V"])[3].endswith("-abc123-n")
    assert net.describe() == {"link": "100mbit", "rate_bps": 10**8, "delay_ms": 1.0, "delay_applied": False}
