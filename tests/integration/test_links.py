"""Shaped links made for real: network namespaces joined by veth pairs to a bridge, tc at each place's
egress. A transfer between two places takes the time the link's rate says; the host reaches every place;
nothing is left after, and a network whose owner died is swept by the next one."""

import os
import socket
import subprocess
import sys

import pytest

from lazystandby.harness import links
from lazystandby.harness.links import ShapedNetwork, parse_link

pytestmark = pytest.mark.skipif(bool(links.available()), reason=links.available() or "")

RECEIVER = """
import socket, sys, time
s = socket.create_server((sys.argv[1], 7000)); print("ready", flush=True)
c, _ = s.accept(); n = 0; t0 = None
while (b := c.recv(1 << 16)):
    t0 = t0 or time.monotonic(); n += len(b)
print(n, time.monotonic() - t0, flush=True)
"""
SENDER = """
import socket, sys
c = socket.create_connection((sys.argv[1], 7000)); c.sendall(b"x" * int(sys.argv[2])); c.close()
"""


def _namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def _transfer(net: ShapedNetwork, nbytes: int) -> float:
    """Seconds from the first byte to the last of `nbytes` sent from place a to place b."""
    rx = subprocess.Popen(net.wrap("b", [sys.executable, "-c", RECEIVER, net.address("b")]), stdout=subprocess.PIPE,
                          text=True)
    try:
        assert rx.stdout.readline().strip() == "ready"
        subprocess.run(net.wrap("a", [sys.executable, "-c", SENDER, net.address("b"), str(nbytes)]), check=True,
                       timeout=60)
        got, seconds = rx.stdout.readline().split()
        assert int(got) == nbytes
        return float(seconds)
    finally:
        rx.kill()
        rx.wait()


def test_a_transfer_between_places_takes_the_time_the_link_rate_says_and_nothing_is_left():
    with ShapedNetwork(("a", "b"), parse_link("8mbit")) as net:
        names = [net.ns("a"), net.ns("b")]
        assert all(n in _namespaces() for n in names)
        seconds = _transfer(net, 2_000_000)  # 16 Mbit: 2 s at 8 Mbit/s
        assert 1.7 < seconds < 3.0, seconds
        # The harness, in the host's namespace, reaches a place through the bridge.
        rx = subprocess.Popen(net.wrap("b", [sys.executable, "-c", RECEIVER, net.address("b")]),
                              stdout=subprocess.PIPE, text=True)
        try:
            assert rx.stdout.readline().strip() == "ready"
            socket.create_connection((net.address("b"), 7000), timeout=5).close()
        finally:
            rx.kill()
            rx.wait()
    assert not any(n in _namespaces() for n in names)
    assert subprocess.run(["ip", "link", "show", net.bridge], capture_output=True).returncode != 0


def test_a_faster_link_carries_the_same_bytes_sooner():
    with ShapedNetwork(("a", "b"), parse_link("80mbit")) as net:
        seconds = _transfer(net, 2_000_000)
    assert seconds < 0.6, seconds


def test_a_network_whose_owner_died_is_swept_by_the_next():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = f"{links.NS_PREFIX}{dead.pid}-0abc12-nu"
    subprocess.run(["ip", "netns", "add", orphan], check=True)
    subprocess.run(["ip", "link", "add", "lsb0abc12", "type", "bridge"], check=True)
    try:
        assert orphan in links.sweep() and orphan not in _namespaces()
        assert subprocess.run(["ip", "link", "show", "lsb0abc12"], capture_output=True).returncode != 0
        mine = ShapedNetwork(("a",), parse_link("10mbit")).up()
        try:
            assert mine.ns("a") not in links.sweep()  # its owner lives
        finally:
            mine.down()
    finally:
        subprocess.run(["ip", "netns", "del", orphan], capture_output=True)
        subprocess.run(["ip", "link", "del", "lsb0abc12"], capture_output=True)


def test_a_failover_behind_shaped_links_is_exact_and_says_what_link_it_ran_on():
    """The four nodes each in a namespace of their own, mutual TLS on their namespace addresses, N killed:
    the output is exact, and the run names its link. The network goes with the topology."""
    from lazystandby.harness.launcher import run_trial

    r = run_trial(fault="kill-primary", total=12_000, rate=6_000, kill_after=1.0, timeout=90, tls=True,
                  link="10mbit")
    assert (r["lost"], r["duplicated"], r["ok"]) == (0, 0, True), r
    assert r["failovers"] == 1 and r["link"]["link"] == "10mbit" and r["link"]["rate_bps"] == 10**7, r
    assert f"{links.NS_PREFIX}{os.getpid()}-" not in _namespaces()


def test_a_link_with_a_fault_that_cuts_links_is_refused_before_anything_starts():
    from lazystandby.core.errors import SettingError
    from lazystandby.harness.launcher import run_trial

    with pytest.raises(SettingError, match="cuts links"):
        run_trial(fault="partition-primary-standby", total=1000, rate=1000, link="10mbit")
    assert f"{links.NS_PREFIX}{os.getpid()}-" not in _namespaces()
