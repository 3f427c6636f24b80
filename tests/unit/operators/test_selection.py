"""The Python selection: the predicate switched at the control tuple's position, bad payloads skipped."""

from lazystandby.core.tuples import TupleBatch
from lazystandby.formats.control import encode as control_payload
from lazystandby.formats.ticks import Tick
from lazystandby.operators.selection import Selection


def test_selection_switches_predicate_at_the_control_tuple_position():
    ticks = [Tick("A", p, 100, 1, "X").encode() for p in (50.0, 150.0, 50.0, 150.0)]
    b = TupleBatch(first=1, streams=[1, 1, 0, 1, 1], seqs=[1, 2, 3, 3, 4],
                   payloads=[ticks[0], ticks[1], control_payload("price < 100"), ticks[2], ticks[3]])
    sel = Selection("price > 100")
    assert sel.process(b).tolist() == [1, 3]
    assert sel.switches == [(3, "price < 100")]


def test_selection_counts_unparseable_payloads_and_skips_them():
    b = TupleBatch(first=1, streams=[1, 1], seqs=[1, 2], payloads=[b"garbage", Tick("A", 200.0, 1, 1, "X").encode()])
    sel = Selection("price > 100")
    assert sel.process(b).tolist() == [1] and sel.unparseable == 1
