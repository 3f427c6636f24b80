"""The primary's lease at Nd (core.recovery.PrimaryLease): what it declines, for how long, and past it."""

import pytest

from lazystandby.core.recovery import PrimaryLease


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
