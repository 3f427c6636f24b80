"""A small, safe boolean-expression language over tick fields, e.g. `price > 100 AND venue = 'XTKS'`.

It is a subset of Spark SQL, so the same configured text drives the Python operator, the Spark operator
and the truth-table checker. Compiled once, either into a Python function over one tick's split fields
(`compile_predicate`) or into Arrow compute calls over a batch's columns (`compile_columnar`, the data
path); the generated code comes only from validated tokens, with literals rendered by repr().
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..core.errors import PredicateError
from .ticks import FIELD_INDEX, FIELD_TYPE

_TOKEN = re.compile(
    r"\s*(?:(?P<num>-?\d+(?:\.\d+)?)|(?P<str>'(?:[^']|'')*')|(?P<op><=|>=|!=|<>|=|<|>)"
    r"|(?P<paren>[()])|(?P<word>[A-Za-z_][A-Za-z_0-9]*))"
)
_OPS = {"=": "==", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise PredicateError(f"predicate {text!r}: cannot read from position {pos}: {text[pos:pos+20]!r}")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


_ARROW_OPS = {"==": "equal", "!=": "not_equal", "<": "less", "<=": "less_equal", ">": "greater",
              ">=": "greater_equal"}


class _Parser:
    def __init__(self, text: str, *, columnar: bool = False) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.columnar = columnar
        self.fields: set[str] = set()

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> tuple[str, str]:
        t = self.peek()
        if t is None:
            raise PredicateError(f"predicate {self.text!r}: ends too early")
        self.i += 1
        return t

    def word(self, w: str) -> bool:
        t = self.peek()
        if t and t[0] == "word" and t[1].upper() == w:
            self.i += 1
            return True
        return False

    def expr(self) -> str:
        parts = [self.term()]
        while self.word("OR"):
            parts.append(self.term())
        return self._join(parts, "or")

    def _join(self, parts: list[str], op: str) -> str:
        if not self.columnar:
            return "(" + f" {op} ".join(parts) + ")"
        out = parts[0]
        for p in parts[1:]:
            out = f"_{op}({out}, {p})"
        return out

    def term(self) -> str:
        parts = [self.factor()]
        while self.word("AND"):
            parts.append(self.factor())
        return self._join(parts, "and")

    def factor(self) -> str:
        if self.word("NOT"):
            return f"_not({self.factor()})" if self.columnar else f"(not {self.factor()})"
        if self.word("TRUE"):
            return "_const(True, n)" if self.columnar else "True"
        if self.word("FALSE"):
            return "_const(False, n)" if self.columnar else "False"
        kind, val = self.take()
        if kind == "paren" and val == "(":
            inner = self.expr()
            if self.take() != ("paren", ")"):
                raise PredicateError(f"predicate {self.text!r}: missing ')'")
            return inner
        if kind != "word" or val not in FIELD_INDEX:
            raise PredicateError(f"predicate {self.text!r}: expected a field of {sorted(FIELD_INDEX)}, got {val!r}")
        field = val
        okind, op = self.take()
        if okind != "op":
            raise PredicateError(f"predicate {self.text!r}: expected a comparison after {field}, got {op!r}")
        lkind, lit = self.take()
        typ = FIELD_TYPE[field]
        if typ is str:
            if lkind != "str":
                raise PredicateError(f"predicate {self.text!r}: {field} compares with a quoted string")
            value: object = lit[1:-1].replace("''", "'")
            access = f"f[{FIELD_INDEX[field]}]"
        else:
            if lkind != "num":
                raise PredicateError(f"predicate {self.text!r}: {field} compares with a number")
            value = float(lit)
            access = f"{typ.__name__}(f[{FIELD_INDEX[field]}])"
        if self.columnar:
            self.fields.add(field)
            return f"_cmp({_ARROW_OPS[_OPS[op]]!r}, c[{field!r}], {value!r})"
        return f"({access} {_OPS[op]} {value!r})"

    def parse(self) -> str:
        code = self.expr()
        if self.peek() is not None:
            raise PredicateError(f"predicate {self.text!r}: unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return code


def compile_predicate(text: str) -> Callable[[list[str]], bool]:
    """A function of the payload's fields (already split on ',') that says whether the tick is selected."""
    code = _Parser(text).parse()
    fn = eval(f"lambda f: {code}", {"__builtins__": {}, "int": int, "float": float})  # noqa: S307
    return fn


def compile_columnar(text: str) -> tuple[Callable[[dict, int], object], set[str]]:
    """Arrow compute over a batch: a function of ({field: column}, n) giving a boolean array of length n
    (null where a field is null: not selected), and the fields it reads (only those need parsing)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    parser = _Parser(text, columnar=True)
    code = parser.parse()
    env = {
        "__builtins__": {},
        "_and": pc.and_kleene,
        "_or": pc.or_kleene,
        "_not": pc.invert,
        "_cmp": lambda op, col, value: getattr(pc, op)(col, value),
        "_const": lambda value, n: pa.array(np.full(n, value)),
    }
    return eval(f"lambda c, n: {code}", env), parser.fields  # noqa: S307
