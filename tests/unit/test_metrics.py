import pytest
from prometheus_client import generate_latest

from lazystandby.harness.inprocess import InProcessTopology
from lazystandby.metrics import registry_for


def scrape(node) -> dict[str, float]:
    out = {}
    for line in generate_latest(registry_for(node)).decode().splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def test_metrics_follow_a_failover():
    with InProcessTopology("memory", total=20_000, rate=20_000.0, bsize="10") as t:
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through > 2000)
        # Nd's acks have covered some of the backup before the kill: a heartbeat after the data began told
        # the standby how far the primary got (a busy machine may delay it past 2,000 results).
        assert t.wait(lambda: t.nodes["n2"].snapshot()["cover_latency_s"] is not None, 10)
        t.kill("n")
        assert t.wait(lambda: bool(t.nodes["n2"].takeover.recovery.get("data_recovery_ms") is not None), 20)
        nu, n2, nd = scrape(t.nodes["nu"]), scrape(t.nodes["n2"]), scrape(t.nodes["nd"])
    assert nu['lazystandby_tuples_total{node="Nu",stage="source"}'] > 0
    assert nu['lazystandby_e2e_commit_seconds_count{node="Nu"}'] > 0
    mean = nu['lazystandby_e2e_commit_seconds_sum{node="Nu"}'] / nu['lazystandby_e2e_commit_seconds_count{node="Nu"}']
    assert 0 < mean < 5
    assert nu['lazystandby_link_bytes_total{link="backup",node="Nu"}'] > 0
    assert 0 < nu['lazystandby_bandwidth_overhead{node="Nu"}'] < 1
    assert n2['lazystandby_role{node="N\'",role="primary"}'] == 1.0
    assert n2['lazystandby_epoch{node="N\'"}'] == 2
    assert n2['lazystandby_failovers_total{node="N\'"}'] == 1
    # A lazy standby decodes only what it needs: not the backup Nd's acks covered before it was due.
    assert n2['lazystandby_tuples_total{node="N\'",stage="backup_decoded"}'] < \
        n2['lazystandby_tuples_total{node="N\'",stage="backup"}']
    assert n2['lazystandby_backup_unreadable_total{node="N\'"}'] == 0
    assert n2['lazystandby_last_recovery_seconds{node="N\'",phase="detection"}'] > 0.1
    assert nd['lazystandby_duplicates_dropped_total{node="Nd"}'] == 0
    assert nd['lazystandby_gaps_total{node="Nd"}'] == 0
    # N delivered every few ms (an empty frame every ack_poll_ms when idle): its longest silence is short.
    assert 0 < nd['lazystandby_primary_longest_silence_seconds{node="Nd"}'] < 1.0
    assert nd['lazystandby_takeover_lease_seconds{node="Nd"}'] == pytest.approx(0.075)
    # A crash is never declined on the standby's word (N's last frame is as old as N' says it has not heard
    # N): at most by the lease, when a frame N sent just before it died was still fresh.
    assert nd['lazystandby_takeovers_declined_total{node="Nd",reason="unheard"}'] == 0
    assert nd['lazystandby_takeovers_declined_total{node="Nd",reason="lease"}'] <= 1


def test_histograms_count_batches_and_each_takeover():
    with InProcessTopology("memory", total=8_000, rate=8_000.0, bsize="10") as t:
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through > 500)
        t.kill("n")
        assert t.wait(lambda: bool(t.nodes["n2"].takeover.recovery.get("data_recovery_ms") is not None), 20)
        m = scrape(t.nodes["n2"])
    assert m['lazystandby_recovery_seconds_count{node="N\'",phase="detection"}'] == 1
    assert m['lazystandby_recovery_seconds_bucket{le="+Inf",node="N\'",phase="reconnection"}'] == 1
    assert m['lazystandby_operator_batch_seconds_count{node="N\'",operator="python"}'] > 0


def test_nu_exports_why_its_source_waited():
    from lazystandby.config import NodeConfig
    from lazystandby.node.upstream import UpstreamNode
    from lazystandby.sources.base import GeneratorSource
    from lazystandby.transport.memory import MemoryNetwork

    cfg = NodeConfig(role="upstream", listen="nu", primary="n", frame_max=100, primary_lag_max=200)
    nu = UpstreamNode(cfg, GeneratorSource(["I1", "I2"], total=10_000), MemoryNetwork().peer)
    try:
        for _ in range(4):
            nu._source_loop()  # 200 admitted, then the primary (which took nothing) holds the source
        m = scrape(nu)
    finally:
        nu.stop()
    assert m['lazystandby_source_waits_total{node="Nu",reason="primary"}'] == 2
    assert m['lazystandby_source_waits_total{node="Nu",reason="backup"}'] == 0
    assert m['lazystandby_source_waits_total{node="Nu",reason="oqu_full"}'] == 0
    assert m['lazystandby_source_waits_total{node="Nu",reason="standby"}'] == 0
    assert m['lazystandby_source_waits_total{node="Nu",reason="replay"}'] == 0


def test_nu_exports_its_wait_for_the_standby_to_register():
    from lazystandby.config import NodeConfig
    from lazystandby.node.upstream import UpstreamNode
    from lazystandby.sources.base import GeneratorSource
    from lazystandby.transport.memory import MemoryNetwork

    cfg = NodeConfig(role="upstream", listen="nu", primary="n", standby="s", standby_wait=60.0)
    nu = UpstreamNode(cfg, GeneratorSource(["I1", "I2"], total=10_000), MemoryNetwork().peer)
    nu.lock.wait = lambda timeout=None: True
    try:
        nu._hold_source_for_standby()
        for _ in range(3):
            nu._source_loop()
        m = scrape(nu)
    finally:
        nu.stop()
    assert nu.outbound.oqu.last == 0 and m['lazystandby_source_waits_total{node="Nu",reason="standby"}'] == 3


def test_a_stage_of_a_pipeline_labels_every_series_of_its_nodes_and_a_node_of_one_stage_none():
    with InProcessTopology("memory", total=200, rate=0.0, bsize="10") as t:
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through > 10)
        alone = generate_latest(registry_for(t.nodes["n"])).decode()
        t.nodes["n"].cfg.stage = 2  # as a node of stage 2 of a pipeline file of several is configured
        staged = generate_latest(registry_for(t.nodes["n"])).decode()
    assert "pipeline_stage" not in alone
    ours = [line for line in staged.splitlines() if line.startswith("lazystandby_")]
    assert ours and all('pipeline_stage="2"' in line for line in ours)
    assert 'lazystandby_role{node="N",pipeline_stage="2",role="primary"} 1.0' in ours
    assert all("pipeline_stage" not in line for line in staged.splitlines() if line.startswith("process_"))
