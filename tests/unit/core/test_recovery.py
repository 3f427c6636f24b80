"""The takeover plan: what to replay from OQ' and from where Nu resends."""

from lazystandby.core.acks import Checkpoint
from lazystandby.core.recovery import plan_takeover, resend_start


def test_plan_replays_only_what_nd_lacks_and_asks_for_what_we_never_received():
    p = plan_takeover(epoch=2, delivered_through=100, received_through=500, oq_first=90, oq_last=130)
    assert (p.replay_from, p.replay_count, p.resend_from) == (101, 30, 501)


def test_plan_with_empty_standby_is_upstream_backup():
    p = plan_takeover(epoch=2, delivered_through=100, received_through=0, oq_first=1, oq_last=0)
    assert (p.replay_count, p.resend_from) == (0, 1)


def test_nu_resends_from_its_trim_point_at_the_earliest():
    assert resend_start(1, Checkpoint(400, 120)) == 401
    assert resend_start(500, Checkpoint(400, 120)) == 500


def test_a_window_querys_resend_starts_at_nus_trim_point_not_after_the_checkpoint():
    from lazystandby.core.acks import Checkpoint
    from lazystandby.core.recovery import resend_start

    assert resend_start(1, Checkpoint(500, 40)) == 501
    assert resend_start(1, Checkpoint(500, 40), rebuild_from=320) == 320
    assert resend_start(600, Checkpoint(500, 40), rebuild_from=320) == 600  # it holds more than that
