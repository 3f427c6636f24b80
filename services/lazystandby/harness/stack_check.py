"""`python -m lazystandby.cli stack-check --bootstrap kafka:9092`: the truth-table check of a running
stack, from inside its network. Compares the results topic with the expected output rebuilt from the
source topics (a pipeline's, LS_PIPELINE, by DuckDB; the tick example's otherwise), and reads the new
primary's recovery figures. Prints one JSON line."""

from __future__ import annotations

import argparse

from .. import config
from ..sinks.kafka_sink import read_results
from ..transport.grpc_transport import GrpcPeer
from ..transport.tls import TlsFiles
from . import results
from .check import compare, compare_results, kafka_expected, kafka_window_expected, nu_read_all


def _status(addr: str) -> dict:
    peer = GrpcPeer(addr, tls=TlsFiles.from_config(config.load([])))  # this container's own certificate
    try:
        return peer.status(3.0).snapshot
    except Exception as e:  # a node that is down is part of the picture
        return {"error": str(e)[:200]}
    finally:
        peer.close()


def _nu_read_all(a) -> bool:
    """Whether Nu (named in --status, else nu:50051) has read every source record, and its link log
    caught up with that poll."""
    import time

    nu = next((addr for name, addr in (i.split("=", 1) for i in filter(None, a.status.split(",")))
               if name == "Nu"), "nu:50051")
    admitted = nu_read_all(_status(nu))
    time.sleep(0.5)  # the poll the lag was measured after reaches the link log within milliseconds
    return admitted


def _window_check(a, query) -> dict:
    """A window query's check: the results against the truth table rebuilt from Nu's link log, once Nu says
    it has read every source record (`admitted_all`; until then the truth table is short)."""
    admitted = _nu_read_all(a)
    cfg = config.load([])
    expected, late, malformed = kafka_window_expected(a.bootstrap, ["I1", "I2"], query, every=cfg.watermark_every,
                                                      idle=cfg.watermark_idle,
                                                      per_stream=cfg.watermark_per_stream, prefix=a.prefix,
                                                      max_tuple_bytes=cfg.max_tuple_bytes)
    rows = read_results(a.bootstrap, f"{a.prefix}results")
    r = compare_results(expected, [(o, p) for o, _, _, p in rows], aggregates=len(query.aggregates))
    return {k: r[k] for k in ("expected", "got", "lost", "duplicated", "unexpected", "out_of_order", "wrong")} | {
        "late": len(late), "admitted_all": admitted, "malformed": len(malformed), "diff": []}


def _pipeline_check(a, cfg) -> dict:
    """A pipeline's check (LS_PIPELINE): the results topic against DuckDB's truth over the source topics
    (harness/pipeline_check.py), for a window query once Nu says it has read every source record."""
    from ..sources.kafka_source import Topics
    from . import pipeline_check

    spec = cfg.pipeline_spec
    admitted = _nu_read_all(a) if spec.plan.stateful else True
    topics = Topics.of_pipeline(a.prefix, spec)
    truth = pipeline_check.expected(a.bootstrap, spec, topics, every=cfg.watermark_every, idle=cfg.watermark_idle,
                                    per_stream=cfg.watermark_per_stream, max_tuple_bytes=cfg.max_tuple_bytes)
    rows = read_results(a.bootstrap, topics.results)
    r = pipeline_check.compare(spec, truth, rows)
    return {k: r[k] for k in ("expected", "got", "lost", "duplicated", "unexpected", "wrong")} | {
        "out_of_order": 0 if r.get("same_order", True) else 1, "late": len(truth["late"]),
        "admitted_all": admitted, "malformed": len(truth["malformed"]), "diff": []}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="lazystandby stack-check")
    ap.add_argument("--bootstrap", default="kafka:9092")
    ap.add_argument("--prefix", default="ls.")
    ap.add_argument("--predicate", default="price > 100")
    ap.add_argument("--status", default="", help="comma-separated name=host:port of nodes to read status from")
    ap.add_argument("--status-only", action="store_true", help="only the nodes' status, no truth-table check")
    a = ap.parse_args(argv)
    out: dict = {"nodes": {}}
    cfg = config.load([])  # the stack's settings (LS_PIPELINE, LS_QUERY), as its nodes read them
    query = cfg.parsed_query
    if not a.status_only and cfg.pipeline_spec is not None:
        out.update(_pipeline_check(a, cfg))
    elif not a.status_only and query.stateful:
        out.update(_window_check(a, query))
    elif not a.status_only:
        expected, malformed = kafka_expected(a.bootstrap, ["I1", "I2"], a.predicate, prefix=a.prefix)
        rows = read_results(a.bootstrap, f"{a.prefix}results")
        res = compare(expected, [(o, s, q) for o, s, q, _ in rows], per_stream_only=True)
        out.update({"expected": res.expected, "got": res.got, "lost": res.lost, "duplicated": res.duplicated,
                    "unexpected": res.unexpected, "out_of_order": res.out_of_order, "malformed": len(malformed),
                    "diff": res.diff[:3]})
    for item in filter(None, a.status.split(",")):
        name, addr = item.split("=", 1)
        out["nodes"][name] = _status(addr)
    print(results.dumps("stack-check", out))
    return 0
