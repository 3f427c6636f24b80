"""The check of a pipeline run through Kafka: the truth rebuilt from the source topics and Nu's link log
by DuckDB (harness/truth.py), and Nd's results topic compared with it, result for result.

- A selection's results are named by the input each came from (the results topic's key, stream:seq):
  `lost` when an expected one is missing, `duplicated` when one is held more than once, `wrong` when its
  values differ, `unexpected` when no output of that input is expected.
- A window aggregation's results are named by their group (window and keys), the same way.
- The records the tables' formats refuse are the dead letters Nu must have written (`malformed`); a
  window query's valid records missing from the link log are the late ones Nu must have dropped.
"""

from __future__ import annotations

from collections import Counter

from ..core.seq import partition_streams
from ..formats.admit import TableRules
from ..formats.pipeline import Pipeline
from ..sinks.kafka_sink import group_key
from .check import link_order
from .truth import same_values, selection_truth, values_of, window_truth


def source_records(bootstrap: str, spec: Pipeline, topics, *, max_tuple_bytes: int, partitions: int = 1):
    """Every source record by (stream, seq), and the (stream, seq) of those the tables' formats refuse."""
    import numpy as np
    import pyarrow as pa

    from ..sources.kafka_source import read_partition

    rules = TableRules({t.table: t for t in spec.sources})
    valid: dict[tuple[str, int], bytes] = {}
    malformed: list[tuple[str, int]] = []
    for t in spec.sources:
        for part, stream in enumerate(partition_streams([t.table], partitions)):
            recs = read_partition(bootstrap, topics.source(t.table), partition=part)
            values = [r.value for r in recs]
            bad = rules.refusals([stream], np.zeros(len(values), np.int64), pa.array(values, pa.binary()),
                                 max_bytes=max_tuple_bytes) or {}
            for i, r in enumerate(recs):
                key = (stream, r.offset + 1)
                if i in bad or r.value is None:
                    malformed.append(key)
                else:
                    valid[key] = r.value
    return valid, malformed


def expected(bootstrap: str, spec: Pipeline, topics, *, every: int, idle: int = 0, per_stream: bool = True,
             max_tuple_bytes: int = 65536, partitions: int = 1) -> dict:
    """The truth: `results` ((stream, seq, payload) per selected input, or window results in emission
    order), `late` ((stream, seq) Nu must have dropped) and `malformed` (its dead letters)."""
    valid, malformed = source_records(bootstrap, spec, topics, max_tuple_bytes=max_tuple_bytes,
                                      partitions=partitions)
    plan = spec.plan
    if not plan.stateful:
        keys = sorted(valid)  # per stream in seq order; a selection's output depends on its input alone
        per_input = selection_truth(plan, [valid[k] for k in keys])
        results = [(s, q, r) for (s, q), r in zip(keys, per_input, strict=True) if r is not None]
        return {"results": results, "late": [], "malformed": malformed}
    order = link_order(bootstrap, topics)
    streams = [s for s, _ in order]
    known = tuple(partition_streams([t.table for t in spec.sources], partitions))
    results, late = window_truth(plan, [valid[k] for k in order], every=every, idle=idle,
                                 streams=streams if per_stream else None, known=known)
    if late:
        raise ValueError(f"{len(late)} records in Nu's link log are late by the truth's rules")
    return {"results": results, "late": sorted(set(valid) - set(order)), "malformed": malformed}


def compare(spec: Pipeline, truth: dict, rows: list[tuple[int, str, int, bytes]]) -> dict:
    """Nd's results topic (`rows`: (oseq, stream, seq, payload)) against the truth."""
    plan = spec.plan
    if plan.stateful and not plan.names_groups:
        return _compare_in_order(truth["results"], [p for _, _, _, p in rows])
    if plan.stateful:
        names = plan.key_names
        want = {group_key(p, names): p for p in truth["results"]}
        got = [(group_key(p, names), p) for _, _, _, p in rows]
        order_ok = [k for k, _ in got] == list(want)  # results by group, in the truth's emission order
    else:
        want = {(s, q): p for s, q, p in truth["results"]}
        got = [((s, q), p) for _, s, q, p in rows]
        order_ok = True
    held = Counter(k for k, _ in got)
    first: dict = {}
    for k, p in got:
        first.setdefault(k, p)
    wrong = sum(1 for k, p in first.items() if k in want and not same_values(values_of(p), values_of(want[k])))
    out = {
        "expected": len(want),
        "got": len(got),
        "expected_output": len(want),
        "output_tuples": len(got),
        "lost": sum(1 for k in want if k not in held),
        "duplicated": sum(c - 1 for c in held.values() if c > 1),
        "wrong": wrong,
        "unexpected": sum(1 for k in held if k not in want),
        "same_order": order_ok,
    }
    out["ok"] = not (out["lost"] or out["duplicated"] or out["wrong"] or out["unexpected"])
    return out


def _compare_in_order(want: list[bytes], got: list[bytes]) -> dict:
    """Window results that do not name their group (no window or a key selected): told apart by their
    emission order alone, which N and N' share."""
    same = sum(1 for a, b in zip(want, got, strict=False) if same_values(values_of(a), values_of(b)))
    out = {"expected": len(want), "got": len(got), "expected_output": len(want), "output_tuples": len(got),
           "lost": max(0, len(want) - len(got)), "duplicated": max(0, len(got) - len(want)),
           "wrong": min(len(want), len(got)) - same, "unexpected": 0, "same_order": True}
    out["ok"] = not (out["lost"] or out["duplicated"] or out["wrong"])
    return out
