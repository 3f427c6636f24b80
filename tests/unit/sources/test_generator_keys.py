"""The generator's key cardinality: many distinct symbols, each with its own price walk."""

import pytest

from lazystandby.sources.generator import KEYS_MAX, TickStream, interleave


def fields(payloads):
    return [p.split(b",") for p in payloads.to_pylist()]


def test_ten_keys_walk_exactly_as_the_named_symbols_do():
    """The vectorised walk of `keys` gives, for ten keys, the very prices the per-symbol loop gives."""
    named, keyed = TickStream("I1", 7), TickStream("I1", 7, keys=10)
    a, b = fields(named.take(20_000)[1]), fields(keyed.take(20_000)[1])
    assert [f[1:] for f in a] == [f[1:] for f in b]  # price, volume, ts, venue
    assert {f[0] for f in b} == {f"K{i}".encode() for i in range(10)}


def test_a_million_keys_are_drawn_and_the_default_is_unchanged():
    ticks = list(interleave(["I1", "I2"], 100_000, 7, keys=KEYS_MAX))
    assert len({p.split(b",")[0] for _, _, p in ticks}) > 90_000
    assert list(interleave(["I1", "I2"], 2, 7))[0][2] == b"HOOLI,102.92,2200,1764000000004,XNAS"
    with pytest.raises(ValueError, match="keys"):
        TickStream("I1", keys=KEYS_MAX + 1)
