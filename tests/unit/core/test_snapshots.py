"""core/snapshots.py: when the primary sends a full snapshot, and which snapshots a standby's chain takes."""

from lazystandby.core.snapshots import FULL, SnapshotChain, SnapshotPlan


def test_the_first_snapshot_is_full_then_deltas_until_they_weigh_what_the_full_one_did():
    plan = SnapshotPlan()
    assert plan.next_full("s")
    assert plan.taken(100, True, "s") == FULL
    plan.sent(100, True, 1_000, 100)
    assert not plan.next_full("s")
    assert plan.taken(200, False, "s") == 100  # a delta on the snapshot before
    plan.sent(200, False, 600, 200)
    assert not plan.next_full("s")
    assert plan.taken(300, False, "s") == 200
    plan.sent(300, False, 400, 300)
    assert plan.next_full("s")  # 600 + 400 of deltas: as much as the full one
    plan.taken(400, True, "s")
    plan.sent(400, True, 1_200, 400)
    assert not plan.next_full("s") and plan.delta_bytes == 0


def test_a_failed_or_refused_send_or_another_standby_makes_the_next_full():
    plan = SnapshotPlan()
    plan.taken(100, True, "s")
    plan.sent(100, True, 1_000, 100)
    plan.taken(200, False, "s")
    plan.sent(200, False, 10, None)  # the send failed
    assert plan.next_full("s")
    plan.taken(300, True, "s")
    plan.sent(300, True, 1_000, 300)
    plan.taken(400, False, "s")
    plan.sent(400, False, 10, 300)  # the standby holds only through 300: it refused the delta
    assert plan.next_full("s")
    plan.taken(500, True, "s")
    plan.sent(500, True, 1_000, 500)
    assert not plan.next_full("s") and plan.next_full("t")  # a standby that holds nothing of this chain


def test_a_chain_takes_a_newer_full_snapshot_and_only_deltas_that_continue_it():
    chain: SnapshotChain[str] = SnapshotChain()
    assert chain.through is None
    assert not chain.offer(200, 100, "delta with no base held")
    assert chain.offer(100, FULL, "full@100")
    assert chain.offer(200, 100, "delta@200")
    assert not chain.offer(300, 100, "a delta on a snapshot no longer last")
    assert not chain.offer(250, 300, "a delta whose base is not held")
    assert not chain.offer(150, FULL, "an older full one")
    assert chain.through == 200 and chain.frames() == ["full@100", "delta@200"]
    assert chain.offer(300, FULL, "full@300")
    assert chain.frames() == ["full@300"] and chain.through == 300
    chain.clear()
    assert chain.through is None and chain.frames() == []
