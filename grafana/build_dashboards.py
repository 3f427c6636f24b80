"""Writes grafana/dashboards/*.json from the panel definitions below (run: python grafana/build_dashboards.py).

Every expression here is also run against a real Prometheus by `make dashboards-check`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

R = "[$__rate_interval]"

DASHBOARDS: dict[str, tuple[str, list[tuple[str, str, list[tuple[str, str]]]]]] = {
    "pipeline-overview": ("Lazy Standby: pipeline overview", [
        ("Tuples/s by node and stage", "ops", [
            (f"sum by (node, stage) (rate(lazystandby_tuples_total{R}))", "{{node}} {{stage}}")]),
        ("Delivered to Nd, tuples/s", "ops", [
            (f'sum(rate(lazystandby_tuples_total{{node="Nd",stage="delivered"}}{R}))', "delivered")]),
        ("End-to-end commit latency p50 / p99 (into Nu -> outputs in Nd)", "s", [
            (f"histogram_quantile(0.5, sum by (le) (rate(lazystandby_e2e_commit_seconds_bucket{R})))", "p50"),
            (f"histogram_quantile(0.99, sum by (le) (rate(lazystandby_e2e_commit_seconds_bucket{R})))", "p99")]),
        ("Source lag at Nu (records not yet consumed)", "short", [
            ("sum by (stream) (lazystandby_source_lag)", "{{stream}}")]),
        ("Operator batch duration p50 / p99 (Spark micro-batches)", "s", [
            (f"histogram_quantile(0.5, sum by (le, node) (rate(lazystandby_operator_batch_seconds_bucket{R})))",
             "{{node}} p50"),
            (f"histogram_quantile(0.99, sum by (le, node) (rate(lazystandby_operator_batch_seconds_bucket{R})))",
             "{{node}} p99")]),
        ("Dead-lettered records/s", "ops", [(f"sum(rate(lazystandby_dead_letters_total{R}))", "dead letters")]),
        ("Poison inputs quarantined by the operator, and dead letters not written (both stay 0 on good input)",
         "short", [("sum by (node) (lazystandby_quarantined_total)", "{{node}} quarantined"),
                   ("sum(lazystandby_dead_letters_unwritten_total)", "dead letters not written")]),
        ("Source waits/s at Nu, by reason (backpressure: OQu full, backup or primary behind)", "ops", [
            (f"sum by (reason) (rate(lazystandby_source_waits_total{R}))", "{{reason}}")]),
        ("Source gaps: records deleted before Nu read them (must stay 0)", "short", [
            ("sum(lazystandby_source_gaps_total)", "source gaps")]),
        ("Refused requests/s by reason", "ops", [
            (f"sum by (node, reason) (rate(lazystandby_rpc_errors_total{R}))", "{{node}} {{reason}}")]),
    ]),
    "high-availability": ("Lazy Standby: high availability", [
        ("Role of each node", "short", [('max by (node, role) (lazystandby_role) == 1', "{{node}} {{role}}")]),
        ("Epoch", "short", [("max by (node) (lazystandby_epoch)", "{{node}}")]),
        ("Heartbeat round trip", "s", [("max by (node) (lazystandby_heartbeat_rtt_seconds)", "{{node}}")]),
        ("Heartbeat misses/s", "ops", [(f"sum by (node) (rate(lazystandby_heartbeat_misses_total{R}))", "{{node}}")]),
        ("Failovers, and handovers among them", "short", [
            ("sum by (node) (lazystandby_failovers_total)", "{{node}}"),
            ("sum(lazystandby_handovers_total)", "handovers (a primary asked to stop)")]),
        ("Last recovery, by phase", "s", [
            ("max by (phase) (lazystandby_last_recovery_seconds)", "{{phase}}")]),
        # What a takeover would take now (core.recovery_model), beside what the last one took.
        ("Predicted recovery if the primary crashed now, and the last failover measured", "s", [
            ("max by (node) (lazystandby_predicted_recovery_seconds)", "{{node}} predicted"),
            ("sum(max by (phase) (lazystandby_last_recovery_seconds))", "last measured")]),
        ("Predicted recovery by term (the standby's)", "s", [
            ("max by (term) (lazystandby_predicted_recovery_term_seconds)", "{{term}}")]),
        ("Recovery phases, all failovers (mean)", "s", [
            ("sum by (phase) (lazystandby_recovery_seconds_sum) / clamp_min(sum by (phase) "
             "(lazystandby_recovery_seconds_count), 1)", "{{phase}}")]),
        ("Replayed from OQ' / resent by Nu", "short", [
            ("sum(lazystandby_replayed_from_oq_total)", "replayed from OQ'"),
            ("sum(lazystandby_resent_by_upstream_total)", "resent by Nu")]),
        ("Peers each node believes alive (1) or not (0), and the standby in sync (1) or not (0)", "short", [
            ("max by (node, peer) (lazystandby_peer_up)", "{{node}} -> {{peer}}"),
            ('min(lazystandby_standby_in_sync{node="Nu"})', "standby in sync")]),
        ("Failed calls/s by peer and status", "ops", [
            (f"sum by (node, peer, status) (rate(lazystandby_link_failures_total{R}))",
             "{{node}} -> {{peer}} {{status}}")]),
        ("Duplicates dropped and gaps at Nd (must stay 0)", "short", [
            ('sum(lazystandby_duplicates_dropped_total{node="Nd"})', "duplicates dropped"),
            ('sum(lazystandby_gaps_total{node="Nd"})', "gaps")]),
        # N' works through the backup as it arrives: at a takeover it has this much left to process.
        ("Standby lag: inputs behind the primary, and seconds the oldest waited", "short", [
            ("max by (node) (lazystandby_standby_lag_tuples)", "{{node}} inputs"),
            ("max by (node) (lazystandby_standby_lag_seconds)", "{{node}} seconds")]),
        # A window query's state on N and N' (the same groups on both), and what the standby has not applied.
        ("Operator state: open (window, key) groups, and inputs not yet applied", "short", [
            ("max by (node) (lazystandby_state_keys)", "{{node}} groups"),
            ("max by (node) (lazystandby_state_lag_tuples)", "{{node}} inputs not applied")]),
        ("Operator state bytes", "bytes", [
            ("max by (node) (lazystandby_state_bytes)", "{{node}}")]),
        # A primary whose oldest call passes operator_stall_max says so (stalled 1), and its standby takes over.
        ("Operator: seconds its oldest unanswered call has waited, and stalled (1)", "s", [
            ("max by (node) (lazystandby_operator_oldest_call_seconds)", "{{node}} oldest call"),
            ("max by (node) (lazystandby_operator_stalled)", "{{node}} stalled")]),
        # A working primary silent at Nd for longer than its lease can be deposed by a standby cut off from it.
        ("Primary's longest silence at Nd, and the takeover lease", "s", [
            ("max(lazystandby_primary_longest_silence_seconds)", "longest silence"),
            ("max(lazystandby_takeover_lease_seconds)", "lease")]),
        # Declines: a standby that cannot hear a primary Nd still hears (a partition between the two).
        ("Takeovers Nd declined (the primary lives), by reason", "short", [
            ("sum by (reason) (lazystandby_takeovers_declined_total)", "{{reason}}")]),
    ]),
    "backup-bandwidth": ("Lazy Standby: backup bandwidth", [
        ("Bytes/s per link", "Bps", [(f"sum by (link) (rate(lazystandby_link_bytes_total{R}))", "{{link}}")]),
        ("Bandwidth overhead (backup / primary bytes) and budget", "percentunit", [
            ('max(lazystandby_bandwidth_overhead{node="Nu"})', "overhead"),
            ('max(lazystandby_overhead_budget{node="Nu"})', "budget")]),
        # With recovery_target_ms Nu picks Bsize from the predicted recovery; without, the configured one.
        ("Bsize in force at Nu, and whether it is predicted to meet the recovery target (1) or not (0)", "short", [
            ('max(lazystandby_bsize{node="Nu"})', "Bsize"),
            ('max(lazystandby_recovery_target_met{node="Nu"})', "target met")]),
        ("Compression ratio (compressed / raw backup)", "percentunit", [
            ('max(lazystandby_compression_ratio{node="Nu"})', "ratio")]),
        ("Backup tuples/s into the standby", "ops", [
            (f'sum(rate(lazystandby_tuples_total{{stage="backup"}}{R}))', "{{node}}")]),
    ]),
    "queues-memory": ("Lazy Standby: queues and memory", [
        ("Queue depth", "short", [("max by (node, queue) (lazystandby_queue_depth)", "{{node}} {{queue}}")]),
        ("Nu's backup: unbatched vs batched", "short", [
            ('max by (queue) (lazystandby_queue_depth{node="Nu",queue=~"oqu_unbatched|oqu_batched"})', "{{queue}}")]),
        ("Resident memory", "bytes", [("max by (job) (process_resident_memory_bytes)", "{{job}}")]),
        ("CPU", "percentunit", [(f"sum by (job) (rate(process_cpu_seconds_total{R}))", "{{job}}")]),
    ]),
}


DS = {"type": "prometheus", "uid": "${ds}"}
_NODE_METRIC = re.compile(r"\b(lazystandby_[a-z0-9_]+)(\{([^}]*)\})?")


def by_node(expr: str) -> str:
    """Every lazystandby_* selector narrowed to the nodes and pipeline stages picked in the dashboard's
    `node` and `stage` variables (a node of a pipeline of one stage has no `pipeline_stage` label, which
    "All" matches)."""
    def add(m: re.Match) -> str:
        inner = m.group(3)
        return f'{m.group(1)}{{node=~"$node",pipeline_stage=~"$stage"{"," + inner if inner else ""}}}'
    return _NODE_METRIC.sub(add, expr)


def panel(i: int, title: str, unit: str, targets: list[tuple[str, str]]) -> dict:
    return {
        "id": i + 1, "type": "timeseries", "title": title, "datasource": DS,
        "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": chr(65 + j), "expr": by_node(e), "legendFormat": leg, "datasource": DS}
                    for j, (e, leg) in enumerate(targets)],
    }


TEMPLATING = {"list": [
    {"name": "ds", "label": "Data source", "type": "datasource", "query": "prometheus", "current": {},
     "hide": 0},
    {"name": "node", "label": "Node", "type": "query", "datasource": DS,
     "query": "label_values(lazystandby_epoch, node)", "definition": "label_values(lazystandby_epoch, node)",
     "refresh": 2, "multi": True, "includeAll": True, "allValue": ".*",
     "current": {"text": "All", "value": "$__all"}, "hide": 0},
    {"name": "stage", "label": "Pipeline stage", "type": "query", "datasource": DS,
     "query": "label_values(lazystandby_epoch, pipeline_stage)",
     "definition": "label_values(lazystandby_epoch, pipeline_stage)",
     "refresh": 2, "multi": True, "includeAll": True, "allValue": ".*",
     "current": {"text": "All", "value": "$__all"}, "hide": 0},
]}
# A mark on every panel at the moment the last takeover went live (the series' value is that time).
ANNOTATIONS = {"list": [
    {"name": "Failovers", "enable": True, "iconColor": "red", "datasource": DS,
     "expr": "max(lazystandby_last_failover_time_seconds) * 1000 > 0", "useValueForTime": True, "step": "5s",
     "titleFormat": "failover",
     "textFormat": "the epoch changed: a standby took over"},
]}


def build(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for uid, (title, panels) in DASHBOARDS.items():
        d = {"uid": f"lazystandby-{uid}", "title": title, "schemaVersion": 39, "version": 1, "editable": True,
             "refresh": "5s", "time": {"from": "now-15m", "to": "now"}, "tags": ["lazystandby"],
             "templating": TEMPLATING, "annotations": ANNOTATIONS,
             "panels": [panel(i, *p) for i, p in enumerate(panels)]}
        p = out / f"{uid}.json"
        p.write_text(json.dumps(d, indent=2) + "\n")
        paths.append(p)
    return paths


if __name__ == "__main__":
    for p in build(Path(__file__).resolve().parent / "dashboards"):
        print(p)
