"""A query over the ticks, declared once: today's selection, or a keyed window aggregation on event time.

One text form serves the CLI, env and compose, and `Query.text()` writes it back exactly (`parse_query`
reads its output as it was):

    select [where <predicate>]
    window <size> [slide <slide>] [lateness <lateness>] by <key>[, <key> ...]
           agg <aggregate>[, <aggregate> ...] [where <predicate>]

Durations are whole milliseconds, seconds or minutes (`500ms`, `1s`, `2m`); an aggregate is `count` or
`sum|min|max|avg(<column>)` over a numeric field. Windows are tumbling (no slide, or a slide equal to the
size) or sliding, on the tick's event time `ts`; a slide must divide the size, so that every tick lies in
exactly size / slide windows, aligned on the epoch. The predicate is the selection's language
(formats/predicate.py). `EXAMPLES` names the two queries a user starts from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import PredicateError, QueryError
from .predicate import compile_predicate
from .ticks import FIELD_TYPE

AGGREGATES = ("count", "sum", "min", "max", "avg")
_NUMERIC = tuple(name for name, typ in FIELD_TYPE.items() if typ in (int, float) and name != "ts")
_UNITS = {"ms": 1, "s": 1000, "m": 60_000}
_DURATION = re.compile(r"([0-9]+)(ms|s|m)")
_AGGREGATE = re.compile(r"(count)|(sum|min|max|avg)\(\s*([a-z_]+)\s*\)")


@dataclass(frozen=True, slots=True)
class Aggregate:
    fn: str  # one of AGGREGATES
    column: str = ""  # a numeric field; empty for count

    @property
    def name(self) -> str:
        """The result column's name: `count`, `avg_price`."""
        return self.fn if self.fn == "count" else f"{self.fn}_{self.column}"

    def text(self) -> str:
        return self.fn if self.fn == "count" else f"{self.fn}({self.column})"


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
        where = f" where {self.where}" if self.where else ""
        if self.kind == "select":
            return f"select{where}"
        parts = [f"window {_duration_text(self.size_ms)}"]
        if self.slide_ms != self.size_ms:
            parts.append(f"slide {_duration_text(self.slide_ms)}")
        if self.lateness_ms:
            parts.append(f"lateness {_duration_text(self.lateness_ms)}")
        parts.append("by " + ", ".join(self.keys))
        parts.append("agg " + ", ".join(a.text() for a in self.aggregates))
        return " ".join(parts) + where


EXAMPLES = {
    "select": "select where price > 100",
    "window": "window 1s by symbol agg count, avg(price), max(price) where price > 100",
}


def parse_query(text: str) -> Query:
    """The query `text` declares (or the example it names); QueryError says what is wrong and where."""
    text = EXAMPLES.get(text.strip(), text).strip()
    body, where = _split_where(text)
    words = body.split(None, 1)
    if not words or words[0] not in ("select", "window"):
        raise QueryError(f"query {text!r}: starts with select or window (or names one of {sorted(EXAMPLES)})")
    if words[0] == "select":
        if len(words) > 1:
            raise QueryError(f"query {text!r}: a select takes only a where clause, not {words[1]!r}")
        return Query("select", where=where)
    return _window(text, words[1] if len(words) > 1 else "", where)


def _split_where(text: str) -> tuple[str, str]:
    """The query before ` where `, and the predicate after it (checked here: it is the selection's)."""
    m = re.search(r"(^|\s)where\s", text)
    if not m:
        return text, ""
    body, where = text[:m.start()].strip(), text[m.end():].strip()
    try:
        compile_predicate(where)
    except PredicateError as e:
        raise QueryError(f"query {text!r}: {e}") from None
    return body, where


def _window(text: str, rest: str, where: str) -> Query:
    m = re.fullmatch(r"(\S+)(?:\s+slide\s+(\S+))?(?:\s+lateness\s+(\S+))?\s+by\s+(.+?)\s+agg\s+(.+)", rest)
    if not m:
        raise QueryError(f"query {text!r}: expected window <size> [slide <d>] [lateness <d>] by <keys> agg "
                         f"<aggregates> [where <predicate>]")
    size = _duration(text, m.group(1))
    slide = _duration(text, m.group(2)) if m.group(2) else size
    lateness = _duration(text, m.group(3), zero=True) if m.group(3) else 0
    if slide > size or size % slide:
        raise QueryError(f"query {text!r}: the slide ({slide} ms) must divide the size ({size} ms)")
    keys = tuple(k.strip() for k in m.group(4).split(","))
    for k in keys:
        if k not in FIELD_TYPE or k == "ts":
            raise QueryError(f"query {text!r}: key {k!r} is not a field to group by "
                             f"({', '.join(n for n in FIELD_TYPE if n != 'ts')})")
    if len(set(keys)) != len(keys):
        raise QueryError(f"query {text!r}: a key is named twice")
    aggregates = tuple(_aggregate(text, a.strip()) for a in m.group(5).split(","))
    if len({a.name for a in aggregates}) != len(aggregates):
        raise QueryError(f"query {text!r}: an aggregate is named twice")
    return Query("window", where=where, keys=keys, size_ms=size, slide_ms=slide, lateness_ms=lateness,
                 aggregates=aggregates)


def _aggregate(text: str, a: str) -> Aggregate:
    m = _AGGREGATE.fullmatch(a)
    if not m:
        raise QueryError(f"query {text!r}: aggregate {a!r} is not count or one of sum, min, max, avg(<column>)")
    if m.group(1):
        return Aggregate("count")
    fn, column = m.group(2), m.group(3)
    if column not in _NUMERIC:
        raise QueryError(f"query {text!r}: {fn}({column}) needs a numeric column ({', '.join(_NUMERIC)})")
    return Aggregate(fn, column)


def _duration(text: str, d: str, *, zero: bool = False) -> int:
    m = _DURATION.fullmatch(d)
    if not m or (int(m.group(1)) == 0 and not zero):
        raise QueryError(f"query {text!r}: duration {d!r} is not a whole number of ms, s or m"
                         f"{'' if zero else ' above 0'}")
    return int(m.group(1)) * _UNITS[m.group(2)]


def _duration_text(ms: int) -> str:
    for unit in ("m", "s"):
        if ms % _UNITS[unit] == 0:
            return f"{ms // _UNITS[unit]}{unit}"
    return f"{ms}ms"
