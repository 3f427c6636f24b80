"""Network partitions: every node keeps running while the links between some of them carry nothing, then
heal and deliver what they held, late. Real node processes on loopback, each cut link through a LinkRelay,
Nd's output checked against the truth table."""

import socket
import threading
import time

import pytest

from lazystandby.harness.faults import CATALOG
from lazystandby.harness.launcher import cuttable, run_trial
from lazystandby.harness.partition import LinkRelay

# "No failover" is asserted below, as in test_faults_beyond_catalog: a calm detector on these 2 busy cores.
CALM = {"heartbeat_interval": 0.2, "heartbeat_misses": 5}


@pytest.fixture
def echo():
    """A loopback server that echoes every byte; yields its address and the connections it accepted."""
    srv = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            accepted.append(c)
            threading.Thread(target=lambda c=c: [c.sendall(d) for d in iter(lambda: c.recv(4096), b"")],
                             daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield f"127.0.0.1:{srv.getsockname()[1]}", accepted
    srv.close()
    for c in accepted:
        c.close()


def dial(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    s = socket.create_connection((host, int(port)), timeout=5)
    s.settimeout(0.3)
    return s


def test_a_cut_link_holds_bytes_both_ways_and_delivers_them_in_order_when_healed(echo):
    target, accepted = echo
    relay = LinkRelay(target)
    try:
        c = dial(relay.address)
        c.sendall(b"one")
        assert c.recv(16) == b"one"
        relay.cut()
        c.sendall(b"two")
        with pytest.raises(TimeoutError):
            c.recv(16)
        late = dial(relay.address)  # a connection made while cut reaches nothing yet
        late.sendall(b"three")
        time.sleep(0.2)
        assert len(accepted) == 1
        relay.heal()
        c.settimeout(5)
        late.settimeout(5)
        assert c.recv(16) == b"two"
        assert late.recv(16) == b"three" and len(accepted) == 2
    finally:
        relay.close()


def test_a_relay_to_a_dead_server_ends_the_client_connection():
    spare = socket.create_server(("127.0.0.1", 0))
    dead = f"127.0.0.1:{spare.getsockname()[1]}"
    spare.close()  # nothing listens there now
    relay = LinkRelay(dead)
    try:
        c = dial(relay.address)
        c.settimeout(5)
        assert c.recv(16) == b""  # closed, as a reset would close it
    finally:
        relay.close()


def test_the_links_a_fault_cuts_are_the_ones_its_steps_name():
    assert cuttable(CATALOG["partition-primary-standby"]) == {frozenset({"n", "n2"})}
    assert cuttable(CATALOG["isolate-primary"]) == {frozenset({"n", k}) for k in ("nu", "n2", "nd")}
    assert cuttable(CATALOG["kill-primary"]) == frozenset()


def exact(r):
    assert r["ok"], {k: r.get(k) for k in ("lost", "duplicated", "got", "expected", "diff", "events", "workdir")}
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["got"] == r["expected"] > 1000
    assert r["events"][0]["action"] == "partition" and r["events"][0]["links"] >= 1


def test_a_primary_cut_off_from_every_node_is_replaced_and_fenced_and_split_brain_never_reaches_nd():
    r = run_trial(fault="isolate-primary", total=30_000, rate=15_000, kill_after=0.8, timeout=90)
    exact(r)
    assert r["failovers"] == 1
    n, n2 = r["after"]["n"], r["after"]["n2"]
    assert n2["role"] == "primary" and n2["epoch"] == 2
    # N ran all along; it learnt it was replaced from a refusal by epoch.
    assert n["role"] == "fenced" and n["epoch"] == 1


@pytest.mark.parametrize("name", ["partition-upstream-primary", "partition-primary-downstream",
                                  "partition-upstream-standby"])
def test_a_partition_the_standby_can_see_across_heals_with_no_failover(name):
    """N' still hears N, so no takeover; the calls that timed out meanwhile arrive after the heal and are
    taken once. (A primary announcing itself to a Nu that knows it by another address must not fence
    itself: tests/unit/node/test_announce.py has that case.)"""
    r = run_trial(fault=name, total=30_000, rate=15_000, kill_after=0.8, timeout=90, extra=CALM)
    exact(r)
    assert r["failovers"] == 0
    assert r["after"]["n"]["role"] == "primary" and r["after"]["n2"]["role"] == "standby"
    assert r["after"]["n"]["counters"].get("fenced", 0) == 0
    if name == "partition-upstream-standby":  # Nu went on without N' rather than wait for it
        assert r["after"]["nu"]["counters"].get("standby_out_of_sync", 0) >= 1


@pytest.mark.parametrize("name", ["partition-primary-standby", "isolate-standby"])
def test_a_standby_cut_off_from_a_primary_that_still_delivers_never_deposes_it(name):
    """N' suspects N (after each timeout while cut from it; once, while cut from everyone), and Nd declines
    every takeover, since N's deliveries renew its lease: N' withdraws its epoch, no failover, one primary
    throughout, and the output is exact. (Before the lease, N' deposed N at the heal, or at once.)"""
    r = run_trial(fault=name, total=30_000, rate=15_000, kill_after=0.8, timeout=90)
    exact(r)
    assert r["failovers"] == 0
    after = r["after"]
    assert (after["n"]["role"], after["n2"]["role"]) == ("primary", "standby")
    assert {after[k]["epoch"] for k in after} == {1}
    assert after["n2"]["counters"].get("takeovers_declined", 0) >= 1 and r["takeovers_declined"] >= 1
    assert after["n"]["counters"].get("fenced", 0) == 0


def test_a_standby_cut_off_from_an_idle_primary_silent_past_its_lease_does_not_depose_it():
    """Nd's lease at 10 ms, shorter than an idle primary's frames are apart (25 ms): it has lapsed at
    almost every ask, as a 150 ms lease does after a 300-400 ms silence on busy containers. N' says it has
    not heard N for about 200 ms (its 0.3 s timeout, less an interval); N's last frame reached Nd within
    that, so Nd declines: no failover. Under the lease alone, N' deposes N here."""
    r = run_trial(fault="partition-primary-standby", total=6_000, rate=15_000, kill_after=0.8, timeout=90,
                  per_node={"nd": {"takeover_lease": 0.01}})
    exact(r)
    assert r["takeover_lease_ms"] == 10.0 and r["primary_longest_silence_ms"] > 10.0
    assert r["failovers"] == 0 and r["takeovers_declined"] >= 1, (r["failovers"], r["takeovers_declined"])
    assert (r["after"]["n"]["role"], r["after"]["n2"]["role"]) == ("primary", "standby")


def test_a_primary_that_dies_while_its_standby_is_cut_off_from_it_is_still_taken_over():
    """N and N' cut off from each other, and Nd declines N''s takeovers while N delivers; N killed during
    the cut: N' takes over within two detector timeouts of the kill (its word on N, counted from its last
    decline, may be weighed once more), before the heal, and the output is exact."""
    r = run_trial(fault="partition-primary-standby-then-kill-primary", total=40_000, rate=10_000, kill_after=0.8,
                  timeout=90)
    assert r["ok"], {k: r.get(k) for k in ("lost", "duplicated", "got", "expected", "events", "workdir")}
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["got"] == r["expected"] > 1000
    assert [e["action"] for e in r["events"]] == ["cut", "kill", "heal"]
    assert r["failovers"] == 1 and r["after"]["n2"]["role"] == "primary" and r["takeovers_declined"] >= 1
    kill = next(e["at"] for e in r["events"] if e["action"] == "kill")
    live = r["recovery"]["live_at"]
    assert live - kill < 2 * 0.3 + 0.5, (live - kill, r["recovery"])  # two timeouts, and the catch-up


def test_a_takeover_cut_off_from_nu_halfway_finishes_at_the_heal_and_is_exact():
    """N' fences Nd, then cannot reach Nu for about 2 s: the takeover waits for the link, nothing is lost
    or repeated, and no other node moves meanwhile."""
    r = run_trial(fault="partition-upstream-standby-then-kill-primary", total=30_000, rate=15_000, kill_after=0.8,
                  timeout=90)
    assert r["ok"], {k: r.get(k) for k in ("lost", "duplicated", "got", "expected", "events", "workdir")}
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["got"] == r["expected"] > 1000
    assert [e["action"] for e in r["events"]] == ["cut", "kill", "heal"]
    assert r["failovers"] == 1 and r["after"]["n2"]["role"] == "primary" and r["after"]["nu"]["epoch"] == 2
    # The takeover could not finish before the heal: live no sooner than the cut's end.
    assert r["recovery_ms"] >= 1500, r["recovery_ms"]
