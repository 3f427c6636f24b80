"""Nu's intake: what it admits into the link order and at which positions, what it refuses and why, and
the control records in force by position."""

from collections import Counter

import pytest

from lazystandby.config import NodeConfig
from lazystandby.core.errors import MalformedRecord
from lazystandby.core.seq import StreamRegistry
from lazystandby.core.tuples import TupleBatch
from lazystandby.formats import control
from lazystandby.node.intake import Intake
from lazystandby.sources.base import DeadLetters, Records

GOOD = b"A,10.5,100,1000,X"


def intake(**kw) -> Intake:
    cfg = NodeConfig(role="upstream", listen="nu", primary="n", streams="I1,I2", **kw)
    return Intake(cfg, Counter(), well_formed=False, dead_letters=DeadLetters(), late_data=DeadLetters())


def test_a_good_poll_is_numbered_from_the_next_position_with_injected_control_records_first():
    i = intake()
    i.inject_control(control.encode("price > 5"))
    batch = i.admit(Records(["I1", "I2"], [0, 1, 0], [1, 1, 2], [GOOD] * 3), first=11)
    assert (batch.first, batch.streams.tolist(), batch.seqs.tolist()) == (11, [0, 1, 2, 1], [11, 1, 1, 2])
    assert i.params_at(10) is None and i.params_at(14).pos == 11
    assert not i.dead_letters.items


def test_refused_records_are_dead_letters_with_their_reason_and_take_no_position():
    i = intake()
    poll = Records(["I1", "I9"], [0, 0, 1, 0], [1, 1, 1, 2], [GOOD, GOOD, GOOD, b"not,a,tick"])
    batch = i.admit(poll, first=1)
    assert (len(batch), batch.seqs.tolist()) == (1, [1])
    reasons = [why for why, _ in i.dead_letters.items]
    assert len(reasons) == 3 and "is not above 1" in reasons[0]
    assert [(r.stream, r.seq) for _, r in i.dead_letters.items] == [("I1", 1), ("I9", 1), ("I1", 2)]
    assert i.counters["dead_letters"] == 3
    # The sequence check goes on from what was admitted: I1's seq 2 (refused for its format) may come again.
    again = i.admit(Records(["I1"], [0], [2], [GOOD]), first=2)
    assert again.seqs.tolist() == [2]


def test_a_pipeline_takes_no_predicate_switch():
    i = intake(pipeline="examples/sensors.sql")
    with pytest.raises(MalformedRecord, match="takes no predicate switch"):
        i.inject_control(control.encode("price > 5"))


def test_a_restart_resumes_the_sequence_check_and_the_control_records_in_force():
    i = intake()
    held = TupleBatch(5, [1, StreamRegistry.CONTROL, 2], [7, 6, 3], [GOOD, control.encode("price > 9"), GOOD])
    i.restore(held, {"I1": 7, "I2": 3}, (2, control.encode("price > 1")))
    assert i.params_at(5).pos == 2 and i.params_at(6).pos == 6
    assert not len(i.admit(Records(["I1"], [0], [7], [GOOD]), first=8))  # seq 7 is not above 7
    i.forget_params(trimmed=6)
    assert [p.pos for p in i.params] == [6]
