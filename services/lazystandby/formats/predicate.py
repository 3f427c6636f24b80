"""The tick example's predicates, e.g. `price > 100 AND venue = 'XTKS'`: a Spark SQL condition over the tick
fields, of comparisons of a field with a literal joined by AND, OR and NOT (and TRUE, FALSE, parentheses).

sqlglot reads the text (Spark's dialect, as the Spark operator and the truth-table checker read the same
text); what this module adds is the tick example's typing, which sqlglot knows nothing of: a numeric field
compares with a number, a text field with a quoted string, and nothing else is accepted. It compiles once,
into a function over one tick's split fields (`compile_predicate`) or into Arrow compute calls over a
batch's columns (`compile_columnar`, the data path), both closures over the parsed tree.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import sqlglot
from sqlglot import expressions as exp
from sqlglot.errors import ParseError, TokenError

from ..core.errors import PredicateError
from .ticks import FIELD_INDEX, FIELD_TYPE

# A comparison: (Python's operator on one tick, Arrow compute's function on a column).
_COMPARE = {exp.EQ: (operator.eq, "equal"), exp.NEQ: (operator.ne, "not_equal"), exp.LT: (operator.lt, "less"),
            exp.LTE: (operator.le, "less_equal"), exp.GT: (operator.gt, "greater"),
            exp.GTE: (operator.ge, "greater_equal")}

Row = Callable[[list[str]], bool]
Columns = Callable[[dict, int], object]


def _tree(text: str) -> exp.Expression:
    if not text.strip():
        raise PredicateError("predicate '': empty")
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except (ParseError, TokenError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        if first.startswith("Required keyword"):  # sqlglot's words for an operator with nothing after it
            first = "ends too early"
        raise PredicateError(f"predicate {text!r}: {first}") from None
    if tree is None or isinstance(tree, exp.Query):
        raise PredicateError(f"predicate {text!r}: not a condition")
    if isinstance(tree, exp.Alias):  # a word after a whole condition, which SQL would read as its alias
        raise PredicateError(f"predicate {text!r}: unexpected {tree.alias!r} after the condition")
    return tree


def _literal(node: exp.Expression) -> tuple[bool, str] | None:
    """(whether it is a string, its text) of a literal, a negative number's included (sqlglot reads `-5`
    as the negation of 5); None for anything else."""
    if isinstance(node, exp.Literal):
        return node.is_string, node.this
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and node.this.is_number:
        return False, f"-{node.this.this}"
    return None


class _Compiler:
    def __init__(self, text: str) -> None:
        self.text, self.fields = text, set()

    def fail(self, why: str) -> PredicateError:
        return PredicateError(f"predicate {self.text!r}: {why}")

    def compile(self, node: exp.Expression) -> tuple[Row, Columns]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        if isinstance(node, exp.Paren):
            return self.compile(node.this)
        if isinstance(node, (exp.And, exp.Or)):
            (ra, ca), (rb, cb) = self.compile(node.left), self.compile(node.right)
            if isinstance(node, exp.And):
                return (lambda f: ra(f) and rb(f)), (lambda c, n: pc.and_kleene(ca(c, n), cb(c, n)))
            return (lambda f: ra(f) or rb(f)), (lambda c, n: pc.or_kleene(ca(c, n), cb(c, n)))
        if isinstance(node, exp.Not):
            r, c_ = self.compile(node.this)
            return (lambda f: not r(f)), (lambda c, n: pc.invert(c_(c, n)))
        if isinstance(node, exp.Boolean):
            value = bool(node.this)
            return (lambda f: value), (lambda c, n: pa.array(np.full(n, value)))
        if type(node) in _COMPARE:
            return self.comparison(node)
        raise self.fail(f"{node.sql(dialect='spark')!r} is not a comparison of a field with a literal, AND, "
                        f"OR, NOT, TRUE or FALSE")

    def comparison(self, node: exp.Binary) -> tuple[Row, Columns]:
        import pyarrow.compute as pc

        col, lit = node.left, _literal(node.right)
        if not isinstance(col, exp.Column) or col.table or col.name not in FIELD_INDEX:
            raise self.fail(f"expected a field of {sorted(FIELD_INDEX)}, got {node.left.sql(dialect='spark')!r}")
        field = col.name
        if lit is None:
            raise self.fail(f"{field} compares with a literal, not {node.right.sql(dialect='spark')!r}")
        typ, index = FIELD_TYPE[field], FIELD_INDEX[field]
        is_string, literal = lit
        if typ is str:
            if not is_string:
                raise self.fail(f"{field} compares with a quoted string")
            value: object = literal
        else:
            if is_string:
                raise self.fail(f"{field} compares with a number")
            value = float(literal)
        py, arrow = _COMPARE[type(node)]
        self.fields.add(field)
        if typ is str:
            return (lambda f: py(f[index], value)), (lambda c, n: getattr(pc, arrow)(c[field], value))
        return (lambda f: py(typ(f[index]), value)), (lambda c, n: getattr(pc, arrow)(c[field], value))


def compile_predicate(text: str) -> Callable[[list[str]], bool]:
    """A function of the payload's fields (already split on ',') that says whether the tick is selected."""
    return _Compiler(text).compile(_tree(text))[0]


def compile_columnar(text: str) -> tuple[Callable[[dict, int], object], set[str]]:
    """Arrow compute over a batch: a function of ({field: column}, n) giving a boolean array of length n
    (null where a field is null: not selected), and the fields it reads (only those need parsing)."""
    compiler = _Compiler(text)
    fn = compiler.compile(_tree(text))[1]
    return fn, compiler.fields
