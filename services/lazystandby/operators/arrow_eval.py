"""A planned expression (formats/sql.py) evaluated over a batch's Arrow columns with pyarrow compute:
one kernel call per node of the expression for the whole batch, never a Python step per row.

sqlglot plans no evaluation and pyarrow compute takes no SQL, so this module maps one to the other; the
semantics follow the plan's normalised tree (Spark SQL's): NULL in, NULL out; AND, OR and NOT in
three-valued logic; `/` in DOUBLE, NULL for a zero divisor; MOD with the dividend's sign, NULL for a zero
divisor; CAST as try_cast (NULL where a value does not convert); integer arithmetic checked (an overflow
fails the call, which fails the node: a value this engine cannot compute with).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from ..formats.schema import SqlType
from ..formats.sql import cast_type

Columns = Mapping[str, pa.Array]


def evaluate(e: exp.Expression, cols: Columns, n: int) -> pa.Array:
    """The value of `e` for each of the `n` rows whose columns are `cols`."""
    out = _eval(e, cols, n)
    if isinstance(out, pa.Scalar):
        return pa.array(np.full(n, None) if not out.is_valid else [out.as_py()] * n, out.type if out.is_valid
                        else pa.null()) if n else pa.array([], out.type)
    return out


def _lit(e: exp.Literal) -> pa.Scalar:
    if e.is_string:
        return pa.scalar(e.name, pa.string())
    text = e.name
    if "e" in text.lower():
        return pa.scalar(float(text), pa.float64())
    if "." in text:
        d = decimal.Decimal(text)
        scale = max(0, -d.as_tuple().exponent)
        return pa.scalar(d, pa.decimal128(max(len(d.as_tuple().digits), scale, 1), scale))
    return pa.scalar(int(text), pa.int64())


def _eval(e: exp.Expression, c: Columns, n: int):
    """`e` over the columns `c` (n rows): an array or a scalar, by the rule of its node's kind (`_RULES`)."""
    binary = _BINARY.get(type(e))
    if binary is not None:
        return binary(_eval(e.this, c, n), _eval(e.expression, c, n))
    for kind in type(e).__mro__:
        rule = _RULES.get(kind)
        if rule is not None:
            return rule(e, c, n)
    raise NotImplementedError(f"{e.sql()} has no evaluator")  # the planner refuses it first


def _mod(e: exp.Mod, c: Columns, n: int):
    a, b = _widen(_eval(e.this, c, n), _eval(e.expression, c, n))
    b = _nonzero(b)
    if pa.types.is_floating(a.type) or pa.types.is_floating(b.type):
        a, b = _double(a), _double(b)
        return pc.subtract(a, pc.multiply(b, pc.trunc(pc.divide(a, b))))
    return pc.subtract(a, pc.multiply(b, pc.divide(a, b)))  # integer divide truncates toward zero


def _in(e: exp.In, c: Columns, n: int):
    v = _eval(e.this, c, n)
    out = None
    for item in e.expressions:
        eq = _cmp("equal")(v, _eval(item, c, n))
        out = eq if out is None else pc.or_kleene(out, eq)
    return out


def _between(e: exp.Between, c: Columns, n: int):
    v = _eval(e.this, c, n)
    return pc.and_kleene(_cmp("greater_equal")(v, _eval(e.args["low"], c, n)),
                         _cmp("less_equal")(v, _eval(e.args["high"], c, n)))


def _concat(e: exp.Expression, c: Columns, n: int):
    parts = e.expressions if isinstance(e, exp.Concat) else [e.this, e.expression]
    return pc.binary_join_element_wise(*[_array(_eval(p, c, n), n).cast(pa.string()) for p in parts], "")


def _unary(fn: Callable) -> Callable:
    """The rule of a node that applies `fn` to its one operand."""
    return lambda e, c, n: fn(_eval(e.this, c, n))


def _both(fn: Callable) -> Callable:
    """The rule of a node that applies `fn` to its two operands."""
    return lambda e, c, n: fn(_eval(e.this, c, n), _eval(e.expression, c, n))


def _cmp(fn: str) -> Callable:
    def run(a, b):
        a, b = _widen(a, b)
        return getattr(pc, fn)(a, b)

    return run


_BINARY = {
    exp.Add: lambda a, b: pc.add_checked(*_widen(a, b)),
    exp.Sub: lambda a, b: pc.subtract_checked(*_widen(a, b)),
    exp.Mul: lambda a, b: pc.multiply_checked(*_widen(a, b)),
    exp.EQ: _cmp("equal"), exp.NEQ: _cmp("not_equal"), exp.GT: _cmp("greater"), exp.GTE: _cmp("greater_equal"),
    exp.LT: _cmp("less"), exp.LTE: _cmp("less_equal"),
}


def _widen(a, b):
    """Operands in one type where Arrow would not choose it as Spark does: integers with DECIMALs as
    DECIMAL(19, 0), anything with a DOUBLE as DOUBLE; a NULL literal as the other side's type."""
    ta, tb = a.type, b.type
    if pa.types.is_null(ta) and not pa.types.is_null(tb):
        return pa.scalar(None, tb) if isinstance(a, pa.Scalar) else a.cast(tb), b
    if pa.types.is_null(tb) and not pa.types.is_null(ta):
        return a, pa.scalar(None, ta) if isinstance(b, pa.Scalar) else b.cast(ta)
    if (pa.types.is_floating(ta) or pa.types.is_floating(tb)) and ta != tb:
        return _double(a), _double(b)
    if pa.types.is_decimal(ta) and pa.types.is_integer(tb):
        return a, b.cast(pa.decimal128(19, 0))
    if pa.types.is_integer(ta) and pa.types.is_decimal(tb):
        return a.cast(pa.decimal128(19, 0)), b
    if pa.types.is_integer(ta) and pa.types.is_integer(tb) and ta != tb:
        return a.cast(pa.int64()), b.cast(pa.int64())
    return a, b


def _double(v):
    return v if pa.types.is_floating(v.type) else v.cast(pa.float64())


def _nonzero(v):
    """A divisor with its zeros made NULL (the quotient is then NULL, as in Spark without ANSI mode)."""
    if isinstance(v, pa.Scalar):
        return v if not v.is_valid or v.as_py() != 0 else pa.scalar(None, v.type)
    return pc.if_else(pc.equal(v, pa.scalar(0).cast(v.type) if not pa.types.is_decimal(v.type) else
                               pa.scalar(decimal.Decimal(0), v.type)), pa.scalar(None, v.type), v)


def _array(v, n: int) -> pa.Array:
    if isinstance(v, pa.Scalar):
        return pa.array([v.as_py()] * n, v.type) if not pa.types.is_null(v.type) else pa.nulls(n)
    return v


def _common(vals: list[pa.Array]) -> list[pa.Array]:
    types = [v.type for v in vals if not pa.types.is_null(v.type)]
    if not types:
        return vals
    target = types[0]
    if any(pa.types.is_floating(t) for t in types):
        target = pa.float64()
    elif any(pa.types.is_decimal(t) for t in types):
        scale = max(t.scale for t in types if pa.types.is_decimal(t))
        ints = max((t.precision - t.scale) if pa.types.is_decimal(t) else 19 for t in types)
        target = pa.decimal128(min(38, ints + scale), scale)
    elif all(pa.types.is_integer(t) for t in types):
        target = pa.int64() if any(t != types[0] for t in types) else types[0]
    return [v.cast(target) for v in vals]


def _case(branches, default, c: Columns, n: int) -> pa.Array:
    values = [_array(_eval(then, c, n), n) for _, then in branches]
    values.append(_array(_eval(default, c, n), n) if default is not None else pa.nulls(n))
    values = _common(values)
    out = values[-1]
    for (cond, _), value in zip(reversed(branches), reversed(values[:-1]), strict=True):
        test = pc.fill_null(_array(_eval(cond, c, n), n), False)
        out = pc.if_else(test, value, out)
    return out


def _substring(e: exp.Substring, c: Columns, n: int) -> pa.Array:
    """Spark's substring(s, pos[, len]): 1-based; a position of 0 is 1; a negative one counts from the end."""
    s = _eval(e.this, c, n)
    start = e.args.get("start")
    length = e.args.get("length")
    if not isinstance(start, exp.Literal) or (length is not None and not isinstance(length, exp.Literal)):
        raise NotImplementedError("substring takes literal positions")
    pos = int(start.name)
    begin = pos - 1 if pos > 0 else (pos if pos < 0 else 0)
    if length is None:
        return pc.utf8_slice_codeunits(s, begin)
    count = int(length.name)
    if count <= 0:
        return pc.if_else(pc.is_null(s), pa.scalar(None, pa.string()), pa.scalar("", pa.string()))
    stop = begin + count
    if begin < 0 <= stop:
        return pc.utf8_slice_codeunits(s, begin)
    return pc.utf8_slice_codeunits(s, begin, stop)


def try_cast(v: pa.Array, to: SqlType) -> pa.Array:
    """`v` in type `to`, NULL where a value does not convert (Spark's try_cast). Numbers to integers
    truncate toward zero; text to numbers reads the whole text as a number or gives NULL."""
    target = to.arrow
    if v.type == target:
        return v
    if pa.types.is_null(v.type):
        return pa.nulls(len(v), target)
    if to.kind == "VARCHAR":
        if pa.types.is_timestamp(v.type):
            return pc.strftime(v, "%Y-%m-%d %H:%M:%S")
        if pa.types.is_boolean(v.type):
            return pc.if_else(v, "true", "false")
        return v.cast(pa.string())
    if pa.types.is_string(v.type):
        text = pc.utf8_trim_whitespace(v)
        if to.kind == "BOOLEAN":
            low = pc.utf8_lower(text)
            return pc.if_else(pc.equal(low, "true"), True, pc.if_else(pc.equal(low, "false"), False,
                                                                     pa.scalar(None, pa.bool_())))
        pattern = r"^[+-]?[0-9]+$" if to.kind in ("BIGINT", "INT") else \
            r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
        ok = pc.fill_null(pc.match_substring_regex(text, pattern), False)
        safe_text = pc.if_else(ok, text, "0")
        numbers = safe_text.cast(pa.float64()) if to.kind == "DOUBLE" else \
            safe_text.cast(pa.decimal128(38, 10)) if to.kind == "DECIMAL" else safe_text
        return pc.if_else(ok, _cast_numbers(numbers, to), pa.scalar(None, target))
    return _cast_numbers(v, to)


def _cast_numbers(v: pa.Array, to: SqlType) -> pa.Array:
    """A number cast to another number's type; NULL where it does not fit."""
    target = to.arrow
    try:
        return v.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    out = []
    for x in v.to_pylist():  # the rare values that do not fit, one by one
        try:
            out.append(pa.scalar(x).cast(target).as_py() if x is not None else None)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError):
            if pa.types.is_integer(target) and isinstance(x, float | decimal.Decimal):
                try:
                    out.append(pa.scalar(int(x)).cast(target).as_py())
                    continue
                except (pa.ArrowInvalid, OverflowError, ValueError):
                    pass
            out.append(None)
    return pa.array(out, target)


# One evaluator per kind of node (looked up along the node's classes: TRY_CAST finds CAST's).
_RULES: dict[type, Callable] = {
    exp.Column: lambda e, c, n: c[e.name],
    exp.Literal: lambda e, c, n: _lit(e),
    exp.Boolean: lambda e, c, n: pa.scalar(bool(e.this), pa.bool_()),
    exp.Null: lambda e, c, n: pa.scalar(None, pa.null()),
    exp.Paren: lambda e, c, n: _eval(e.this, c, n),
    exp.Neg: _unary(pc.negate_checked),
    exp.Div: _both(lambda a, b: pc.divide(_double(a), _nonzero(_double(b)))),
    exp.Mod: _mod,
    exp.And: _both(pc.and_kleene),
    exp.Or: _both(pc.or_kleene),
    exp.Not: _unary(pc.invert),
    exp.Is: _unary(pc.is_null),
    exp.In: _in,
    exp.Between: _between,
    exp.Like: lambda e, c, n: pc.match_like(_eval(e.this, c, n), e.expression.name),
    exp.Case: lambda e, c, n: _case([(b.this, b.args["true"]) for b in e.args.get("ifs") or []],
                                    e.args.get("default"), c, n),
    exp.If: lambda e, c, n: _case([(e.this, e.args["true"])], e.args.get("false"), c, n),
    exp.Cast: lambda e, c, n: try_cast(_array(_eval(e.this, c, n), n), cast_type(e.args["to"])),
    exp.Upper: _unary(pc.utf8_upper),
    exp.Lower: _unary(pc.utf8_lower),
    exp.Trim: _unary(pc.utf8_trim_whitespace),
    exp.Length: _unary(pc.utf8_length),
    exp.Substring: lambda e, c, n: _substring(e, c, n),
    exp.Concat: _concat,
    exp.DPipe: _concat,
    exp.Abs: _unary(pc.abs_checked),
    exp.Coalesce: lambda e, c, n: pc.coalesce(*_common([_array(_eval(x, c, n), n) for x in [e.this, *e.expressions]])),
}
