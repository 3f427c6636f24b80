"""The SQL front end: one query text in Spark SQL's dialect, read by sqlglot, checked against the
table it reads, and planned as data (`Plan`) that both operators and the checker's truth run.

Two shapes of query, as the engine runs them:

- a selection: `SELECT <expressions> FROM t [WHERE <predicate>]`, one output per input the predicate
  keeps (`*` passes every column through);
- a window aggregation: `SELECT window.start, window.end, <keys>, <aggregates> FROM t [WHERE ...]
  GROUP BY window(<event time>, '<size>'[, '<slide>']), <keys> [HAVING <predicate>] [QUALIFY <top n>]`,
  with count, sum, min, max and avg, each window final at the watermark record that passes its end;
  QUALIFY keeps a window's top groups: `rank()` or `dense_rank() OVER (PARTITION BY window.start[, keys]
  ORDER BY ...) <= n` (Flink's Window Top-N, and Nexmark q5 whole without its self-join).

What the engine cannot run is refused here, at start, by `UnsupportedSql` in one line that names the
construct and says what is supported (SUPPORTED; docs/sql.md holds the table). The plan's expressions
are sqlglot trees, normalised so that every engine computes the same values: `/` works in DOUBLE (Spark
divides DECIMALs in DECIMAL, DuckDB integers in DOUBLE), `CAST` is Spark's try_cast (NULL where a value
does not convert), and `MOD` and `%` take the dividend's sign.

Nothing here is hand-parsed: sqlglot reads the text; this module walks its tree (sqlglot plans no
streaming windows, and types each engine differently).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark

from ..core.errors import UnsupportedSql
from ..core.windows import WindowSpec
from .schema import Schema, SqlType, duration_ms, interval_ms

SUPPORTED = ("supported: SELECT <expressions> FROM <table> [WHERE ...], or SELECT window.start, window.end, "
             "keys, count/sum/min/max/avg FROM <table> [WHERE ...] GROUP BY window(<time>, '<size>'[, '<slide>']), "
             "keys [HAVING ...] [QUALIFY rank() OVER (PARTITION BY window.start ORDER BY ...) <= n] (docs/sql.md)")
TOP_FUNCTIONS = {exp.Rank: "rank", exp.DenseRank: "dense_rank"}


class Dialect(Spark):
    """Spark SQL, with `window` an ordinary name: Spark reads `GROUP BY window(ts, '10 seconds')` and
    `window.start` that way, where sqlglot would take WINDOW for a named-window clause. A query is
    written back as it was read: sqlglot's Spark writer turns QUALIFY into a subquery (open-source Spark
    has no QUALIFY), and a pipeline's stages carry their query as text that is planned again."""

    class Tokenizer(Spark.Tokenizer):
        KEYWORDS = {k: v for k, v in Spark.Tokenizer.KEYWORDS.items() if k != "WINDOW"}

    class Generator(Spark.Generator):
        TRANSFORMS = {k: v for k, v in Spark.Generator.TRANSFORMS.items() if k is not exp.Select}


BIGINT, INT, DOUBLE, VARCHAR, BOOLEAN, TIMESTAMP = (SqlType(k) for k in
                                                    ("BIGINT", "INT", "DOUBLE", "VARCHAR", "BOOLEAN", "TIMESTAMP"))
NULLTYPE = SqlType("NULL")
AGGREGATES = ("count", "sum", "min", "max", "avg")
# String functions and others the evaluators implement, each with its argument count (min, max).
FUNCTIONS = {"upper": (1, 1), "lower": (1, 1), "length": (1, 1), "trim": (1, 1), "substring": (2, 3),
             "concat": (1, 16), "abs": (1, 1), "coalesce": (1, 16)}


@dataclass(frozen=True)
class Output:
    """One result column: its name and the expression that makes it (over the input's columns for a
    selection; over `window_start`, `window_end`, the keys and `_agg<i>` for a window aggregation)."""

    name: str
    expr: exp.Expression
    type: SqlType


@dataclass(frozen=True)
class Aggregate:
    fn: str  # one of AGGREGATES
    arg: exp.Expression | None  # None: count(*)
    type: SqlType  # the result's type
    arg_type: SqlType | None = None


@dataclass(frozen=True)
class Order:
    """One ORDER BY term of a QUALIFY's ranking: an expression over the window's names, its direction and
    where its NULLs go (as written, else Spark's default: first ascending, last descending)."""

    expr: exp.Expression
    desc: bool
    nulls_first: bool


@dataclass(frozen=True)
class TopN:
    """QUALIFY `fn() OVER (PARTITION BY <window>[, keys] ORDER BY ...) <= limit`: of each final window's
    groups (per partition), those ranked at most `limit`. Ties share a rank, so every group tied with the
    last one kept is kept: what each result holds does not depend on the order rows reached the operator,
    and a standby's takeover yields the primary's results. `partition` names the keys beside the window."""

    fn: str  # "rank" or "dense_rank"
    partition: tuple[str, ...]
    order: tuple[Order, ...]
    limit: int


@dataclass(frozen=True)
class Plan:
    """What a query computes. `outputs` in result order. A window plan also has `time` (the event-time
    column), `spec`, `keys` (name, expression, type), `aggregates` (referenced as `_agg<i>`) and
    `having` (over the same names as its outputs) and `top` (QUALIFY, applied after HAVING);
    `key_names` are the result columns that name a group (a window result's record key)."""

    text: str
    schema: Schema
    where: exp.Expression | None
    outputs: tuple[Output, ...]
    time: str = ""
    spec: WindowSpec | None = None
    keys: tuple[Output, ...] = ()
    aggregates: tuple[Aggregate, ...] = ()
    having: exp.Expression | None = None
    top: TopN | None = None

    @property
    def stateful(self) -> bool:
        return self.spec is not None

    @property
    def names(self) -> list[str]:
        return [o.name for o in self.outputs]

    @property
    def key_names(self) -> list[str]:
        """The result columns that name a window result's group: window start and end and the keys that
        are selected."""
        if not self.stateful:
            return []
        refs = {"window_start", "window_end", *(k.name for k in self.keys)}
        return [o.name for o in self.outputs if isinstance(o.expr, exp.Column) and o.expr.name in refs]

    @property
    def names_groups(self) -> bool:
        """Whether a window result's selected columns name its group: its window (start or end) and
        every key. Otherwise results are told apart only by their order."""
        if not self.stateful:
            return False
        refs = {o.expr.name for o in self.outputs if isinstance(o.expr, exp.Column)}
        return bool(refs & {"window_start", "window_end"}) and all(k.name in refs for k in self.keys)

    @property
    def input_columns(self) -> set[str]:
        """The source columns the query reads (only those need decoding)."""
        trees = [self.where, *(o.expr for o in self.outputs)] if not self.stateful else \
            [self.where, *(k.expr for k in self.keys), *(a.arg for a in self.aggregates)]
        cols = {c.name for t in trees if t is not None for c in t.find_all(exp.Column)}
        return cols | ({self.time} if self.time else set())


def refuse(what: str) -> UnsupportedSql:
    return UnsupportedSql(f"{what}; {SUPPORTED}")


def parse_select(text: str) -> exp.Select:
    """The SELECT a text holds, or UnsupportedSql."""
    try:
        trees = sqlglot.parse(text, read=Dialect)
    except sqlglot.errors.ParseError as e:
        raise UnsupportedSql(f"the query does not parse: {str(e).splitlines()[0]}") from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise refuse(f"expected one statement, got {len(trees)}")
    tree = trees[0]
    if isinstance(tree, exp.SetOperation):
        raise refuse(f"{type(tree).__name__.upper()} is not supported")
    if not isinstance(tree, exp.Select):
        raise refuse(f"{tree.sql(dialect=Dialect)[:60]!r} is not a SELECT")
    return tree


def plan(text: str, tables: dict[str, Schema]) -> Plan:
    """The plan of query `text` over `tables` (by name); UnsupportedSql says what is not supported."""
    tree = parse_select(text)
    for key, what in (("joins", "JOIN"), ("order", "ORDER BY"), ("limit", "LIMIT"), ("distinct", "DISTINCT"),
                      ("with_", "WITH"), ("offset", "OFFSET"), ("windows", "WINDOW"),
                      ("laterals", "LATERAL VIEW"), ("pivots", "PIVOT"), ("sort", "SORT BY"),
                      ("cluster", "CLUSTER BY"), ("distribute", "DISTRIBUTE BY")):
        if tree.args.get(key):
            raise refuse(f"{what} is not supported")
    if tree.args.get("with"):
        raise refuse("WITH is not supported")
    source = tree.args.get("from_") or tree.args.get("from")
    if source is None:
        raise refuse("a query reads FROM one table")
    table = source.this
    if not isinstance(table, exp.Table) or table.args.get("db"):
        raise refuse(f"FROM {table.sql(dialect=Dialect)}: a subquery or a qualified name is not supported")
    if table.name not in tables:
        raise UnsupportedSql(f"FROM {table.name}: no such table (declared: {', '.join(tables) or 'none'})")
    schema = tables[table.name]
    checker = _Types(schema, table.alias_or_name)
    where = tree.args.get("where")
    where_expr = None
    if where is not None:
        where_expr = _normalise(where.this)
        checker.boolean(where_expr, "WHERE")
    group = tree.args.get("group")
    if group is None:
        for clause in ("having", "qualify"):
            if tree.args.get(clause):
                raise refuse(f"{clause.upper()} without GROUP BY window(...) is not supported")
        return _selection(text, schema, tree, where_expr, checker)
    return _window(text, schema, tree, group, where_expr, checker)


def _selection(text: str, schema: Schema, tree: exp.Select, where, checker: _Types) -> Plan:
    outputs: list[Output] = []
    for item in tree.expressions:
        if isinstance(item, exp.Star):
            outputs.extend(Output(c.name, exp.column(c.name), c.type) for c in schema.columns)
            continue
        expr, name = _unalias(item)
        expr = _normalise(expr)
        if expr.find(exp.AggFunc) is not None:
            raise refuse(f"{expr.sql(dialect=Dialect)}: an aggregate needs GROUP BY window(...)")
        outputs.append(Output(name, expr, checker.type(expr)))
    _unique(outputs)
    return Plan(text, schema, where, tuple(outputs))


def _window(text: str, schema: Schema, tree: exp.Select, group, where, checker: _Types) -> Plan:
    win, time, spec = _window_call(schema, group)
    keys = _keys(group, win, checker)
    aggs: list[Aggregate] = []
    post = _Types(None, "", {"window_start": TIMESTAMP, "window_end": TIMESTAMP,
                             **{k.name: k.type for k in keys}})
    lift = _lifter(aggs, post, checker)
    outputs = []
    for item in tree.expressions:
        if isinstance(item, exp.Star):
            raise refuse("SELECT * with GROUP BY is not supported")
        expr, name = _unalias(item)
        expr = _normalise(expr).transform(lift, copy=True)
        if name == "window.start" or name == "start":
            name = "window_start" if _is_window_field(item) else name
        if name == "window.end" or name == "end":
            name = "window_end" if _is_window_field(item) else name
        outputs.append(Output(name, expr, post.type(expr)))
    _unique(outputs)
    having = tree.args.get("having")
    having_expr = None
    if having is not None:
        having_expr = _normalise(having.this).transform(lift, copy=True)
        post.boolean(having_expr, "HAVING")
    qualify = tree.args.get("qualify")
    top = _top(qualify.this, outputs, keys, lift, post) if qualify is not None else None
    return Plan(text, schema, where, tuple(outputs), time, spec, tuple(keys), tuple(aggs), having_expr, top)


def _top(cond: exp.Expression, outputs: list[Output], keys: list[Output],
         lift: Callable[[exp.Expression], exp.Expression], post: _Types) -> TopN:
    """QUALIFY's condition as a TopN: a rank compared with a whole number (`<= n`, `< n`, `= 1`, or the
    same reversed), ranking within the window. Its terms may name the query's result columns (`num` for
    `count(*) AS num`), as they may in DuckDB's and Databricks' QUALIFY."""
    cond = _normalise(cond)
    if isinstance(cond, (exp.GTE, exp.GT, exp.EQ)) and isinstance(cond.expression, exp.Window):
        flipped = {exp.GTE: exp.LTE, exp.GT: exp.LT, exp.EQ: exp.EQ}[type(cond)]
        cond = flipped(this=cond.expression, expression=cond.this)
    shape = "QUALIFY takes rank() or dense_rank() OVER (PARTITION BY window.start ORDER BY ...) <= n"
    if not isinstance(cond, (exp.LTE, exp.LT, exp.EQ)) or not isinstance(cond.this, exp.Window):
        raise refuse(shape)
    win, n = cond.this, cond.expression
    if not (isinstance(n, exp.Literal) and not n.is_string and n.name.isdigit()):
        raise refuse(f"{shape}: n a whole number, not {n.sql(dialect=Dialect)}")
    limit = int(n.name) - (1 if isinstance(cond, exp.LT) else 0)
    if isinstance(cond, exp.EQ) and limit != 1:
        raise refuse(f"{shape}: rank() = {limit} keeps no top n (<= {limit} does)")
    if limit < 1:
        raise refuse(f"{shape}: n at least 1 (this keeps nothing)")
    fn = TOP_FUNCTIONS.get(type(win.this))
    if fn is None:
        raise refuse(f"{shape}: {win.this.sql(dialect=Dialect)} is not rank() or dense_rank() (row_number() picks "
                     f"among ties by the order rows arrive, which a standby need not share)")
    aliases = {o.name: o.expr for o in outputs}

    def by_alias(c: exp.Expression) -> exp.Expression:
        # Before an aggregate's argument is reached, which names the input's column, not a result's.
        if isinstance(c, exp.Column) and not c.table and c.name not in post.names and c.name in aliases:
            return aliases[c.name].copy()
        return lift(c)

    def named(e: exp.Expression) -> exp.Expression:
        return _normalise(e).transform(by_alias, copy=True)

    parts = [named(p) for p in win.args.get("partition_by") or []]
    names = [p.name if isinstance(p, exp.Column) else "" for p in parts]
    windowed = {"window_start", "window_end"}
    if not windowed & set(names) or not all(x in windowed or x in {k.name for k in keys} for x in names):
        raise refuse(f"{shape}: PARTITION BY the window (window.start or window.end) and keys of GROUP BY")
    terms = win.args.get("order")
    if terms is None or not terms.expressions:
        raise refuse(f"{shape}: a rank needs ORDER BY")
    order = []
    for t in terms.expressions:
        e = named(t.this)
        post.type(e)
        order.append(Order(e, bool(t.args.get("desc")), bool(t.args.get("nulls_first"))))
    return TopN(fn, tuple(dict.fromkeys(x for x in names if x not in windowed)), tuple(order), limit)


def _window_call(schema: Schema, group) -> tuple[exp.Expression, str, WindowSpec]:
    """GROUP BY's one window(<time>, '<size>'[, '<slide>']): the call, its time column and its spec."""
    windows = [g for g in group.expressions if _is_call(g, "window")]
    if len(windows) != 1:
        raise refuse("GROUP BY takes exactly one window(<time>, '<size>'[, '<slide>']) (no GROUP BY of keys alone)")
    if group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets"):
        raise refuse("ROLLUP, CUBE and GROUPING SETS are not supported")
    win = windows[0]
    args = win.expressions
    if len(args) not in (2, 3) or not isinstance(args[0], exp.Column):
        raise refuse("window() takes the event-time column and a size, and optionally a slide")
    time = args[0].name
    if time != schema.event_time:
        raise UnsupportedSql(f"window({time}, ...): the table's event time is "
                             f"{schema.event_time or 'not declared (WATERMARK FOR <column> ...)'}")
    size, slide = (_duration(a) for a in (args[1], args[-1]))
    try:
        # A window is final once the watermark passes its end by the table's WATERMARK delay: Nu's watermark
        # is the event time the link order has passed, Flink's that time less the delay.
        return win, time, WindowSpec(size, slide, schema.watermark_delay_ms)
    except ValueError as e:
        raise refuse(str(e)) from None


def _keys(group, win: exp.Expression, checker: _Types) -> list[Output]:
    """GROUP BY's columns beside the window: the keys, each named once."""
    keys: list[Output] = []
    for g in group.expressions:
        if g is win:
            continue
        if not isinstance(g, exp.Column):
            raise refuse(f"GROUP BY {g.sql(dialect=Dialect)}: group by columns (and one window)")
        keys.append(Output(g.name, exp.column(g.name), checker.type(g)))
    if len({k.name for k in keys}) != len(keys):
        raise refuse("a key is named twice in GROUP BY")
    return keys


def _lifter(aggs: list[Aggregate], post: _Types, checker: _Types) -> Callable[[exp.Expression], exp.Expression]:
    """A transform of an output or HAVING expression onto the window's names: each aggregate becomes
    `_agg<i>` (added to `aggs` once, typed in `post`), window.start `window_start`."""

    def lift(e: exp.Expression) -> exp.Expression:
        if isinstance(e, exp.Column) and e.table == "window" and e.name in ("start", "end"):
            return exp.column(f"window_{e.name}")
        if isinstance(e, exp.AggFunc):
            agg = _aggregate(e, checker)
            if agg not in aggs:
                aggs.append(agg)
            name = f"_agg{aggs.index(agg)}"
            post.names[name] = agg.type
            return exp.column(name)
        if isinstance(e, exp.Column) and e.name not in post.names:
            raise UnsupportedSql(f"{e.sql(dialect=Dialect)} is neither grouped nor aggregated")
        return e

    return lift


def _is_window_field(item) -> bool:
    e = item.this if isinstance(item, exp.Alias) else item
    return isinstance(e, exp.Column) and e.table == "window"


def _aggregate(e: exp.AggFunc, checker: _Types) -> Aggregate:
    fn = {exp.Count: "count", exp.Sum: "sum", exp.Min: "min", exp.Max: "max", exp.Avg: "avg"}.get(type(e))
    if fn is None:
        raise refuse(f"aggregate {e.sql(dialect=Dialect)} is not supported (count, sum, min, max, avg)")
    if e.args.get("distinct") or isinstance(e.this, exp.Distinct):
        raise refuse(f"{fn}(DISTINCT ...) is not supported")
    if e.find(exp.Window) is not None:
        raise refuse("window functions (OVER) are not supported")
    arg = e.this
    if fn == "count" and (arg is None or isinstance(arg, exp.Star)):
        return Aggregate("count", None, BIGINT)
    if arg is None or arg.find(exp.AggFunc) is not None:
        raise refuse(f"{e.sql(dialect=Dialect)}: an aggregate takes one expression, with no aggregate in it")
    arg = _normalise(arg)
    t = checker.type(arg)
    if fn == "count":
        return Aggregate("count", arg, BIGINT, t)
    if fn in ("sum", "avg") and not t.numeric:
        raise UnsupportedSql(f"{fn}({arg.sql(dialect=Dialect)}) needs a number, not {t.text()}")
    if t.kind in ("BOOLEAN",) and fn in ("min", "max"):
        raise UnsupportedSql(f"{fn}({arg.sql(dialect=Dialect)}) of a BOOLEAN is not supported")
    if fn == "sum":
        out = SqlType("DECIMAL", 38, t.scale) if t.kind == "DECIMAL" else (DOUBLE if t.kind == "DOUBLE" else BIGINT)
    elif fn == "avg":
        out = DOUBLE  # the exact sum over the count, in DOUBLE (as Spark's avg of integers, DuckDB's of all)
    else:
        out = t
    return Aggregate(fn, arg, out, t)


def _duration(e: exp.Expression) -> int:
    ms = None
    if isinstance(e, exp.Literal) and e.is_string:
        ms = duration_ms(e.name)
    elif isinstance(e, exp.Interval):
        ms = interval_ms(e)
    if not ms or ms < 1:
        raise refuse(f"window duration {e.sql(dialect=Dialect)} is not '<n> milliseconds|seconds|minutes|hours'")
    return ms


def _is_call(e: exp.Expression, name: str) -> bool:
    return isinstance(e, exp.Anonymous) and e.name.lower() == name


def _unalias(item: exp.Expression) -> tuple[exp.Expression, str]:
    if isinstance(item, exp.Alias):
        return item.this, item.alias
    if isinstance(item, exp.Column):
        return item, item.sql(dialect=Dialect) if item.table == "window" else item.name
    return item, item.sql(dialect=Dialect)


def _unique(outputs: list[Output]) -> None:
    names = [o.name for o in outputs]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise UnsupportedSql(f"the result names {dup!r} twice: give one an alias (AS ...)")


def _normalise(e: exp.Expression) -> exp.Expression:
    """The expression with the engines' differences taken out: a division's operands in DOUBLE, CAST as
    try_cast, `%` as MOD, parentheses dropped."""

    def fix(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Paren):
            return node.this
        if isinstance(node, exp.Cast) and not isinstance(node, exp.TryCast):
            return exp.TryCast(this=node.this, to=node.to)
        if isinstance(node, exp.Div) and not node.args.get("_ls_double"):
            d = exp.Div(this=exp.TryCast(this=node.this, to=exp.DataType.build("DOUBLE")),
                        expression=exp.TryCast(this=node.expression, to=exp.DataType.build("DOUBLE")))
            d.set("_ls_double", True)
            return d
        return node

    return e.copy().transform(fix, copy=False)


# --- types ---------------------------------------------------------------------------------------------
_CAST_KINDS = {"BIGINT": BIGINT, "INT": INT, "DOUBLE": DOUBLE, "VARCHAR": VARCHAR, "TEXT": VARCHAR,
               "BOOLEAN": BOOLEAN, "TIMESTAMP": TIMESTAMP}


def cast_type(to: exp.DataType) -> SqlType:
    name = to.this.name
    if name == "DECIMAL":
        params = [int(p.this.this) for p in to.expressions] if to.expressions else [10, 0]
        p, s = (params + [0])[:2]
        if not 1 <= p <= 38 or not 0 <= s <= p:
            raise UnsupportedSql(f"CAST to {to.sql(dialect=Dialect)}: DECIMAL precision 1-38, scale 0 to it")
        return SqlType("DECIMAL", p, s)
    t = _CAST_KINDS.get(name)
    if t is None:
        raise refuse(f"CAST to {to.sql(dialect=Dialect)} is not supported (BIGINT, INT, DOUBLE, DECIMAL, STRING, "
                     f"BOOLEAN, TIMESTAMP)")
    return t


class _Types:
    """The type of each expression over a table's columns (or, after grouping, over the window's names),
    refusing what is not supported or does not type."""

    def __init__(self, schema: Schema | None, alias: str, names: dict[str, SqlType] | None = None) -> None:
        self.names = names if names is not None else {c.name: c.type for c in schema.columns}
        self.alias = alias

    def boolean(self, e: exp.Expression, where: str) -> None:
        t = self.type(e)
        if t.kind not in ("BOOLEAN", "NULL"):
            raise UnsupportedSql(f"{where} {e.sql(dialect=Dialect)} is a {t.text()}, not a condition")

    def type(self, e: exp.Expression) -> SqlType:
        """The type of `e`, each node checked by its rule (`_TYPING`); UnsupportedSql for what none takes."""
        sql = e.sql(dialect=Dialect)
        for kinds, rule in _TYPING:
            if isinstance(e, kinds):
                return rule(self, e, sql)
        name = e.name if isinstance(e, exp.Anonymous) else type(e).__name__
        raise refuse(f"function or operator {name}() in {sql} is not supported (arithmetic, comparisons, AND/OR/NOT, "
                     f"CASE, CAST, MOD, IS NULL, IN, BETWEEN, LIKE, {', '.join(FUNCTIONS)})")

    # --- one rule per kind of node: (the node, its SQL text for messages) -> its type -------------------
    def _column(self, e: exp.Column, sql: str) -> SqlType:
        if e.table and e.table != self.alias:
            raise UnsupportedSql(f"{sql}: no such column")
        if e.name not in self.names:
            known = ", ".join(n for n in self.names if not n.startswith("_"))
            raise UnsupportedSql(f"{sql}: no such column ({known})")
        return self.names[e.name]

    def _literal(self, e: exp.Literal, sql: str) -> SqlType:
        if e.is_string:
            return VARCHAR
        text = e.name
        if "e" in text.lower():
            return DOUBLE
        if "." in text:
            digits = text.replace("-", "").split(".")
            p = max(len(digits[0].lstrip("0")) + len(digits[1]), len(digits[1]), 1)
            return SqlType("DECIMAL", min(p, 38), len(digits[1]))
        return BIGINT if not -(1 << 31) <= int(text) < (1 << 31) else INT

    def _arith_node(self, e: exp.Binary, sql: str) -> SqlType:
        a, b = self.type(e.this), self.type(e.expression)
        if isinstance(e, exp.Div):
            self._numeric(a, sql)
            self._numeric(b, sql)
            return DOUBLE
        if isinstance(e, exp.Mod) and (a.kind == "DECIMAL" or b.kind == "DECIMAL"):
            raise UnsupportedSql(f"{sql}: MOD of a DECIMAL is not supported (integers and doubles)")
        return self._arith(a, b, sql, type(e).__name__)

    def _compare(self, e: exp.Binary, sql: str) -> SqlType:
        self._comparable(self.type(e.this), self.type(e.expression), sql)
        return BOOLEAN

    def _logic(self, e: exp.Expression, sql: str) -> SqlType:
        if isinstance(e, exp.Not):
            self.boolean(e.this, "NOT operand")
        else:
            for side in (e.this, e.expression):
                self.boolean(side, "AND/OR operand")
        return BOOLEAN

    def _is(self, e: exp.Is, sql: str) -> SqlType:
        if not isinstance(e.expression, exp.Null):
            raise refuse(f"{sql}: IS takes NULL (IS NULL, IS NOT NULL)")
        self.type(e.this)
        return BOOLEAN

    def _in(self, e: exp.In, sql: str) -> SqlType:
        if e.args.get("query") or e.args.get("unnest") or e.args.get("field"):
            raise refuse(f"{sql}: IN takes a list of values (no subquery)")
        t = self.type(e.this)
        for v in e.expressions:
            self._comparable(t, self.type(v), sql)
        return BOOLEAN

    def _between(self, e: exp.Between, sql: str) -> SqlType:
        t = self.type(e.this)
        self._comparable(t, self.type(e.args["low"]), sql)
        self._comparable(t, self.type(e.args["high"]), sql)
        return BOOLEAN

    def _like(self, e: exp.Like, sql: str) -> SqlType:
        pattern = e.expression
        if self.type(e.this).kind != "VARCHAR" or not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise UnsupportedSql(f"{sql}: LIKE takes a string and a quoted pattern")
        return BOOLEAN

    def _case(self, e: exp.Case, sql: str) -> SqlType:
        if e.this is not None:
            raise refuse(f"{sql}: CASE <value> WHEN is not supported (CASE WHEN <condition>)")
        types = []
        for branch in e.args.get("ifs") or []:
            self.boolean(branch.this, "WHEN")
            types.append(self.type(branch.args["true"]))
        if e.args.get("default") is not None:
            types.append(self.type(e.args["default"]))
        return self._common(types, sql)

    def _if(self, e: exp.If, sql: str) -> SqlType:
        self.boolean(e.this, "IF")
        return self._common([self.type(e.args["true"]), self.type(e.args.get("false") or exp.Null())], sql)

    def _cast(self, e: exp.Cast, sql: str) -> SqlType:
        src = self.type(e.this)
        to = cast_type(e.args["to"])
        if to.kind == "TIMESTAMP" and src.kind not in ("TIMESTAMP", "NULL"):
            raise UnsupportedSql(f"{sql}: only a TIMESTAMP casts to TIMESTAMP")
        if src.kind == "TIMESTAMP" and to.kind not in ("TIMESTAMP", "VARCHAR"):
            raise UnsupportedSql(f"{sql}: a TIMESTAMP casts only to STRING")
        if src.kind == "BOOLEAN" and to.kind not in ("BOOLEAN", "VARCHAR"):
            raise UnsupportedSql(f"{sql}: a BOOLEAN casts only to STRING")
        return to

    def _text_fn(self, e: exp.Expression, sql: str) -> SqlType:
        self._string(self.type(e.this), sql)
        if isinstance(e, exp.Length):
            return INT
        if isinstance(e, exp.Substring):
            for k in ("start", "length"):
                if e.args.get(k) is not None and self.type(e.args[k]).kind not in ("INT", "BIGINT"):
                    raise UnsupportedSql(f"{sql}: substring takes whole-number positions")
        return VARCHAR

    def _concat(self, e: exp.Expression, sql: str) -> SqlType:
        parts = e.expressions if isinstance(e, exp.Concat) else [e.this, e.expression]
        for p in parts:
            self._string(self.type(p), sql)
        return VARCHAR

    def _refused(self, e: exp.Expression, sql: str) -> SqlType:
        if isinstance(e, exp.AggFunc):
            raise refuse(f"{sql}: an aggregate is not allowed here")
        if isinstance(e, exp.Window):
            raise refuse(f"{sql}: window functions (OVER) are not supported")
        raise refuse(f"{sql}: subqueries are not supported")

    @staticmethod
    def _numeric(t: SqlType, sql: str) -> SqlType:
        if not (t.numeric or t.kind == "NULL"):
            raise UnsupportedSql(f"{sql}: {t.text()} is not a number")
        return t

    @staticmethod
    def _string(t: SqlType, sql: str) -> None:
        if t.kind not in ("VARCHAR", "NULL"):
            raise UnsupportedSql(f"{sql}: {t.text()} is not a string (CAST it AS STRING)")

    def _arith(self, a: SqlType, b: SqlType, sql: str, op: str) -> SqlType:
        self._numeric(a, sql)
        self._numeric(b, sql)
        kinds = {a.kind, b.kind}
        if "DOUBLE" in kinds:
            return DOUBLE
        if "DECIMAL" in kinds:
            # Exact, as Spark's and DuckDB's DECIMAL arithmetic: integers widen to DECIMAL(19, 0).
            pa_, sa = (a.precision, a.scale) if a.kind == "DECIMAL" else (19, 0)
            pb, sb = (b.precision, b.scale) if b.kind == "DECIMAL" else (19, 0)
            if op == "Mul":
                s = sa + sb
                p = pa_ + pb + 1
            else:
                s = max(sa, sb)
                p = max(pa_ - sa, pb - sb) + s + 1
            if p > 38:
                raise UnsupportedSql(f"{sql}: the exact result needs DECIMAL({p}, {s}), beyond 38 digits: CAST an "
                                     f"operand to a narrower DECIMAL or to DOUBLE")
            return SqlType("DECIMAL", p, s)
        if kinds <= {"INT", "NULL"}:
            return INT
        return BIGINT

    @staticmethod
    def _comparable(a: SqlType, b: SqlType, sql: str) -> None:
        if "NULL" in (a.kind, b.kind):
            return
        if a.numeric and b.numeric:
            return
        if a.kind != b.kind:
            raise UnsupportedSql(f"{sql}: cannot compare {a.text()} with {b.text()}")

    @staticmethod
    def _common(types: list[SqlType], sql: str) -> SqlType:
        known = [t for t in types if t.kind != "NULL"]
        if not known:
            return NULLTYPE
        if all(t == known[0] for t in known):
            return known[0]
        if all(t.numeric for t in known):
            if any(t.kind == "DOUBLE" for t in known):
                return DOUBLE
            if any(t.kind == "DECIMAL" for t in known):
                scale = max(t.scale for t in known)
                ints = max((t.precision - t.scale) if t.kind == "DECIMAL" else 19 for t in known)
                return SqlType("DECIMAL", min(38, ints + scale), scale)
            return BIGINT
        if all(t.kind == known[0].kind for t in known):
            return known[0] if known[0].kind != "VARCHAR" else VARCHAR
        raise UnsupportedSql(f"{sql}: branches of types {', '.join(t.text() for t in known)} have no common type")


# The typing rules of _Types.type, tried in order (a node takes the first whose kinds it is).
_TYPING: tuple[tuple[type | tuple[type, ...], Callable], ...] = (
    (exp.Column, _Types._column),
    (exp.Literal, _Types._literal),
    (exp.Boolean, lambda self, e, sql: BOOLEAN),
    (exp.Null, lambda self, e, sql: NULLTYPE),
    (exp.Neg, lambda self, e, sql: self._numeric(self.type(e.this), sql)),
    ((exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod), _Types._arith_node),
    ((exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE), _Types._compare),
    ((exp.And, exp.Or, exp.Not), _Types._logic),
    (exp.Is, _Types._is),
    (exp.In, _Types._in),
    (exp.Between, _Types._between),
    (exp.Like, _Types._like),
    (exp.Case, _Types._case),
    (exp.If, _Types._if),
    ((exp.TryCast, exp.Cast), _Types._cast),
    ((exp.Upper, exp.Lower, exp.Trim, exp.Length, exp.Substring), _Types._text_fn),
    ((exp.Concat, exp.DPipe), _Types._concat),
    (exp.Abs, lambda self, e, sql: self._numeric(self.type(e.this), sql)),
    (exp.Coalesce, lambda self, e, sql: self._common([self.type(x) for x in [e.this, *e.expressions]], sql)),
    ((exp.AggFunc, exp.Window, exp.Subquery, exp.Select, exp.Exists), _Types._refused),
)
