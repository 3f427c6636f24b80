import pytest

from lazystandby.check import compare, expected_outputs
from lazystandby.config import NodeConfig, load
from lazystandby.core.tuples import TupleBatch
from lazystandby.operators.predicate import PredicateError, compile_predicate
from lazystandby.operators.selection import Selection, control_payload
from lazystandby.records import Tick


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


def test_selection_switches_predicate_at_the_control_tuple_position():
    ticks = [Tick("A", p, 100, 1, "X").encode() for p in (50.0, 150.0, 50.0, 150.0)]
    b = TupleBatch(first=1, streams=[1, 1, 0, 1, 1], seqs=[1, 2, 3, 3, 4],
                   payloads=[ticks[0], ticks[1], control_payload("price < 100"), ticks[2], ticks[3]])
    sel = Selection("price > 100")
    assert sel.process(b) == [1, 3]
    assert sel.switches == [(3, "price < 100")]


def test_selection_counts_unparseable_payloads_and_skips_them():
    b = TupleBatch(first=1, streams=[1, 1], seqs=[1, 2], payloads=[b"garbage", Tick("A", 200.0, 1, 1, "X").encode()])
    sel = Selection("price > 100")
    assert sel.process(b) == [1] and sel.unparseable == 1


def test_config_layers_defaults_env_and_flags():
    cfg = load(["--bsize", "inf", "--role", "standby"], env={"LS_BSIZE": "5", "LS_CODEC": "zstd"})
    assert cfg.bsize_value is None and cfg.codec == "zstd" and cfg.name == "N'"
    assert load([], env={"LS_HEARTBEAT_INTERVAL": "0.5"}).heartbeat_interval == 0.5


@pytest.mark.parametrize("bad", [{"role": "boss"}, {"codec": "lz4"}, {"bsize": "0"}])
def test_config_refuses_bad_values(bad):
    with pytest.raises(ValueError):
        NodeConfig(**bad)


def test_truth_table_check_reports_loss_duplication_and_order():
    exp = expected_outputs(["I1", "I2"], seed=1, total=200, predicate="price > 100")
    good = [(i + 1, s, q) for i, (s, q) in enumerate(exp)]
    assert compare(exp, good).ok
    lost = compare(exp, good[:5] + good[6:])
    assert lost.lost == 1 and lost.oseq_gaps > 0 and lost.diff
    dup = compare(exp, good + [(len(good) + 1, *exp[3])])
    assert dup.duplicated == 1
    i1 = [i for i, (s, _) in enumerate(exp) if s == "I1"][:2]
    order = list(exp)
    order[i1[0]], order[i1[1]] = order[i1[1]], order[i1[0]]
    swapped = compare(exp, [(i + 1, s, q) for i, (s, q) in enumerate(order)])
    assert swapped.out_of_order >= 1 and swapped.lost == 0 and not swapped.ok
    across = compare(exp, [(i + 1, s, q) for i, (s, q) in enumerate(exp[:2][::-1] + exp[2:])])
    assert across.out_of_order == 0 and not across.same_order and not across.ok
    extra = compare(exp, good + [(len(good) + 1, "I1", 10**9)])
    assert extra.unexpected == 1 and extra.duplicated == 0 and not extra.ok


def test_control_records_are_validated_as_control_not_as_ticks():
    from lazystandby.core.seq import MalformedRecord
    from lazystandby.records import validate_control

    validate_control(control_payload("price > 5"))
    for bad in [b"price > 5", b'{"predicate": "colour = 1"}', b'{"x": 1}', b"\xff"]:
        with pytest.raises(MalformedRecord):
            validate_control(bad)
