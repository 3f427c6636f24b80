"""A query over the ticks, in SQL: the selection, or a keyed window aggregation on event time.

One text serves the CLI, env and compose, and `Query.text()` writes it back (`parse_query` reads its output
as it was):

    SELECT * FROM ticks [WHERE <predicate>]
    SELECT <keys>, <aggregates> FROM ticks [WHERE <predicate>]
    GROUP BY window(ts, '<size>'[, '<slide>']), <key>[, <key> ...]

sqlglot reads it, and the SQL planner (formats/sql.py) checks it over the tick table (`ticks.table()`, whose
WATERMARK delay is the `lateness` it is read with); this module only checks that it has the shape the
tick operators compute: whole ticks selected, or per key and window the aggregates `count(*)` and
`sum|min|max|avg(price|volume)`, results in the tick example's CSV (window start, keys, aggregates).
Durations are Spark's (`'500 milliseconds'`, `'1 second'`, `'2 minutes'`); a slide must divide the
size. Any other query runs as a pipeline file (examples/). `EXAMPLES` names the two a user starts from.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ..core.errors import PredicateError, QueryError, UnsupportedSql
from .predicate import compile_predicate
from .ticks import FIELD_TYPE, table

AGGREGATES = ("count", "sum", "min", "max", "avg")
_NUMERIC = tuple(name for name, typ in FIELD_TYPE.items() if typ in (int, float) and name != "ts")
_UNITS = (("minutes", 60_000), ("seconds", 1000), ("milliseconds", 1))


@dataclass(frozen=True, slots=True)
class Aggregate:
    fn: str  # one of AGGREGATES
    column: str = ""  # a numeric field; empty for count

    @property
    def name(self) -> str:
        """The result column's name: `count`, `avg_price`."""
        return self.fn if self.fn == "count" else f"{self.fn}_{self.column}"

    def text(self) -> str:
        return "count(*)" if self.fn == "count" else f"{self.fn}({self.column})"


@dataclass(frozen=True, slots=True)
class Query:
    """What N and N' compute. `kind` "select": the selection by `where`; "window": per key and window,
    the aggregates of the ticks `where` selects, each window final once the watermark has passed its end
    by `lateness_ms`."""

    kind: str = "select"
    where: str = ""  # the predicate; empty: every tick
    keys: tuple[str, ...] = ()
    size_ms: int = 0
    slide_ms: int = 0
    lateness_ms: int = 0
    aggregates: tuple[Aggregate, ...] = ()

    @property
    def stateful(self) -> bool:
        return self.kind == "window"

    def text(self) -> str:
        """The query as SQL (its lateness is the tick table's WATERMARK delay, a setting of its own)."""
        where = f" WHERE {self.where}" if self.where else ""
        if self.kind == "select":
            return f"SELECT * FROM ticks{where}"
        durations = ", ".join(f"'{_duration_text(ms)}'" for ms in
                              ((self.size_ms,) if self.slide_ms == self.size_ms else (self.size_ms, self.slide_ms)))
        items = ", ".join([*self.keys, *(a.text() for a in self.aggregates)])
        return f"SELECT {items} FROM ticks{where} GROUP BY window(ts, {durations}), {', '.join(self.keys)}"


SHAPES = ("SELECT * FROM ticks [WHERE ...], or SELECT <keys>, <aggregates> FROM ticks [WHERE ...] GROUP BY "
          "window(ts, '<size>'[, '<slide>']), <keys>, or an example's name (select, window)")
EXAMPLES = {
    "select": "SELECT * FROM ticks WHERE price > 100",
    "window": "SELECT symbol, count(*), avg(price), max(price) FROM ticks WHERE price > 100 "
              "GROUP BY window(ts, '1 second'), symbol",
}


def parse_query(text: str, lateness_ms: int = 0) -> Query:
    """The query `text` declares (or the example it names), its windows final `lateness_ms` after their
    end; QueryError says what is wrong."""
    from .sql import parse_select, plan

    text = EXAMPLES.get(text.strip(), text).strip()
    try:
        p = plan(text, {"ticks": table(lateness_ms)})
    except UnsupportedSql as e:  # the planner's own list of what it supports is a pipeline's: this one's instead
        raise QueryError(f"query {text!r}: {str(e).split('; supported:')[0]}; a tick query is {SHAPES}") from None
    tree = parse_select(text)
    where = tree.args.get("where")
    predicate = where.this.sql(dialect="spark") if where is not None else ""
    try:
        if predicate:
            compile_predicate(predicate)
    except PredicateError as e:
        raise QueryError(f"query {text!r}: {e}") from None
    if not p.stateful:
        if [o.name for o in p.outputs] != list(FIELD_TYPE) or not isinstance(tree.expressions[0], exp.Star):
            raise QueryError(f"query {text!r}: the tick selection outputs whole ticks (SELECT * FROM ticks "
                             f"[WHERE ...]); a pipeline file (examples/) computes columns")
        return Query("select", where=predicate)
    return _window(text, p, predicate)


def _window(text: str, p, where: str) -> Query:
    """The tick window a plan computes, if it is one the tick operators compute."""
    keys = []
    for k in p.keys:
        if not isinstance(k.expr, exp.Column) or k.expr.name not in FIELD_TYPE or k.expr.name == "ts":
            raise QueryError(f"query {text!r}: key {k.expr.sql()!r} is not a field to group by "
                             f"({', '.join(n for n in FIELD_TYPE if n != 'ts')})")
        keys.append(k.expr.name)
    if not keys:
        raise QueryError(f"query {text!r}: a tick window groups by at least one key")
    if len(set(keys)) != len(keys):
        raise QueryError(f"query {text!r}: a key is named twice")
    if p.having is not None:
        raise QueryError(f"query {text!r}: HAVING runs in a pipeline file (examples/), not on the tick example")
    aggregates = []
    for a in p.aggregates:
        if a.fn == "count" and a.arg is None:
            aggregates.append(Aggregate("count"))
        elif a.fn in AGGREGATES and a.fn != "count" and isinstance(a.arg, exp.Column) and a.arg.name in _NUMERIC:
            aggregates.append(Aggregate(a.fn, a.arg.name))
        else:
            raise QueryError(f"query {text!r}: aggregate {a.fn}({a.arg.sql() if a.arg is not None else '*'}) is "
                             f"not count(*) or one of sum, min, max, avg over {' or '.join(_NUMERIC)}")
    if not aggregates:
        raise QueryError(f"query {text!r}: a tick window computes at least one aggregate")
    refs = [o.expr.name if isinstance(o.expr, exp.Column) else o.name for o in p.outputs]
    aggs = [f"_agg{i}" for i in range(len(aggregates))]
    if len({a.name for a in aggregates}) != len(aggregates) or len(refs) > len(set(refs)):
        raise QueryError(f"query {text!r}: an aggregate is named twice")
    if refs != [*keys, *aggs]:
        raise QueryError(f"query {text!r}: the tick window selects its keys (in GROUP BY's order), then its "
                         f"aggregates, nothing else: its results are window start, keys, aggregates (a pipeline "
                         f"file, examples/, computes any columns)")
    spec = p.spec
    return Query("window", where=where, keys=tuple(keys), size_ms=spec.size_ms, slide_ms=spec.slide_ms,
                 lateness_ms=spec.lateness_ms, aggregates=tuple(aggregates))


def _duration_text(ms: int) -> str:
    for unit, n in _UNITS:
        if ms % n == 0:
            return f"{ms // n} {unit if ms != n else unit[:-1]}"
    raise AssertionError(ms)
