"""`lazystandby explain FILE`: what a pipeline file runs, stage by stage, without running it.

For each stage: the table it reads (a source's topic, or the view an earlier stage writes), its columns
and event time; what it computes (a selection, or windows with their keys, aggregates, HAVING and
QUALIFY); what it writes (the view's columns and event time, or the sink) and a window result's record
key; and the topics its nodes use, under the deployment's prefix. What Flink's EXPLAIN and Kafka Streams'
`Topology#describe()` give their users: a way to check a file, and read how it was understood, before a
broker or a node is started. The file is read by the same planner the nodes use (formats/pipeline.py),
so a file explain accepts is one the nodes accept, and one it refuses gets the nodes' error.

Printed as text, and as the JSON of the same description on the last line.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from sqlglot import exp

from .config import NodeConfig
from .core.errors import PipelineError, SchemaError, UnsupportedSql
from .formats.pipeline import Pipeline, read_stages
from .formats.schema import Schema
from .formats.sql import Aggregate, Dialect, Order, Plan
from .sources.kafka_source import Topics


def _sql(e: exp.Expression, aggregates: tuple[Aggregate, ...] = ()) -> str:
    """An expression of the plan as SQL, each `_agg<i>` it names written as the aggregate it stands for."""
    def named(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and re.fullmatch(r"_agg\d+", node.name):
            return exp.Var(this=_aggregate(aggregates[int(node.name[4:])]))
        return node

    return e.copy().transform(named).sql(dialect=Dialect)


def _aggregate(a: Aggregate) -> str:
    return f"{a.fn}({'*' if a.arg is None else _sql(a.arg)})"


def _table(t: Schema) -> dict:
    return {"table": t.table, "format": t.format, "columns": [f"{c.name} {c.type.text()}" for c in t.columns],
            "event_time": t.event_time or None,
            "watermark_delay_ms": t.watermark_delay_ms if t.event_time else None}


def _computes(p: Plan) -> dict:
    where = _sql(p.where) if p.where is not None else None
    if p.spec is None:
        return {"kind": "selection", "where": where}
    top = p.top
    return {"kind": "window", "where": where, "time": p.time,
            "size_ms": p.spec.size_ms, "slide_ms": p.spec.slide_ms, "lateness_ms": p.spec.lateness_ms,
            "keys": [_sql(k.expr) for k in p.keys],
            "aggregates": [_aggregate(a) for a in p.aggregates],
            "having": _sql(p.having, p.aggregates) if p.having is not None else None,
            "top": None if top is None else {
                "fn": top.fn, "partition": ["window", *top.partition], "limit": top.limit,
                "order": [_order(o, p.aggregates) for o in top.order]}}


def _order(o: Order, aggregates: tuple[Aggregate, ...]) -> str:
    return f"{_sql(o.expr, aggregates)} {'DESC' if o.desc else 'ASC'} NULLS {'FIRST' if o.nulls_first else 'LAST'}"


def describe_stage(s: Pipeline, topic_prefix: str) -> dict:
    """One stage as the nodes that run it understand it (NodeConfig.stage = s.stage)."""
    topics = Topics.of_pipeline(topic_prefix, s)
    reads = s.sources[0]
    writes = {"name": s.sink_name or None, "view": s.sink_name in s.views, "topic": topics.results,
              "columns": [f"{o.name} {o.type.text()}" for o in s.plan.outputs],
              "record_key": s.plan.key_names or None}
    return {"stage": s.stage, "query": s.plan.text,
            "reads": {**_table(reads), "view": reads.table in s.views, "topic": topics.source(reads.table)},
            "computes": _computes(s.plan), "writes": writes,
            "engine_topics": {"control": topics.control, "link_log": topics.linklog,
                              "dead_letters": topics.deadletters, "late": topics.late if s.plan.stateful else None}}


def describe(path: str, topic_prefix: str = NodeConfig.topic_prefix) -> dict:
    """The whole file: its stages in order and the settings it sets (raises what read_stages raises)."""
    stages = read_stages(path)
    described = [describe_stage(s, topic_prefix) for s in stages]
    for d in described:  # a view feeds one later stage or more (a DAG): which ones
        w = d["writes"]
        w["read_by"] = [e["stage"] for e in described if w["view"] and e["reads"]["table"] == w["name"]] or None
    return {"file": path, "stages": described, "settings": dict(stages[0].settings), "topic_prefix": topic_prefix}


def _ms(v: int) -> str:
    return f"{v:,} ms"


def render(d: dict) -> str:
    """The description as a reader takes it in: a block per stage."""
    n = len(d["stages"])
    lines = [f"{d['file']}: {n} stage{'s' if n > 1 else ''}, each with its own primary and standby"]
    if d["settings"]:
        lines.append("settings: " + ", ".join(f"{k} = {v}" for k, v in d["settings"].items()))
    for st in d["stages"]:
        r, c, w = st["reads"], st["computes"], st["writes"]
        lines += ["", f"stage {st['stage']}:"]
        what = f"view {r['table']}" if r["view"] else f"table {r['table']}"
        lines.append(f"  reads     {what} from topic {r['topic']} ({r['format']}): {', '.join(r['columns'])}")
        if r["event_time"]:
            lines.append(f"            event time {r['event_time']}, watermark {_ms(r['watermark_delay_ms'])} behind")
        if c["where"]:
            lines.append(f"  where     {c['where']}")
        if c["kind"] == "window":
            shape = (f"tumbling {_ms(c['size_ms'])}" if c["size_ms"] == c["slide_ms"]
                     else f"{_ms(c['size_ms'])} sliding by {_ms(c['slide_ms'])}")
            lines.append(f"  windows   {shape} on {c['time']}, closed {_ms(c['lateness_ms'])} after their end")
            lines.append(f"  group by  window{''.join(', ' + k for k in c['keys'])}: {', '.join(c['aggregates'])}")
            if c["having"]:
                lines.append(f"  having    {c['having']}")
            if c["top"]:
                t = c["top"]
                lines.append(f"  qualify   {t['fn']}() over ({', '.join(t['partition'])}) by {', '.join(t['order'])} "
                             f"<= {t['limit']}")
        else:
            lines.append("  selection each record on its own (no state)")
        into = f"view {w['name']}" if w["view"] else (f"sink {w['name']}" if w["name"] else "the results")
        lines.append(f"  writes    {into} to topic {w['topic']} (json): {', '.join(w['columns'])}")
        if w["record_key"]:
            lines.append(f"            record key: {', '.join(w['record_key'])}")
        if w["read_by"]:
            lines.append(f"            read by stage{'s' if len(w['read_by']) > 1 else ''} "
                         f"{', '.join(map(str, w['read_by']))}")
        e = st["engine_topics"]
        lines.append("  engine    " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in e.items() if v))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="lazystandby explain", description=__doc__.split("\n\n")[0])
    ap.add_argument("file", help="a pipeline file (examples/*.sql)")
    ap.add_argument("--topic-prefix", default=NodeConfig.topic_prefix,
                    help="the deployment's topic prefix (LS_TOPIC_PREFIX), under which views and engine topics lie")
    a = ap.parse_args(argv)
    try:
        d = describe(a.file, a.topic_prefix)
    except (PipelineError, SchemaError, UnsupportedSql, OSError) as e:
        print(f"lazystandby explain: {e}", file=sys.stderr)
        return 2
    print(render(d))
    print(json.dumps(d))
    return 0
