"""Real node processes on loopback: kill -9 N, SIGSTOP/SIGCONT N, kill N', at Bsize 1, 10, inf and each
codec, every trial checked against the truth table rebuilt from the generator."""

import pytest

from lazystandby.core.codec import CodecName
from lazystandby.harness.launcher import run_trial

TOTAL, RATE = 20_000, 20_000.0


def trial(**kw):
    kw.setdefault("rate", RATE)
    r = run_trial(total=TOTAL, **kw)
    assert r["delivered_all"], f"Nd did not receive everything; logs in {r['workdir']}"
    assert r["took_over"], f"N' never went live after the fault; logs in {r['workdir']}"
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["unexpected"] == 0, r["diff"]
    assert r["same_order"] and r["oseq_gaps"] == 0 and r["ok"], r["diff"]
    return r


@pytest.mark.parametrize("codec", [c.value for c in CodecName])
@pytest.mark.parametrize("bsize", ["1", "10", "inf"])
def test_kill_primary(bsize, codec):
    r = trial(fault="kill-primary", bsize=bsize, codec=codec, kill_after=0.6)
    assert r["failovers"] == 1
    rec = r["recovery"]
    assert rec["epoch"] == 2
    assert 0 < rec["detection_ms"] < 2000 and rec["data_recovery_ms"] >= 0
    assert r["after"]["nd"]["counters"].get("duplicates_dropped", 0) == 0  # Precise, not Rollback + dedup


@pytest.mark.parametrize("codec", [c.value for c in CodecName])
@pytest.mark.parametrize("bsize", ["1", "10", "inf"])
def test_pause_primary_past_timeout_then_resume_is_fenced(bsize, codec):
    r = trial(fault="pause-primary", bsize=bsize, codec=codec, kill_after=0.6)
    assert r["failovers"] == 1
    assert r["after"]["n"]["role"] == "fenced", r["after"]["n"]
    # It tried, and was refused: by Nd when it delivered first, or by Nu when it first announced itself
    # (a primary that hears nothing from Nu for a second does; the announcement came after this test).
    refused = r["after"]["nd"]["errors"].get("stale_epoch", 0) + r["after"]["nu"]["errors"].get("stale_epoch", 0)
    assert refused >= 1


@pytest.mark.parametrize("codec", [c.value for c in CodecName])
@pytest.mark.parametrize("bsize", ["1", "10", "inf"])
def test_kill_standby_changes_nothing_downstream(bsize, codec):
    r = trial(fault="kill-standby", bsize=bsize, codec=codec, kill_after=0.6)
    assert r["failovers"] == 0
    assert r["after"]["nu"]["trimmed_through"] == TOTAL  # OQu still trimmed by the primary's acks


def test_bsize_1_is_active_standby():
    """Quiesced, then N killed: N' is up to date, Nu resends nothing."""
    r = trial(fault="kill-primary", bsize="1", codec="zstd-stream-dict", quiesce=True)
    assert r["before"]["n2"]["received_through"] == r["before"]["nu"]["head"] == TOTAL
    assert r["recovery"]["resent_by_nu"] == 0
    assert r["after"]["nu"]["counters"].get("resent_tuples", 0) == 0


def test_bsize_inf_is_upstream_backup_and_bsize_1_resends_less():
    """Under the same load and kill time: at inf N' holds no tuple (only Nu's checkpoints) and everything
    unacked is resent by Nu; at 1 N' was fed all along, so it replays from OQ' and Nu resends less."""
    # What Nu resends at inf is what arrived since the last trim point: mostly the detection window. A killed
    # N's port refuses at once and is suspected after one interval, so the interval is 0.3 s here: at 0.1 s
    # the window (about 1,100 tuples at this rate) was once shorter than the lag of Bsize 1's backup on a
    # busy machine (1,818 tuples), and the comparison measured the machine instead of the backup.
    slow = {"heartbeat_interval": 0.3}
    inf = trial(fault="kill-primary", bsize="inf", kill_after=1.0, rate=10_000.0, extra=slow)
    one = trial(fault="kill-primary", bsize="1", kill_after=1.0, rate=10_000.0, extra=slow)
    assert inf["before"]["n2"]["counters"].get("backup_tuples", 0) == 0
    assert inf["recovery"]["replayed_from_oq"] == 0
    assert inf["recovery"]["resent_by_nu"] > 0
    assert inf["recovery"]["resent_by_nu"] == inf["recovery"]["head_at_takeover"] - inf["recovery"]["resend_from"] + 1
    assert one["before"]["n2"]["counters"].get("backup_tuples", 0) > 0
    assert one["recovery"]["resent_by_nu"] < inf["recovery"]["resent_by_nu"]
    # The backup link costs bandwidth at Bsize 1; at inf it carries only Nu's trim checkpoints.
    assert inf["before"]["nu"]["overhead"] < 0.05
    assert one["before"]["nu"]["overhead"] > 0.2


def test_a_killed_primary_is_found_by_its_refused_port_and_a_paused_one_by_its_missed_heartbeats():
    """kill -9 closes N's port and its connections: N' is told the connection dropped, hears "connection
    refused", and takes over at the notice's hold (N's lease at Nd). A stopped N still holds its port and
    its connection: N' waits out all its misses (1 s here) before it does."""
    slow = {"heartbeat_interval": 0.1, "heartbeat_misses": 10}
    killed = trial(fault="kill-primary", bsize="10", codec="zstd-stream-dict", kill_after=0.6, extra=slow)
    paused = trial(fault="pause-primary", bsize="10", codec="zstd-stream-dict", kill_after=0.6, extra=slow)
    assert killed["recovery"]["detection_ms"] < 500, killed["recovery"]
    assert killed["after"]["n2"]["counters"].get("heartbeat_refused", 0) >= 1
    assert killed["after"]["n2"]["counters"].get("primary_connection_lost", 0) == 1
    assert paused["recovery"]["detection_ms"] >= 900, paused["recovery"]
    assert paused["after"]["n2"]["counters"].get("heartbeat_refused", 0) == 0
