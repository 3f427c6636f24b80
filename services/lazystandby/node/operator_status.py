"""What an operator node (N or N') says of itself: the status `lazystandby status`, the harness and the
Prometheus collector (metrics.py) read. It reads the node's parts and changes none of them, so that what
a node reports is listed in one place, apart from what it does."""

from __future__ import annotations

import time

from ..core.roles import Role


def operator_status(n, s: dict) -> dict:
    """Node `n`'s status: `s` (NodeBase's counters and gauges) with the operator node's own added."""
    lag_tuples, lag_seconds = n.standby_side.standby_lag()
    det = n.standby_side.detector  # None until this node watches a primary
    oldest = n.calls.oldest()
    s["counters"]["backup_decoded_tuples"] = n.held.decoded_tuples
    s.update({
        "sealed_runs": len(n.held),
        "standby_lag_tuples": lag_tuples,
        "standby_lag_seconds": round(lag_seconds, 3),
        "cover_latency_s": round(n.inbound.cover_latency, 3) if n.inbound.cover_latency is not None else None,
        "received_through": n.inbound.received_through,
        "processed": [n.processed.input_pos, n.processed.output_count],
        "processed_at": n.processed_at,
        "first_processed_at": n.first_processed_at,
        "cpu_seconds": round(time.process_time(), 3),
        "cpu_seconds_at_first_input": (round(n.cpu_at_first_input, 3) if n.cpu_at_first_input is not None
                                       else None),
        "level0": n.level0,
        "level1": [n.level1.current.input_pos, n.level1.current.output_count],
        "iq_depth": len(n.inbound.iq),
        "oq_depth": len(n.oq),
        "oq_first": n.oq.first,
        "oq_last": n.oq.last,
        "operator": n.operator.name,
        "stateful": n.stateful,
        "state_keys": n.operator.live_keys(),
        "state_bytes": n.operator.state_bytes(),
        # Inputs held and not yet applied to the state (a stateful standby's work left at a takeover).
        "state_lag_tuples": max(0, n.inbound.received_through - n.processed.input_pos) if n.stateful else 0,
        "operator_switches": getattr(n.operator, "switches", []),
        "quarantined": list(n.quarantine.listed),
        "recovery": n.takeover.recovery,
        "predicted_recovery": _predicted(n),
        "snapshot": n.snapshots.status(),
        "recovery_target": n.standby_side.forecast.target_status(),
        "heartbeat_rtt_ms": det.last_rtt * 1000 if det else 0.0,
        "heartbeat_misses_total": det.total_misses if det else 0,
        "heartbeat_stalls": det.stalls if det else 0,
        "primary_heard": det.heard if det else None,
        "operator_oldest_call_s": 0.0 if oldest is None else round(n.clock() - oldest, 3),
        "operator_stalled": n.calls.watch.stalled,
        "operator_failed": n.calls.watch.failed,
        "operator_slowest_call_s": round(n.calls.slowest_s, 3),
    })
    return s



def _predicted(n) -> dict | None:
    """The predicted recovery: a standby's own terms (its latest heartbeat's); a primary's, its standby's
    figure while that standby's heartbeats come (None otherwise, and for other roles)."""
    if n.state.role is Role.STANDBY:
        p = n.standby_side.forecast.predicted
        return p.as_dict() if p is not None else None
    return n.primary_side.standbys_prediction() if n.state.role is Role.PRIMARY else None
