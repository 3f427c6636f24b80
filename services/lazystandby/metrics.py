"""Every metric a node exports, declared here, read from the node's snapshot at scrape time.

A collector rather than counters bumped in the hot paths: the protocol code keeps plain counters (one dict
increment) and Prometheus sees them only when it asks. Labels: `node` (Nu, N, N', Nd) and `role`; a node
of a pipeline of several stages (setting `stage`) adds `pipeline_stage` to every series, so that each
stage's nodes, whose names are the same in every stage, stay apart in one Prometheus.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from .core.errors import PrimaryAlive, PrimaryHeard
from .core.roles import Role

ROLES = tuple(r.value for r in Role if r not in (Role.STARTING, Role.STOPPED))  # what a serving node can be

# counter name in the snapshot -> (metric, extra labels)
TUPLES = {
    "source_tuples": "source", "input_tuples": "input", "backup_tuples": "backup", "processed_tuples": "processed",
    "output_tuples": "output", "delivered_tuples": "delivered", "skipped_tuples": "skipped",
    "backup_decoded_tuples": "backup_decoded",
}
LINK_BYTES = {
    "primary_bytes": "primary", "backup_bytes": "backup", "backup_raw_bytes": "backup_raw",
    "backup_payload_bytes": "backup_compressed", "output_bytes": "output",
    "snapshot_bytes": "snapshot",  # a Passive Standby primary's snapshots to its standby
}
# Refusal reasons (error counters) exported by reason. Those from misbehaving clients (malformed messages,
# unknown epochs, forbidden or unauthenticated calls, a sender that is not the primary) are apart from the
# pipeline's own (gaps, duplicates), which the correctness alerts use.
REFUSALS = ("unknown_stream", "sequence_gap", "duplicate_sequence", "non_monotonic_sequence", "stale_epoch",
            "wrong_role", "corrupt_batch", "oversized", "queue_full", "malformed_message", "unknown_epoch",
            "permission_denied", "unauthenticated", "not_the_primary", "source_unavailable")
QUEUES = {
    "oqu_depth": "oqu", "oqu_unbatched": "oqu_unbatched", "oqu_batched": "oqu_batched", "iq_depth": "iq",
    "oq_depth": "oq",
}


class NodeCollector(Collector):
    """Turns one node's snapshot into Prometheus metric families."""

    def __init__(self, node) -> None:
        self.node = node

    def collect(self) -> Iterator:
        """Every metric of the node, from one snapshot (NodeBase.status_snapshot: under its lock when that
        comes within a quarter second); the families in the order below."""
        s = self.node.status_snapshot()
        stage = getattr(self.node.cfg, "stage", 0)
        for part in (self._flow, self._role, self._operator, self._lease, self._standby, self._failovers,
                     self._source, self._histograms, self._refusals, self._links):
            for family in part(s):
                yield _in_stage(family, stage) if stage else family

    def _flow(self, s: dict) -> Iterator:
        """Tuples, bytes and queue depths along the data path; the source's lag (Nu)."""
        name, c = s["node"], s.get("counters", {})
        lbl = ["node"]
        t = CounterMetricFamily("lazystandby_tuples", "Tuples through a node, by stage", labels=[*lbl, "stage"])
        for key, stage in TUPLES.items():
            t.add_metric([name, stage], c.get(key, 0))
        yield t
        b = CounterMetricFamily("lazystandby_link_bytes", "Bytes sent on a link (protobuf message sizes)",
                                labels=[*lbl, "link"])
        for key, link in LINK_BYTES.items():
            b.add_metric([name, link], c.get(key, 0))
        yield b
        q = GaugeMetricFamily("lazystandby_queue_depth", "Tuples held in a queue", labels=[*lbl, "queue"])
        for key, queue in QUEUES.items():
            q.add_metric([name, queue], s.get(key, 0))
        yield q
        lag = GaugeMetricFamily("lazystandby_source_lag", "Source records not yet consumed (Nu)",
                                labels=[*lbl, "stream"])
        for stream in getattr(self.node.cfg, "stream_names", []):
            lag.add_metric([name, stream], s.get("source_lag", {}).get(stream, 0))
        yield lag
    def _role(self, s: dict) -> Iterator:
        """The role and epoch, and what the backup costs on the wire."""
        name = s["node"]
        lbl = ["node"]
        r = GaugeMetricFamily("lazystandby_role", "1 for the node's current role", labels=[*lbl, "role"])
        for role in ROLES:
            r.add_metric([name, role], 1.0 if s.get("role") == role else 0.0)
        yield r
        yield _gauge("lazystandby_epoch", "Epoch the node is in", name, s["epoch"])
        yield _gauge("lazystandby_bandwidth_overhead", "Backup bytes / primary bytes (seed 000 2.3.1)", name,
                     s.get("overhead", 0.0))
        yield _gauge("lazystandby_overhead_budget", "The configured bandwidth-overhead budget", name,
                     self.node.cfg.overhead_budget)
        yield _gauge("lazystandby_compression_ratio", "Compressed / raw backup bytes", name,
                     s.get("compression_ratio", 1.0))
    def _operator(self, s: dict) -> Iterator:
        """The operator's oldest call and stall (N, N')."""
        name = s["node"]
        if "operator_oldest_call_s" in s:
            yield _gauge("lazystandby_operator_oldest_call_seconds",
                         "How long the oldest operator call not yet answered has waited (0: none)", name,
                         s["operator_oldest_call_s"])
            yield _gauge("lazystandby_operator_stalled", "1 while this primary's operator has left a call unanswered "
                         "past operator_stall_max (its standby takes over)", name, float(s["operator_stalled"]))
            yield _counter("lazystandby_quarantined", "Inputs the operator failed on alone, left without output and "
                           "sent to the dead letters (the same positions on N and N')", name,
                           s.get("counters", {}).get("quarantined_tuples", 0))
        if "state_keys" in s:
            yield _gauge("lazystandby_state_keys", "Groups of operator state held: a window query's open (window, "
                         "key) groups as of the last watermark record (0 for a selection)", name, s["state_keys"])
            yield _gauge("lazystandby_state_bytes", "Bytes of operator state held (0 for a selection)", name,
                         s["state_bytes"])
            yield _gauge("lazystandby_state_lag_tuples", "Inputs a stateful node holds and has not applied to its "
                         "state yet (a standby's work left at a takeover; 0 for a selection)", name,
                         s["state_lag_tuples"])
    def _lease(self, s: dict) -> Iterator:
        """The primary's lease at Nd, its silences and the takeovers declined (Nd)."""
        name, e = s["node"], s.get("errors", {})
        lbl = ["node"]
        if "primary_longest_silence_ms" in s:  # Nd
            yield _gauge("lazystandby_primary_longest_silence_seconds", "The longest the primary in force was "
                         "silent at Nd (from a frame's answer to its next frame); past the lease, a standby that "
                         "cannot hear it may depose a working primary", name, s["primary_longest_silence_ms"] / 1000)
            yield _gauge("lazystandby_takeover_lease_seconds", "How long each delivery keeps another node's "
                         "takeover declined at Nd (takeover_lease)", name, s["takeover_lease_ms"] / 1000)
            d = CounterMetricFamily("lazystandby_takeovers_declined", "Takeovers Nd declined because the primary "
                                    "in force lives: within its lease, or past it but heard after the standby "
                                    "lost it (unheard); a standby cut off from a working primary",
                                    labels=[*lbl, "reason"])
            for reason, declined in (("lease", PrimaryAlive), ("unheard", PrimaryHeard)):
                d.add_metric([name, reason], e.get(declined.counter, 0))
            yield d
    def _standby(self, s: dict) -> Iterator:
        """The standby's health: heartbeats, sync with Nu, lag, backup it could not read."""
        name, c = s["node"], s.get("counters", {})
        yield _gauge("lazystandby_heartbeat_rtt_seconds", "Last heartbeat round trip", name,
                     s.get("heartbeat_rtt_ms", 0.0) / 1000)
        if "standby_in_sync" in s:  # Nu
            yield _gauge("lazystandby_standby_in_sync", "1 while Nu's standby answers its backup calls within "
                         "backup_stall_max; 0 when out of sync (Nu no longer waits for it) or when it has none",
                         name, 1.0 if s["standby_in_sync"] else 0.0)
            yield _counter("lazystandby_standby_out_of_sync", "Times Nu's standby fell out of sync", name,
                           c.get("standby_out_of_sync", 0))
            bsize = s.get("bsize", "inf")
            yield _gauge("lazystandby_bsize", "The Bsize in force at Nu (+Inf: Upstream Backup); with "
                         "recovery_target_ms, the one chosen for it", name,
                         float("inf") if bsize == "inf" else float(bsize))
            yield _counter("lazystandby_bsize_changes", "Times Nu changed Bsize for recovery_target_ms", name,
                           c.get("bsize_changes", 0))
            target = s.get("recovery_target") or {}
            yield _gauge("lazystandby_recovery_target_met", "1 while Nu's chosen Bsize is predicted to meet "
                         "recovery_target_ms, 0 when no Bsize is (Bsize 1 then); NaN without a target or a "
                         "prediction", name, float("nan") if target.get("met") is None else float(target["met"]))
        if "standby_lag_tuples" in s:  # N and N': 0 on a primary
            yield _gauge("lazystandby_standby_lag_tuples", "Inputs the primary holds that the standby has neither "
                         "processed nor seen covered by Nd's output", name, s["standby_lag_tuples"])
            yield _gauge("lazystandby_standby_lag_seconds", "How long the oldest of them has waited at the standby",
                         name, s["standby_lag_seconds"])
        yield _counter("lazystandby_heartbeat_misses", "Heartbeats that went unanswered", name,
                       c.get("heartbeat_misses", 0))
        yield _counter("lazystandby_backup_unreadable", "Sealed backup runs a standby could not decode when it "
                       "needed them (forgotten, and sent again by Nu)", name, c.get("backup_unreadable", 0))
    def _failovers(self, s: dict) -> Iterator:
        """Takeovers and handovers, the last failover's phases, and what Precise keeps at 0."""
        name, c, e = s["node"], s.get("counters", {}), s.get("errors", {})
        lbl = ["node"]
        yield _counter("lazystandby_failovers", "Takeovers this node took part in", name, c.get("takeovers", 0))
        yield _counter("lazystandby_handovers", "Handovers this node began as the primary when asked to stop (its "
                       "standby took over at its word, not on missed heartbeats)", name, c.get("handovers", 0))
        rec = s.get("recovery") or {}
        yield _gauge("lazystandby_last_failover_time_seconds", "Unix time the last takeover this node made went live "
                     "(0: none); the dashboards' failover annotation", name, rec.get("live_at", 0.0))
        ph = GaugeMetricFamily("lazystandby_last_recovery_seconds", "Phases of the last failover",
                               labels=[*lbl, "phase"])
        for phase in ("detection", "reconnection", "data_recovery"):
            ph.add_metric([name, phase], rec.get(f"{phase}_ms", 0.0) / 1000)
        yield ph
        pred = s.get("predicted_recovery")
        if "predicted_recovery" in s:  # N and N'
            yield _gauge("lazystandby_recovery_target_seconds", "The configured recovery-time objective "
                         "(recovery_target_ms; 0: none)", name, self.node.cfg.recovery_target_ms / 1000)
            yield _gauge("lazystandby_predicted_recovery_seconds", "Predicted failover if the primary crashed now "
                         "(core.recovery_model): the standby's own, the primary's from its standby; NaN when "
                         "neither knows", name, pred["seconds"] if pred else float("nan"))
            terms = GaugeMetricFamily("lazystandby_predicted_recovery_term_seconds", "The standby's predicted "
                                      "recovery by term: detection, reconnection, resend (Nu's link), replay "
                                      "(the operator's rate), restore", labels=[*lbl, "term"])
            if pred and "detection_s" in pred:
                for term in ("detection", "reconnection", "resend", "replay", "restore"):
                    terms.add_metric([name, term], pred[f"{term}_s"])
            yield terms
        yield _counter("lazystandby_replayed_from_oq", "Outputs a promoted standby sent from OQ'", name,
                       c.get("replayed_from_oq", 0))
        yield _counter("lazystandby_resent_by_upstream", "Tuples Nu resent to a new primary", name,
                       c.get("resent_tuples", 0))
        yield _counter("lazystandby_duplicates_dropped", "Outputs Nd already held (Precise keeps this 0)", name,
                       c.get("duplicates_dropped", 0))
        yield _counter("lazystandby_gaps", "Deliveries refused for skipping ahead (must stay 0)", name,
                       e.get("sequence_gap", 0))
    def _source(self, s: dict) -> Iterator:
        """What Nu's source refused, lost or waited for (Nu)."""
        name, c = s["node"], s.get("counters", {})
        lbl = ["node"]
        yield _counter("lazystandby_dead_letters", "Source records refused to the dead letters", name,
                       c.get("dead_letters", 0))
        yield _counter("lazystandby_dead_letters_unwritten", "Dead letters the broker refused or did not "
                       "acknowledge in time (counted, never ending Nu's loop)", name,
                       c.get("dead_letters_unwritten", 0))
        yield _counter("lazystandby_dead_letters_truncated", "Dead letters cut to fit the dead-letter topic's "
                       "record size limit", name, c.get("dead_letters_truncated", 0))
        yield _counter("lazystandby_source_gaps", "Source records deleted before Nu read them (admission stops)",
                       name, c.get("source_gaps", 0))
        waits = CounterMetricFamily("lazystandby_source_waits", "Times Nu's source waited (up to 50 ms each): OQu "
                                    "full, the standby backup_lag_max behind, its backlog past "
                                    "standby_replay_max_ms, the primary primary_lag_max behind, or a fresh Nu's "
                                    "standby not registered yet (standby_wait)", labels=[*lbl, "reason"])
        for reason, key in (("oqu_full", "source_blocked"), ("backup", "source_waited_for_backup"),
                            ("replay", "source_waited_for_replay"), ("primary", "source_waited_for_primary"),
                            ("standby", "source_waited_for_standby")):
            waits.add_metric([name, reason], c.get(key, 0))
        yield waits
    def _histograms(self, s: dict) -> Iterator:
        """Latency histograms: commit (Nu), operator calls and failover phases (N, N')."""
        name = s["node"]
        lbl = ["node"]
        outbound = getattr(self.node, "outbound", None)  # Nu (node/outbound.py)
        e2e = outbound.e2e_seconds if outbound is not None else None
        if e2e is not None:
            h = HistogramMetricFamily("lazystandby_e2e_commit_seconds",
                                      "From entering Nu's OQu to the Level-1 ack that covers it (outputs in Nd)",
                                      labels=lbl)
            h.add_metric([name], e2e.cumulative(), e2e.sum)
            yield h
        calls = getattr(self.node, "calls", None)  # N and N' (node/operator_calls.py)
        if calls is not None:
            batches = calls.seconds
            op = s.get("operator", "")
            h = HistogramMetricFamily("lazystandby_operator_batch_seconds",
                                      "Time the operator took per batch (a Spark micro-batch for the Spark operator)",
                                      labels=[*lbl, "operator"])
            h.add_metric([name, op], batches.cumulative(), batches.sum)
            yield h
            rh = HistogramMetricFamily("lazystandby_recovery_seconds", "Failover phases, one observation per takeover",
                                       labels=[*lbl, "phase"])
            for phase, b in self.node.takeover.recovery_seconds.items():
                rh.add_metric([name, phase], b.cumulative(), b.sum)
            yield rh
    def _refusals(self, s: dict) -> Iterator:
        """Requests this node refused, by reason."""
        name, e = s["node"], s.get("errors", {})
        lbl = ["node"]
        err = CounterMetricFamily("lazystandby_rpc_errors", "Requests refused, by reason", labels=[*lbl, "reason"])
        for reason in REFUSALS:
            err.add_metric([name, reason], e.get(reason, 0))
        yield err
    def _links(self, s: dict) -> Iterator:
        """Which peers this node believes alive, and its failed calls to each by status (loud stalls)."""
        name, peers = s["node"], dict(s.get("peers", {}))
        up = GaugeMetricFamily("lazystandby_peer_up", "1 if the node believes the peer alive (its last call was "
                               "answered), 0 if not or if it has none in that place", labels=["node", "peer"])
        if s.get("role") == "upstream" and not s.get("standby"):
            peers["standby"] = {"alive": False, "failures": {}}  # no standby at all: the next failure is fatal
        for peer, link in sorted(peers.items()):
            up.add_metric([name, peer], 1.0 if link["alive"] else 0.0)
        yield up
        fails = CounterMetricFamily("lazystandby_link_failures", "Calls to a peer that got no answer, by status",
                                    labels=["node", "peer", "status"])
        for peer, link in sorted(peers.items()):
            # UNAVAILABLE always, at 0 until it happens: a counter that appears only on its first failure
            # cannot be rated across that failure.
            for status, n in sorted({"UNAVAILABLE": 0, **link["failures"]}.items()):
                fails.add_metric([name, peer, status], n)
        yield fails


def _in_stage(family, stage: int):
    """`family` with every series labelled by the pipeline stage its node runs."""
    family.samples = [x._replace(labels={**x.labels, "pipeline_stage": str(stage)}) for x in family.samples]
    return family


def _gauge(metric: str, doc: str, node: str, value: float) -> GaugeMetricFamily:
    g = GaugeMetricFamily(metric, doc, labels=["node"])
    g.add_metric([node], value)
    return g


def _counter(metric: str, doc: str, node: str, value: float) -> CounterMetricFamily:
    g = CounterMetricFamily(metric, doc, labels=["node"])
    g.add_metric([node], value)
    return g


def registry_for(node) -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(NodeCollector(node))
    ProcessCollector(registry=reg)  # process_resident_memory_bytes, process_cpu_seconds_total
    return reg


def serve_metrics(node, port: int, addr: str = "0.0.0.0"):  # noqa: S104 - scraped by Prometheus in compose
    """Serve /metrics for `node` over HTTP on `port`."""
    return start_http_server(port, addr=addr, registry=registry_for(node))
