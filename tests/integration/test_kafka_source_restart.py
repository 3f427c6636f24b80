"""What Nu's Kafka source records for a restart, read back by a new source of the same deployment: the
checkpoint, and every input after the trim point at its position (for a window query the trim point lies
before the checkpoint: a restarted Nu must still hold the inputs of windows open there)."""

import time
import uuid

import pytest
from kafka import KafkaProducer

from lazystandby.core.acks import Checkpoint
from lazystandby.core.seq import StreamRegistry
from lazystandby.core.tuples import TupleBatch
from lazystandby.sources.base import Membership
from lazystandby.sources.kafka_source import KafkaSource, Topics


def _deployment(kafka, n: int) -> tuple[Topics, str, list[bytes]]:
    topics = Topics(f"k{uuid.uuid4().hex[:10]}.")
    payloads = [f"ACME,{100 + i}.5,100,{1000 + i},XTKS".encode() for i in range(n)]
    p = KafkaProducer(bootstrap_servers=kafka, acks="all")
    for v in payloads:
        p.send(topics.source("I1"), v, partition=0)
    p.flush()
    p.close()
    return topics, f"g-{uuid.uuid4().hex[:8]}", payloads


def _admit(src: KafkaSource, n: int) -> None:
    """Read n records and record them as Nu does: link positions 1..n in two link-log entries."""
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        got += src.poll(n)
    assert len(got) == n
    reg = StreamRegistry(["I1"])
    for first, last in ((1, n // 2), (n // 2 + 1, n)):
        part = got[first - 1:last]
        src.record_order(TupleBatch(first, [reg.id_of("I1")] * len(part), [r.seq for r in part],
                                    [r.payload for r in part]), reg.names_by_id)


def _restarted(kafka, checkpoint: Checkpoint, members: Membership, trimmed: int | None):
    """40 ticks admitted and covered by `checkpoint` with `trimmed`, committed; what a new source of the
    same deployment restores, and the ticks' payloads."""
    topics, group, payloads = _deployment(kafka, 40)
    src = KafkaSource(kafka, ["I1"], topics=topics, group=group)
    try:
        _admit(src, 40)
        src.covered(checkpoint, members, trimmed)
        src.commit_now()
    finally:
        src.close()
    again = KafkaSource(kafka, ["I1"], topics=topics, group=group)
    try:
        r = again.restore()
    finally:
        again.close()
    assert r is not None
    return r, payloads


@pytest.mark.parametrize("trimmed, held_from", [(None, 31), (12, 13), (24, 25)])
def test_a_restarted_source_holds_every_input_after_the_trim_point(kafka, trimmed, held_from):
    r, payloads = _restarted(kafka, Checkpoint(30, 7), Membership(3, "n2:1", "s2:1"), trimmed)
    assert (r.checkpoint, r.epoch, r.primary, r.standby) == (Checkpoint(30, 7), 3, "n2:1", "s2:1")
    assert r.held.first == held_from and r.held.last == 40
    assert [r.held.payload(i) for i in range(len(r.held))] == payloads[held_from - 1:]
    assert r.held.seqs.tolist() == list(range(held_from, 41))
    assert r.last_seqs == {"I1": 40}


def test_a_trim_point_past_the_checkpoint_is_held_to_it(kafka):
    """A trim point is never past the checkpoint (Nu trims no further than the Level-1 ack)."""
    r, _ = _restarted(kafka, Checkpoint(20, 7), Membership(1, "n:1"), 35)
    assert r.checkpoint == Checkpoint(20, 7) and r.held.first == 21
