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


def test_the_generator_refuses_a_pipeline_it_cannot_read_in_one_line(tmp_path, capsys):
    from lazystandby.sources.kafka_generator import main

    bad = tmp_path / "bad.sql"
    bad.write_text("CREATE TABLE t (a BIGINT) WITH ('topic' = 't', 'format' = 'json'); SELECT b FROM t;")
    assert main(["--bootstrap", "127.0.0.1:1", "--pipeline", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "b" in err
    assert main(["--bootstrap", "127.0.0.1:1", "--pipeline", str(tmp_path / "missing.sql")]) == 2
    assert "cannot read the pipeline file" in capsys.readouterr().err
