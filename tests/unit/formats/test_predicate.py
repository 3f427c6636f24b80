"""The predicate language: what it accepts, and a reason for what it refuses."""

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
])
def test_predicate_language(expr, tick, want):
    assert compile_predicate(expr)(fields(**tick)) is want


@pytest.mark.parametrize("expr", ["price >", "colour = 'red'", "price > 'x'", "symbol = 3", "price > 1 junk",
                                  "__import__('os')", "(price > 1"])
def test_bad_predicates_are_refused_with_a_reason(expr):
    with pytest.raises(PredicateError):
        compile_predicate(expr)
