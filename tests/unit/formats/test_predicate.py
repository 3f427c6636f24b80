"""The tick example's predicates (Spark SQL conditions read by sqlglot): what they accept, a reason for what
they refuse, and the row and columnar forms agreeing."""

import re

import pytest

from lazystandby.core.errors import PredicateError
from lazystandby.formats.predicate import compile_predicate
from lazystandby.formats.ticks import Tick


def fields(**kw):
    t = Tick(**{"symbol": "ACME", "price": 101.5, "volume": 300, "ts": 1, "venue": "XTKS", **kw})
    return t.encode().decode().split(",")


@pytest.mark.parametrize("expr,tick,want", [
    ("price > 100", {}, True),
    ("price > 100", {"price": 99.0}, False),
    ("price > 100 AND volume >= 500", {}, False),
    ("price > 100 OR volume >= 500", {"price": 1.0, "volume": 600}, True),
    ("NOT (venue = 'XTKS')", {}, False),
    ("symbol <> 'ACME' or (price <= 101.5 and ts = 1)", {}, True),
    ("price > -5 AND NOT FALSE", {}, True),
    ("volume >= 1e3", {"volume": 1000}, True),
    ("venue = 'X\\'Y'", {"venue": "X'Y"}, True),  # Spark's escape; 'X''Y' is 'X' 'Y' joined, refused
])
def test_predicate_language(expr, tick, want):
    assert compile_predicate(expr)(fields(**tick)) is want


@pytest.mark.parametrize("expr", ["price >", "colour = 'red'", "price > 'x'", "symbol = 3", "price > 1 junk",
                                  "__import__('os')", "(price > 1"])
def test_bad_predicates_are_refused_with_a_reason(expr):
    with pytest.raises(PredicateError):
        compile_predicate(expr)


@pytest.mark.parametrize("expr, says", [
    ("price >", "ends too early"), ("price > 1 junk", "unexpected 'junk'"), ("colour = 'red'", "got 'colour'"),
    ("price > volume", "compares with a literal"), ("price + 1 > 2", "got 'price + 1'"),
    ("SELECT 1", "not a condition"), ("", "empty"), ("upper(symbol) = 'A'", "got 'UPPER(symbol)'"),
    ("venue = 'X''Y'", "compares with a literal"),
])
def test_each_refusal_names_what_it_refuses(expr, says):
    with pytest.raises(PredicateError, match=re.escape(says)):
        compile_predicate(expr)


def test_the_columnar_form_selects_exactly_the_ticks_the_row_form_selects():
    import pyarrow as pa

    from lazystandby.formats.predicate import compile_columnar

    ticks = [fields(price=p, volume=v, venue=w) for p in (99.5, 100.0, 101.5) for v in (100, 600)
             for w in ("XTKS", "XNYS")]
    for expr in ("price > 100 AND volume >= 500", "NOT (venue = 'XTKS') OR price <= 100", "TRUE", "price <> 100"):
        fn, used = compile_columnar(expr)
        cols = {"price": pa.array([float(t[1]) for t in ticks]), "volume": pa.array([int(t[2]) for t in ticks]),
                "venue": pa.array([t[4] for t in ticks])}
        assert used <= set(cols)
        want = [compile_predicate(expr)(t) for t in ticks]
        assert fn(cols, len(ticks)).to_pylist() == want, expr
