"""A pipeline file: the tables a pipeline reads, its settings and its query, in one SQL text.

    CREATE TABLE bid (...) WITH ('topic' = 'bid', 'format' = 'json');   -- one or more sources
    CREATE TABLE out WITH ('topic' = 'q1-results');                     -- the sink (optional)
    SET bsize = 10;                                                     -- any node setting
    INSERT INTO out SELECT ... FROM bid ...;                            -- or the SELECT alone

Statements are cut where sqlglot's tokenizer finds a `;` (so a `;` in a string literal stays in it);
each is read by its own reader: CREATE TABLE by formats/schema.py, the query by formats/sql.py, SET as
a setting's name and its text (config.py checks the value). A sink declared without columns names where
the results go; without one they go to the default results topic.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot.tokens import TokenType

from ..core.errors import PipelineError, SchemaError, UnsupportedSql
from .schema import Schema, parse_table
from .sql import Dialect, Plan, plan


@dataclass(frozen=True)
class Pipeline:
    """What a pipeline file declares: its source tables in declaration order (each a source stream of
    the link order), the query's plan, the sink's topic ("" = the default results topic) and the
    settings it sets, as text."""

    path: str
    tables: tuple[Schema, ...]
    plan: Plan
    sink_topic: str = ""
    settings: tuple[tuple[str, str], ...] = ()
    sink_name: str = ""

    def text(self, topic_prefix: str = "") -> str:
        """The pipeline as a file again, every topic it names under `topic_prefix` (a test's own topics)."""
        stmts = []
        for t in self.tables:
            opts = tuple((k, topic_prefix + v if k == "topic" else v) for k, v in t.options)
            if "topic" not in dict(opts):
                opts = (("topic", topic_prefix + t.topic), *opts)
            stmts.append(dataclasses.replace(t, options=opts, _by_name={}).ddl())
        if self.sink_name:
            stmts.append(f"CREATE TABLE {self.sink_name} WITH ('topic' = '{topic_prefix}{self.sink_topic}')")
        stmts.extend(f"SET {k} = '{v}'" for k, v in self.settings)
        stmts.append(f"INSERT INTO {self.sink_name} {self.plan.text}" if self.sink_name else self.plan.text)
        return ";\n".join(stmts) + ";\n"

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


def read_pipeline(path: str | Path) -> Pipeline:
    """The pipeline a file declares; PipelineError (or UnsupportedSql) says what is wrong."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PipelineError(f"{path}: cannot read the pipeline file: {e}") from None
    return parse_pipeline(text, str(path))


def parse_pipeline(text: str, path: str = "<text>") -> Pipeline:
    tables: list[Schema] = []
    sinks: dict[str, str] = {}
    settings: list[tuple[str, str]] = []
    queries: list[tuple[str, str]] = []  # (sink name, SELECT text)
    for stmt in statements(text):
        head = stmt.split(None, 2)
        word = head[0].upper()
        if word == "CREATE":
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
            queries.append((target, select.sql(dialect=Dialect)))
        elif word == "SELECT":
            queries.append(("", stmt))
        else:
            raise PipelineError(f"{path}: {stmt[:60]!r}: expected CREATE TABLE, SET, INSERT INTO or SELECT")
    if not tables:
        raise PipelineError(f"{path}: declares no table (CREATE TABLE ... WITH ('topic' = ..., 'format' = ...))")
    names = [t.table for t in tables]
    if len(set(names)) != len(names):
        raise PipelineError(f"{path}: a table is declared twice ({', '.join(names)})")
    if len(queries) != 1:
        raise PipelineError(f"{path}: holds {len(queries)} queries; a pipeline runs one (INSERT INTO ... SELECT)")
    target, query = queries[0]
    if target and target not in sinks:
        raise PipelineError(f"{path}: INSERT INTO {target}: no such sink (CREATE TABLE {target} WITH ('topic' = ...))")
    try:
        planned = plan(query, {t.table: t for t in tables})
    except UnsupportedSql as e:
        raise UnsupportedSql(f"{path}: {e}") from None
    return Pipeline(path, tuple(tables), planned, sinks.get(target, ""), tuple(settings), target)


def _is_sink(stmt: str) -> bool:
    """A CREATE TABLE with no column list: `CREATE TABLE name WITH (...)`."""
    words = stmt.split(None, 4)
    return len(words) >= 4 and words[1].upper() == "TABLE" and words[3].upper().startswith("WITH")


def _sink(stmt: str, path: str) -> tuple[str, str]:
    import re

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
