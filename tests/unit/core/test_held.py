"""A lazy standby's sealed backup (core/held.py): decoded only when needed, from the last fresh run; a run
that does not decode is forgotten with what follows it, and Nu's resend fills the gap."""

import threading

import pytest
import zstandard as zstd

from lazystandby.config import NodeConfig
from lazystandby.core import messages as m
from lazystandby.core.acks import Checkpoint
from lazystandby.core.batching import RunEncoder
from lazystandby.core.codec import BatchDecoder, CodecName, EncodedRun
from lazystandby.core.errors import CorruptBatch, DuplicateSequence, OversizedMessage, PeerError, Released, Unreadable
from lazystandby.core.held import HeldRuns, Sealed
from lazystandby.core.roles import Role
from lazystandby.core.tuples import TupleBatch
from lazystandby.node.operator_node import OperatorNode
from lazystandby.operators.selection import Selection
from lazystandby.sources.generator import Interleaved
from lazystandby.transport.memory import MemoryNetwork
from lazystandby.transport.wire import backup_frame_to_pb

RUN = 20  # tuples per run: two Bsize-10 batches


def ticks(n: int, first: int = 1) -> TupleBatch:
    idx, seqs, payloads = Interleaved(["I1", "I2"]).take(first - 1 + n)
    return TupleBatch(1, idx + 1, seqs, payloads).slice(first, first + n)


def runs(enc: RunEncoder, first: int, k: int) -> list[m.BackupRun]:
    return [enc.encode(ticks(RUN, first + i * RUN)) for i in range(k)]


def garble(run: m.BackupRun) -> m.BackupRun:
    """The same run, its compressed bytes replaced by as many zeros (its declared sizes unchanged)."""
    e = run.encoded
    bad = m.BackupRun(run.first, run.counts, type(e)(e.codec, e.session, e.first_index, b"\x00" * len(e.payload),
                                                     e.payload_sizes, e.raw_sizes, e.dictionary, e.fresh))
    return bad


def store() -> HeldRuns:
    return HeldRuns("N'", lambda batch, what: batch)


def held_all(s: HeldRuns, rs: list[m.BackupRun]):
    held, ledger = s.accept(rs)
    s.commit(held, ledger)
    return held


@pytest.mark.parametrize("codec", [CodecName.ZSTD_STREAM, CodecName.ZSTD_STREAM_DICT])
def test_a_sealed_run_decodes_from_the_last_fresh_run_and_covered_runs_never_do(codec):
    enc = RunEncoder(codec, bsize=10, fresh_every=2 * RUN)
    if codec.uses_dictionary:
        enc.encoder.set_dictionary(b"".join(ticks(200).payloads.to_pylist())[:2048])
    rs = runs(enc, 1, 6)
    assert [r.encoded.fresh for r in rs] == [True, False, True, False, True, False]
    s = store()
    held = held_all(s, rs)
    s.trim(3 * RUN)  # runs 0-2 covered: run 2 stays (run 3 decodes from it), 0-1 go
    assert len(s) == 4
    assert s.tuples(held[3]) == ticks(RUN, 1 + 3 * RUN)  # decodes run 2, then run 3
    assert s.decoded_tuples == RUN  # run 2 was decompressed, never parsed: only run 3's tuples count
    assert s.tuples(held[5]) == ticks(RUN, 1 + 5 * RUN)  # from run 4 (fresh), which is where run 3 ended
    assert s.tuples(held[4]) == ticks(RUN, 1 + 4 * RUN)  # passed on the way, not kept: from run 4 again
    assert s.decoded_tuples == 3 * RUN
    s.trim(6 * RUN)  # everything covered: the last fresh run stays for whatever comes next
    assert len(s) == 2
    with pytest.raises(Released):  # let go: asked for again, it says so (it is covered), not "corrupt"
        s.tuples(held[3])
    with pytest.raises(Unreadable) as e:
        Sealed(held[3], s, held[3].first, held[3].end).tuples()
    assert e.value.error is None
    assert s.unseal(0) is None  # what is still held decodes


@pytest.mark.parametrize("codec", [CodecName.NONE, CodecName.ZLIB, CodecName.ZSTD, CodecName.ZSTD_DICT])
def test_a_codec_that_does_not_stream_is_held_sealed_and_each_run_decodes_on_its_own(codec):
    """Each batch its own frame: every run is held as fresh, so any run decodes alone, in any order, and
    a run that does not decode takes none after it down (a streaming run takes the rest of its frame)."""
    enc = RunEncoder(codec, bsize=10, dict_samples=4)
    rs = runs(enc, 1, 5)  # a dictionary codec trains on the first run and opens its session with it
    assert not any(r.encoded.fresh for r in rs)  # as sent: nothing on the wire changed
    s = store()
    held = held_all(s, [rs[0], rs[1], garble(rs[2]), rs[3], rs[4]])
    assert all(h.fresh for h in held) and s.decoded_tuples == 0
    if codec.uses_dictionary:
        assert all(h.run.encoded.dictionary == rs[0].encoded.dictionary != b"" for h in held)
    assert s.tuples(held[3]) == ticks(RUN, 1 + 3 * RUN)  # alone: nothing before it decoded
    assert s.decoded_tuples == RUN
    assert s.tuples(held[1]) == ticks(RUN, 1 + RUN)  # behind where the decoder stands
    with pytest.raises(CorruptBatch):  # `none`: its zeros are no batch's header
        s.tuples(held[2])
    assert s.tuples(held[4]) == ticks(RUN, 1 + 4 * RUN)
    s.trim(4 * RUN)  # runs 0-3 covered: each later run decodes alone, so none of them stays
    assert len(s) == 1 and s.decoded_tuples == 3 * RUN  # run 0 was never decoded


@pytest.mark.parametrize("content_size", [True, False])
def test_a_held_zstd_frame_that_inflates_past_its_declared_size_is_refused_when_decoded(content_size):
    """A bomb in a codec that does not stream is held sealed like any run (its declared sizes are
    plausible), and decoding it stops at what it declared: refused, never inflated."""
    bomb = zstd.ZstdCompressor(write_content_size=content_size).compress(b"\x00" * (8 << 20))
    run = m.BackupRun(1, [1], EncodedRun(CodecName.ZSTD, 5, 0, bomb, [len(bomb)], [1000]))
    s = store()
    (h,) = held_all(s, [run])
    # With its size in the header it is refused before any output is made; without, zstd stops at 1000.
    with pytest.raises(OversizedMessage if content_size else CorruptBatch,
                       match="declares 8388608 bytes; the sender declared 1000" if content_size
                       else "does not decode"):
        s.tuples(h)
    assert s.decoded_tuples == 0


def test_an_uncompressed_run_whose_sizes_disagree_is_refused():
    enc = RunEncoder(CodecName.NONE, bsize=10)
    e = runs(enc, 1, 1)[0].encoded
    shifted = type(e)(e.codec, e.session, e.first_index, e.payload, [e.payload_sizes[0] - 1, e.payload_sizes[1] + 1],
                      e.raw_sizes, fresh=True)
    with pytest.raises(CorruptBatch, match="uncompressed batch 0 of .* bytes declares"):
        BatchDecoder("N'").decode_run(shifted)


def test_decoded_runs_are_kept_up_to_a_bound_and_decoded_again_when_needed_again():
    enc = RunEncoder(CodecName.ZSTD_STREAM, bsize=10, fresh_every=10 * RUN)
    s = HeldRuns("N'", lambda batch, what: batch, cache_tuples=2 * RUN)
    held = held_all(s, runs(enc, 1, 4))
    for h in held:
        s.tuples(h)
    assert s.decoded_tuples == 4 * RUN
    assert [h.batch is not None for h in held] == [False, False, True, True]  # the newest 2 * RUN tuples
    assert s.tuples(held[3]) == ticks(RUN, 1 + 3 * RUN) and s.decoded_tuples == 4 * RUN  # kept
    assert s.tuples(held[0]) == ticks(RUN) and s.decoded_tuples == 5 * RUN  # let go: decoded again
    assert [h.batch is not None for h in held] == [True, False, False, True]  # still within the bound
    s.trim(4 * RUN)  # all covered: nothing decoded is kept
    assert all(h.batch is None for h in held)


def test_sealed_runs_are_checked_on_arrival_for_what_needs_no_decoding():
    enc = RunEncoder(CodecName.ZSTD_STREAM, bsize=10)
    rs = runs(enc, 1, 3)
    s = store()
    with pytest.raises(CorruptBatch, match="expected index 2"):
        s.accept([rs[0], rs[2]])  # a run missing in between
    held_all(s, rs[:2])
    with pytest.raises(DuplicateSequence):
        s.accept([rs[1]])
    enc.reset()
    late = enc.encode(ticks(RUN, 1 + 3 * RUN))
    wrong = m.BackupRun(late.first, late.counts, type(late.encoded)(
        late.encoded.codec, late.encoded.session, 4, late.encoded.payload, late.encoded.payload_sizes,
        late.encoded.raw_sizes))
    with pytest.raises(CorruptBatch, match="new session must start at index 0"):
        s.accept([wrong])
    big = HeldRuns("N'", lambda b, w: b, max_batch_bytes=100)
    with pytest.raises(OversizedMessage, match="exceeds 100"):
        big.accept([rs[0]])
    # Sizes that still add up, but shifted: batch 0 declares fewer raw bytes than ten tuples' header takes.
    e = rs[2].encoded
    shifted = m.BackupRun(rs[2].first, rs[2].counts, type(e)(
        e.codec, e.session, e.first_index, e.payload, e.payload_sizes, [100, sum(e.raw_sizes) - 100]))
    with pytest.raises(CorruptBatch, match="batch 0 of 10 tuples declares 100 raw bytes"):
        s.accept([shifted])
    assert len(s) == 2 and s.ledger.next_index == 4  # nothing refused was recorded


def test_a_run_that_does_not_decode_fails_and_so_does_the_run_after_it():
    enc = RunEncoder(CodecName.ZSTD_STREAM, bsize=10, fresh_every=10 * RUN)
    rs = runs(enc, 1, 3)
    s = store()
    held = held_all(s, [rs[0], garble(rs[1]), rs[2]])  # sizes as declared: accepted sealed
    assert s.tuples(held[0]) == ticks(RUN)
    with pytest.raises(CorruptBatch):
        s.tuples(held[1])
    with pytest.raises(CorruptBatch, match="follows run 21"):
        s.tuples(held[2])
    s.truncate(21)
    assert len(s) == 1 and s.ledger.session == 0  # the next run must open a new session


@pytest.fixture
def net():
    return MemoryNetwork()


@pytest.fixture
def standby(net):
    n = OperatorNode(NodeConfig(role="standby", listen="s", standby_defer=0), Selection("price > 100"), net.peer)
    n.standby_side.primary_received = 10_000
    net.register("s", n)
    yield n
    n.stop()


def send(net, rs):
    return net.call_pb("s", "Backup", backup_frame_to_pb(m.BackupFrame(epoch=1, sender="Nu", checkpoint=Checkpoint(),
                                                                       runs=rs)))


def loop_once(node):
    th = threading.Thread(target=node._operator_loop, daemon=True)
    th.start()
    th.join(5)
    assert not th.is_alive()


def test_a_standby_forgets_a_held_run_that_does_not_decode_and_takes_it_again_after_the_resync(net, standby):
    enc = RunEncoder(CodecName.ZSTD_STREAM, bsize=10)
    rs = runs(enc, 1, 3)
    assert send(net, [rs[0], garble(rs[1]), rs[2]]).applied_through == 3 * RUN  # accepted sealed
    loop_once(standby)  # run 0 processed; run 1 does not decode: 21.. forgotten
    assert standby.counters["backup_unreadable"] == 1
    assert standby.inbound.received_through == RUN and len(standby.inbound.iq) == 0
    assert standby.processed.input_pos == RUN
    with pytest.raises(PeerError) as e:  # Nu's next run continues the old session: refused, Nu resets
        send(net, runs(enc, 1 + 3 * RUN, 1))
    assert e.value.status == "DATA_LOSS" and "new session" in e.value.message
    assert send(net, []).applied_through == RUN  # the resync: where the standby stands
    enc.reset()
    assert send(net, runs(enc, 1 + RUN, 3)).applied_through == 4 * RUN
    loop_once(standby)
    assert standby.processed.input_pos == 4 * RUN and standby.counters["processed_tuples"] == 4 * RUN
    assert outputs(standby) == outputs(clean_standby(4 * RUN))  # as if nothing had gone wrong


def outputs(node) -> TupleBatch:
    return node.oq.read(node.oq.first, 1 << 20)


def clean_standby(n: int) -> OperatorNode:
    net = MemoryNetwork()
    ref = OperatorNode(NodeConfig(role="standby", listen="s", standby_defer=0), Selection("price > 100"), net.peer)
    ref.standby_side.primary_received = 10_000
    net.register("s", ref)
    try:
        send(net, runs(RunEncoder(CodecName.ZSTD_STREAM, bsize=10), 1, n // RUN))
        loop_once(ref)
        assert ref.processed.input_pos == n and len(outputs(ref)) > 0
        return ref
    finally:
        ref.stop()


@pytest.mark.parametrize("codec", [CodecName.ZSTD_STREAM, CodecName.ZSTD, CodecName.NONE])
def test_a_takeover_decodes_what_is_held_first_and_asks_nu_from_a_run_that_does_not_decode(net, codec):
    t = [100.0]
    n2 = OperatorNode(NodeConfig(role="standby", listen="s", standby_defer=1.0), Selection("price > 100"), net.peer,
                      clock=lambda: t[0])
    n2.standby_side.primary_received = 10_000
    net.register("s", n2)
    try:
        enc = RunEncoder(codec, bsize=10)
        rs = runs(enc, 1, 3)
        send(net, [rs[0], rs[1], garble(rs[2])])
        assert n2.held.decoded_tuples == 0 and n2.inbound.received_through == 3 * RUN
        with n2.lock:
            n2.state.become(Role.PROMOTING, epoch=2)
        n2.standby_side.unseal()
        assert n2.inbound.received_through == 2 * RUN and n2.counters["backup_unreadable"] == 1
        assert n2.held.decoded_tuples == 2 * RUN  # runs 0 and 1 are decoded, ready for the operator
        assert len(n2.inbound.iq) == 2 * RUN  # and still queued: only what it cannot decode is forgotten
    finally:
        n2.stop()
