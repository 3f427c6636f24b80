"""A pipeline file: the tables a pipeline reads, its settings and its query, in one SQL text.

    CREATE TABLE bid (...) WITH ('topic' = 'bid', 'format' = 'json');   -- one or more sources
    CREATE TABLE out WITH ('topic' = 'q1-results');                     -- the sink (optional)
    SET bsize = 10;                                                     -- any node setting
    INSERT INTO out SELECT ... FROM bid ...;                            -- or the SELECT alone

A query that needs several steps declares each but the last as a view, read by the next:

    CREATE VIEW counts AS SELECT auction, window.end AS window_end, count(*) AS num FROM bid GROUP BY ...;
    INSERT INTO out SELECT window.end AS window_end, max(num) AS maxn FROM counts GROUP BY window(window_end, ...);

Each query is a stage: its own primary and standby, numbered in declaration order from 1. A view is a
table of its own for the stage that reads it: its columns are the query's results (JSON, in the topic
`<topic_prefix><view>`: a deployment's own, as its other internal topics), and its event time is the results' window end
(window start if only that is selected), which stage results come out in order of, so its watermark
delay is 0; a selection's view keeps its source's event-time column and delay when it selects that
column as it is. A view feeds one later stage or more (each reads the whole view, on its own nodes and
consumer group: a DAG rooted at the first stage, which alone reads the file's tables); a query that is
not a view writes a sink, each its own when there are several (a Flink statement set's INSERTs).

Statements are cut where sqlglot's tokenizer finds a `;` (so a `;` in a string literal stays in it);
each is read by its own reader: CREATE TABLE by formats/schema.py, the query by formats/sql.py, SET as
a setting's name and its text (config.py checks the value). A sink declared without columns names where
the results go; without one they go to the default results topic.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from ..core.errors import PipelineError, SchemaError, UnsupportedSql
from .schema import Column, Schema, parse_table
from .sql import Dialect, Plan, plan


@dataclass(frozen=True)
class Pipeline:
    """What a pipeline file declares: its source tables in declaration order (each a source stream of
    the link order), the query's plan, the sink's topic ("" = the default results topic) and the
    settings it sets, as text. Of a file of several stages, one stage (`stage` of `stages`): its tables
    are the file's and, if it reads one, the view before it; its sink is its view."""

    path: str
    tables: tuple[Schema, ...]
    plan: Plan
    sink_topic: str = ""
    settings: tuple[tuple[str, str], ...] = ()
    sink_name: str = ""
    stage: int = 1
    stages: int = 1
    views: tuple[str, ...] = ()  # which of its tables and sink are views: their topics lie under topic_prefix

    @property
    def stage_prefix(self) -> str:
        """Where this stage's own topics (control, link log, dead letters) lie under the deployment's
        prefix: each stage of a pipeline of several reads and commits on its own."""
        return f"stage{self.stage}." if self.stages > 1 else ""

    def text(self, topic_prefix: str = "") -> str:
        """The pipeline (this stage, of several) as a file of its own again, every topic it names under
        `topic_prefix` (a test's own topics)."""
        return ";\n".join([*self.declarations(topic_prefix), self.statement]) + ";\n"

    @property
    def statement(self) -> str:
        """The query as the file states it: INSERT INTO its sink, or a SELECT into the default results."""
        return f"INSERT INTO {self.sink_name} {self.plan.text}" if self.sink_name else self.plan.text

    def declarations(self, topic_prefix: str = "") -> list[str]:
        """Its tables, its sink and its settings, as statements, every topic under `topic_prefix`."""
        stmts = []
        for t in self.tables:
            opts = tuple((k, topic_prefix + v if k == "topic" else v) for k, v in t.options)
            if "topic" not in dict(opts):
                opts = (("topic", topic_prefix + t.topic), *opts)
            stmts.append(dataclasses.replace(t, options=opts, _by_name={}).ddl())
        if self.sink_name:
            stmts.append(f"CREATE TABLE {self.sink_name} WITH ('topic' = '{topic_prefix}{self.sink_topic}')")
        stmts.extend(f"SET {k} = '{v}'" for k, v in self.settings)
        return stmts

    @property
    def sources(self) -> tuple[Schema, ...]:
        """The tables the query reads (one today)."""
        return tuple(t for t in self.tables if t.table == self.plan.schema.table)


def statements(text: str) -> list[str]:
    """The statements of `text`, cut at each `;` outside literals and comments."""
    try:
        tokens = sqlglot.tokenize(text, read="risingwave")
    except sqlglot.errors.TokenError as e:
        raise PipelineError(f"the pipeline does not tokenize: {e}") from None
    out, first = [], None  # `first`: where the statement's first token starts (comments before it left out)
    for t in tokens:
        if t.token_type == TokenType.SEMICOLON:
            if first is not None:
                out.append(text[first:t.start].strip())
            first = None
        elif first is None:
            first = t.start
    if first is not None:
        out.append(text[first:].strip())
    return out


def read_pipeline(path: str | Path, stage: int = 0) -> Pipeline:
    """The pipeline a file declares (of several stages, stage `stage`, from 1); PipelineError (or
    UnsupportedSql) says what is wrong."""
    return choose(read_stages(path), stage, str(path))


def read_stages(path: str | Path) -> tuple[Pipeline, ...]:
    """Every stage a file declares, in order (one for a file with no view)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PipelineError(f"{path}: cannot read the pipeline file: {e}") from None
    return parse_stages(text, str(path))


def file_text(stages: tuple[Pipeline, ...], topic_prefix: str = "") -> str:
    """A pipeline of several stages (read_stages) as one file again, every topic its tables and its sinks
    name under `topic_prefix` (a test's own topics; its views' topics lie under the deployment's prefix
    already). Of one stage, Pipeline.text."""
    if len(stages) == 1:
        return stages[0].text(topic_prefix)
    # The first stage reads the file's own tables only; each query that is not a view names its sink.
    head = dataclasses.replace(stages[0], sink_name="", sink_topic="")
    sinks = [f"CREATE TABLE {s.sink_name} WITH ('topic' = '{topic_prefix}{s.sink_topic}')"
             for s in stages if s.sink_name and s.sink_name not in s.views]
    queries = [f"CREATE VIEW {s.sink_name} AS {s.plan.text}" if s.sink_name in s.views else s.statement
               for s in stages]
    return ";\n".join([*head.declarations(topic_prefix), *sinks, *queries]) + ";\n"


def query_text(stages: tuple[Pipeline, ...]) -> str:
    """The stages' queries in order, as a summary names them: `SELECT ...; SELECT ...`."""
    return "; ".join(s.plan.text for s in stages)


def choose(stages: tuple[Pipeline, ...], stage: int, path: str) -> Pipeline:
    """Stage `stage` (from 1) of `stages`; 0 names the only one."""
    if stage == 0 and len(stages) == 1:
        return stages[0]
    if not 1 <= stage <= len(stages):
        raise PipelineError(f"{path}: runs {len(stages)} stage{'s' if len(stages) > 1 else ''} (one per CREATE VIEW "
                            f"and each other query); a node runs one: stage = 1..{len(stages)}, not {stage}")
    return stages[stage - 1]


def parse_pipeline(text: str, path: str = "<text>", stage: int = 0) -> Pipeline:
    return choose(parse_stages(text, path), stage, path)


def parse_stages(text: str, path: str = "<text>") -> tuple[Pipeline, ...]:
    tables: list[Schema] = []
    sinks: dict[str, str] = {}
    settings: list[tuple[str, str]] = []
    queries: list[tuple[str, str, bool]] = []  # (sink or view name, SELECT text, a view)
    for stmt in statements(text):
        head = stmt.split(None, 2)
        word = head[0].upper()
        if word == "CREATE" and len(head) > 1 and head[1].upper() == "VIEW":
            queries.append((*_view(stmt, path), True))
        elif word == "CREATE":
            if _is_sink(stmt):
                name, topic = _sink(stmt, path)
                sinks[name] = topic
                continue
            try:
                tables.append(parse_table(stmt))
            except SchemaError as e:
                raise PipelineError(f"{path}: {e}") from None
        elif word == "SET":
            settings.append(_setting(stmt, path))
        elif word == "INSERT":
            tree = sqlglot.parse_one(stmt, read=Dialect)
            target = tree.this.name if tree.this is not None else ""
            select = tree.expression
            queries.append((target, select.sql(dialect=Dialect), False))
        elif word == "SELECT":
            queries.append(("", stmt, False))
        else:
            raise PipelineError(f"{path}: {stmt[:60]!r}: expected CREATE TABLE, CREATE VIEW, SET, INSERT INTO or "
                                f"SELECT")
    if not tables:
        raise PipelineError(f"{path}: declares no table (CREATE TABLE ... WITH ('topic' = ..., 'format' = ...))")
    names = [t.table for t in tables] + [name for name, _, view in queries if view]
    if len(set(names)) != len(names):
        raise PipelineError(f"{path}: a table or view is declared twice ({', '.join(names)})")
    _check_sinks(path, [q[0] for q in queries if not q[2]], sinks)
    return _staged(path, tuple(tables), queries, sinks, tuple(settings))


def _check_sinks(path: str, targets: list[str], sinks: dict[str, str]) -> None:
    """The queries besides the views: at least one; several only each into a sink of its own (one
    results topic holding two queries' results could not be told apart, nor checked)."""
    if not targets:
        raise PipelineError(f"{path}: holds no query besides its views; a pipeline ends with one "
                            f"(INSERT INTO ... SELECT)")
    for target in targets:
        if target and target not in sinks:
            raise PipelineError(f"{path}: INSERT INTO {target}: no such sink (CREATE TABLE {target} WITH "
                                f"('topic' = ...))")
    if len(targets) > 1:
        topics = [sinks.get(t, "") for t in targets]
        if not all(targets) or len(set(targets)) != len(targets) or len(set(topics)) != len(topics):
            raise PipelineError(f"{path}: holds {len(targets)} queries besides its views; with several, each "
                                f"writes a sink of its own (INSERT INTO <sink>, each sink's topic its own)")


def _staged(path: str, tables: tuple[Schema, ...], queries: list[tuple[str, str, bool]], sinks: dict[str, str],
            settings: tuple[tuple[str, str], ...]) -> tuple[Pipeline, ...]:
    """Each query planned over the tables and the views before it, as a stage of its own."""
    views: dict[str, Schema] = {}
    planned = []
    for name, text, view in queries:
        try:
            p = plan(text, {**{t.table: t for t in tables}, **views})
        except UnsupportedSql as e:
            raise UnsupportedSql(f"{path}: {f'view {name}: ' if view else ''}{e}{_hint(text, views)}") from None
        if view:
            views[name] = view_table(name, p)
        planned.append((name, p, view))
    readers = Counter(p.schema.table for _, p, _ in planned)
    for name in views:
        if not readers[name]:
            raise PipelineError(f"{path}: view {name} is read by no later query; a view feeds one later stage or "
                                f"more")
    for k, (name, p, _) in enumerate(planned[1:], 2):
        if p.schema.table not in views:
            raise PipelineError(f"{path}: stage {k} ({name or 'the results'}) reads table {p.schema.table}; only "
                                f"the first stage reads the file's tables, each later one a view before it")
    n, out = len(planned), []
    for k, (name, p, view) in enumerate(planned, 1):
        read = (views[p.schema.table],) if p.schema.table in views else ()
        sink = (name, name) if view else (sinks.get(name, ""), name)
        own = tuple(t.table for t in read) + ((name,) if view else ())
        out.append(Pipeline(path, tables + read, p, sink[0], settings, sink[1], stage=k, stages=n, views=own))
    return tuple(out)


def _hint(text: str, views: dict[str, Schema]) -> str:
    """What a query over a view with no event time can do about it (a view declares no WATERMARK)."""
    read = [v for v, t in views.items() if not t.event_time and re.search(rf"\bFROM\s+{v}\b", text, re.I)]
    return (f" (view {read[0]} has no event time: select its source's event-time column, or its window's start "
            f"or end, as it is)" if read else "")


def view_table(name: str, p: Plan) -> Schema:
    """The table a view is to the stage that reads it: the query's result columns, as JSON in the topic of
    the view's name (under the deployment's topic_prefix: Topics.of_pipeline). A window's results come
    out in window order (a watermark closes the windows it passes, and their results are sorted by
    window), so their end is an event time no result is behind: the watermark's delay is 0. A selection
    keeps its source's event time if it selects that column."""
    columns = tuple(Column(o.name, o.type) for o in p.outputs)
    as_is = {o.expr.name: o.name for o in p.outputs if isinstance(o.expr, exp.Column)}
    time, delay = "", 0
    if p.stateful:
        time = as_is.get("window_end") or as_is.get("window_start", "")
    elif p.schema.event_time in as_is:
        time, delay = as_is[p.schema.event_time], p.schema.watermark_delay_ms
    return Schema(name, columns, time, delay, (("topic", name), ("format", "json")))


def _view(stmt: str, path: str) -> tuple[str, str]:
    """A CREATE VIEW's name and SELECT text."""
    try:
        tree = sqlglot.parse_one(stmt, read=Dialect)
    except sqlglot.errors.ParseError as e:
        raise PipelineError(f"{path}: {stmt[:60]!r}: does not parse: {str(e).splitlines()[0]}") from None
    select = tree.expression
    if not isinstance(tree, exp.Create) or not isinstance(select, exp.Select) or not tree.this.name:
        raise PipelineError(f"{path}: {stmt[:60]!r}: expected CREATE VIEW <name> AS SELECT ...")
    return tree.this.name, select.sql(dialect=Dialect)


def _is_sink(stmt: str) -> bool:
    """A CREATE TABLE with no column list: `CREATE TABLE name WITH (...)`."""
    words = stmt.split(None, 4)
    return len(words) >= 4 and words[1].upper() == "TABLE" and words[3].upper().startswith("WITH")


def _sink(stmt: str, path: str) -> tuple[str, str]:
    words = stmt.split(None, 3)
    name = words[2]
    m = re.search(r"'topic'\s*=\s*'([^']+)'", stmt)
    if not m:
        raise PipelineError(f"{path}: sink {name} names no topic (WITH ('topic' = '...'))")
    return name, m.group(1)


def _setting(stmt: str, path: str) -> tuple[str, str]:
    body = stmt[3:].strip()
    name, eq, value = body.partition("=")
    name, value = name.strip().lower().replace("-", "_"), value.strip()
    if not eq or not name.isidentifier() or not value:
        raise PipelineError(f"{path}: {stmt[:60]!r}: expected SET <setting> = <value>")
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return name, value
