"""Poison inputs: found by bisecting the failed call, the same whatever the batches, and the pipeline
goes on exact through a kill of the primary (in-process nodes, the gRPC transport on loopback)."""

from __future__ import annotations

import numpy as np
import pytest

from lazystandby.core.tuples import TupleBatch
from lazystandby.node.quarantine import bisect
from lazystandby.operators.selection import Selection

POISON = b",4900,"  # an operator that cannot compute with one volume: a value it fails on, not its engine


class Poisoned(Selection):
    """The selection, except that a call holding a tick of volume 4900 raises (as a cast or a division would)."""

    def __init__(self, predicate: str, every: int = 0) -> None:
        super().__init__(predicate)
        self.calls = 0

    def process(self, batch: TupleBatch):
        self.calls += 1
        if any(POISON in p for p in batch.payload_list()):
            raise ValueError("cannot compute with a volume of 4900")
        return super().process(batch)


class Broken(Selection):
    def process(self, batch):
        raise MemoryError("the engine is out of memory")


def ticks(n: int) -> TupleBatch:
    from lazystandby.sources.generator import Interleaved

    idx, seqs, payloads = Interleaved(["I1", "I2"]).take(n)
    return TupleBatch(1, idx + 1, seqs, payloads)


def truth(batch: TupleBatch) -> tuple[list[int], list[int]]:
    """Positions selected and positions poisoned, tuple by tuple."""
    plain = Selection("price > 100")
    poisoned = [batch.first + i for i, p in enumerate(batch.payload_list()) if POISON in p]
    keep = [batch.first + int(i) for i in plain.process(batch) if batch.first + int(i) not in poisoned]
    return keep, poisoned


@pytest.mark.parametrize("cuts", [[4096], [1000, 3096], [1, 2, 3, 4090], [17] * 240 + [16]])
def test_bisect_quarantines_exactly_the_inputs_that_fail_alone_however_the_batch_is_cut(cuts):
    whole = ticks(sum(cuts))
    keep, poisoned = truth(whole)
    assert 0 < len(poisoned) < len(whole) // 4
    op, got, found, start = Poisoned("price > 100"), [], [], whole.first
    for n in cuts:
        piece = whole.slice(start, start + n)
        try:
            sel = np.asarray(op.process(piece))
        except ValueError as e:
            assert op.input_fault(e)
            sel, q = bisect(op, piece, e)
            found += q
        got += [piece.first + int(i) for i in sel]
        start += n
    assert got == keep
    assert [q.pos for q in found] == poisoned
    assert all(q.error == "ValueError: cannot compute with a volume of 4900" for q in found)


def test_a_failure_that_follows_no_input_is_not_quarantined_but_raised():
    op = Broken("price > 100")
    assert not op.input_fault(MemoryError())
    with pytest.raises(MemoryError):
        bisect(op, ticks(64), ValueError("first call"))


def test_a_poison_input_in_flight_when_the_primary_is_killed_is_quarantined_at_the_same_positions():
    from lazystandby.harness.check import compare, expected_outputs
    from lazystandby.harness.inprocess import InProcessTopology

    total = 20_000
    whole = ticks(total)  # the link order the generator source makes
    _, poisoned = truth(whole)
    names = {1: "I1", 2: "I2"}
    skip = {(names[int(whole.streams[p - 1])], int(whole.seqs[p - 1])) for p in poisoned}
    want = [k for k in expected_outputs(["I1", "I2"], seed=7, total=total, predicate="price > 100") if k not in skip]
    with InProcessTopology("grpc", operator=Poisoned, total=total, rate=20_000.0) as t:
        assert t.wait(lambda: t.nodes["n"].counters["quarantined_tuples"] > 0)
        t.kill("n")  # with poison inputs in flight: the load is on, each call holds some
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through >= len(want), 60)
        got = [(o, names[s], q) for o, s, q, _ in t.sink.rows]
        n, n2 = t.nodes["n"].snapshot(), t.nodes["n2"].snapshot()
    check = compare(want, got)  # every input's output but the poisoned ones', once each, in order
    assert check.ok, check.diff
    by_n = {q["pos"] for q in n["quarantined"]}
    by_n2 = {q["pos"] for q in n2["quarantined"]}
    # Each node quarantined only poison inputs; what N' skipped as covered N had processed, so between them
    # every one; and where both processed the same inputs, both chose the same positions.
    assert by_n and by_n2 and by_n <= set(poisoned) and by_n2 <= set(poisoned)
    assert by_n | by_n2 == set(poisoned)
    assert {p for p in poisoned if min(by_n2) <= p <= max(by_n)} <= by_n & by_n2
    # Every poison input is a dead letter, with its error (at least once: N wrote its own before it died,
    # N' those it quarantined past what Nd's output covered).
    key = {p: (names[int(whole.streams[p - 1])], int(whole.seqs[p - 1])) for p in poisoned}
    letters = [*t.nodes["n"].quarantine.dead_letters.items, *t.nodes["n2"].quarantine.dead_letters.items]
    assert {(r.stream, r.seq) for _, r in letters} == set(key.values())
    assert all("cannot compute with a volume of 4900" in why for why, _ in letters)


def test_a_standby_that_takes_over_with_nothing_more_to_process_writes_its_quarantined_inputs():
    """N' (no wait: it processes each input on arrival) quarantines the poison inputs of a short stream that
    N, stuck in its first call, never finishes; N dies; nothing more arrives after the takeover. Every poison
    input is a dead letter before N' delivers an output past it."""
    import threading

    from lazystandby.harness.inprocess import InProcessTopology

    total = 3_000
    whole = ticks(total)
    _, poisoned = truth(whole)
    assert poisoned
    release = threading.Event()

    class Stuck(Poisoned):
        def process(self, batch):
            release.wait(30)
            return super().process(batch)

    made: list = []

    def operator(predicate: str):  # N is built before N' (InProcessTopology)
        made.append(Stuck(predicate) if not made else Poisoned(predicate))
        return made[-1]

    with InProcessTopology("memory", operator=operator, total=total, rate=50_000.0, standby_defer=0.0,
                           heartbeat_interval=0.1) as t:
        n2 = t.nodes["n2"]
        assert t.wait(lambda: n2.processed.input_pos >= total)  # every input, before any takeover
        assert n2.counters["quarantined_tuples"] == len(poisoned) and not n2.quarantine.dead_letters.items
        t.kill("n")
        release.set()
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through >= 1)
        assert len(n2.quarantine.dead_letters.items) == len(poisoned)  # already: written before anything was replayed
        assert n2.counters["takeovers"] == 1
    names = {1: "I1", 2: "I2"}
    assert {(r.stream, r.seq) for _, r in n2.quarantine.dead_letters.items} == \
        {(names[int(whole.streams[p - 1])], int(whole.seqs[p - 1])) for p in poisoned}


def test_the_quarantine_writes_only_for_a_writer_and_a_standby_drops_what_a_checkpoint_passed():
    from lazystandby.node.quarantine import Quarantine, Quarantined
    from lazystandby.sources.base import DeadLetters

    q = Quarantine(DeadLetters())
    q.found([Quarantined(pos, 1, pos, b"p", "ValueError: no") for pos in (5, 9, 12)], {1: "I1"})
    assert [d["stream"] for d in q.listed] == ["I1"] * 3
    assert q.due(writes=False, covered=9) == [] and [x.pos for x in q.unwritten] == [12]
    todo = q.due(writes=True, covered=0)
    assert [x.pos for x in todo] == [12] and not q.unwritten
    q.write(todo, {1: "I1"}, "N'")
    (why, record), = q.dead_letters.items
    assert why == "quarantined by N' at input 12: ValueError: no" and (record.stream, record.seq) == ("I1", 12)
