"""The columnar data plane: generator, validation, parsing, predicates, run encoding, admission, trimming."""

import numpy as np
import pyarrow as pa
import pytest

from lazystandby.config import NodeConfig
from lazystandby.core import messages as m
from lazystandby.core import tuples
from lazystandby.core.codec import BatchDecoder, BatchEncoder, CodecName, EncodedRun
from lazystandby.core.errors import (
    CorruptBatch,
    DuplicateSequence,
    MalformedMessage,
    MalformedRecord,
    NonMonotonicSequence,
    OversizedMessage,
)
from lazystandby.core.seq import PerStreamSequence
from lazystandby.core.tuples import TupleBatch
from lazystandby.formats.predicate import compile_columnar, compile_predicate
from lazystandby.formats.ticks import parse_columns, valid_mask, validate
from lazystandby.sources.base import GeneratorSource, Records
from lazystandby.sources.generator import Interleaved, TickStream, interleave
from lazystandby.transport import wire

BAD = [
    b"ACME,1e5,100,1,XNYS",  # exponent
    b"ACME,nan,100,1,XNYS",
    b"ACME, 5.0,100,1,XNYS",  # space
    b"ACME,5.0,1_000,1,XNYS",  # Python's int() takes it; the format does not
    b",5.0,100,1,XNYS",  # empty symbol
    b"ACME,5.0,100,1",  # four fields
    b"ACME,5.0,100,1,XNYS,extra",
    b"ACME,5.0,1.5,1,XNYS",  # volume is an integer
    b"\xff\xfe,5.0,100,1,XNYS",  # not UTF-8
    b"",
]


def ticks_batch(n: int, first: int = 1) -> TupleBatch:
    idx, seqs, payloads = Interleaved(["I1", "I2"]).take(n)
    return TupleBatch(first, idx + 1, seqs, payloads)


def test_the_generator_is_the_same_however_it_is_asked():
    one = TickStream("I1", seed=3)
    chunks = [one.take(k) for k in (1, 7, 9000, 3, 8192)]
    whole = TickStream("I1", seed=3).take(sum(len(s) for s, _ in chunks))
    assert pa.concat_arrays([p for _, p in chunks]).equals(whole[1])
    assert np.concatenate([s for s, _ in chunks]).tolist() == list(range(1, len(whole[0]) + 1))
    assert TickStream("I1", seed=4).take(10)[1] != whole[1].slice(0, 10)  # the seed matters
    rows = list(interleave(["I1", "I2"], 6, seed=3))
    assert [(s, q) for s, q, _ in rows] == [("I1", 1), ("I2", 1), ("I1", 2), ("I2", 2), ("I1", 3), ("I2", 3)]
    assert [p for s, _, p in rows if s == "I1"] == whole[1].slice(0, 3).to_pylist()


def test_generated_ticks_are_well_formed_as_the_generator_source_claims():
    assert GeneratorSource.well_formed
    b = ticks_batch(20_000)
    assert valid_mask(b.payloads, max_bytes=65536) is None
    for p in b.payloads.slice(0, 200).to_pylist():
        validate(p, max_bytes=65536)


def test_columnar_validation_agrees_with_the_per_record_check():
    good = ticks_batch(5).payload_list()
    payloads = pa.array(good + BAD + [b"A," + b"1" * 100 + b",1,1,X"], pa.binary())
    mask = valid_mask(payloads, max_bytes=60)
    assert mask is not None
    for p, ok in zip(payloads.to_pylist(), mask.tolist(), strict=True):
        try:
            validate(p, max_bytes=60)
            assert ok, p
        except MalformedRecord:
            assert not ok, p


def test_parse_columns_nulls_malformed_ticks_and_casts_only_what_is_asked():
    payloads = pa.array([b"ACME,101.50,200,17,XNYS", BAD[0], b"WAYNE,99.00,300,18,XLON"], pa.binary())
    ok, cols = parse_columns(payloads, {"price", "venue"})
    assert ok.to_pylist() == [True, False, True]
    assert cols["price"].to_pylist() == [101.5, None, 99.0]
    assert cols["venue"].to_pylist() == ["XNYS", None, "XLON"]
    assert set(cols) == {"price", "venue"}
    ok, cols = parse_columns(payloads.slice(0, 1), {"volume"})
    assert ok is None and cols["volume"].type == pa.int64()


@pytest.mark.parametrize("text", [
    "price > 100", "price <= 50.5 OR venue = 'XLON'", "NOT (volume >= 2000) AND symbol != 'ACME'",
    "TRUE", "FALSE OR ts > 1764000000100", "(price > 80 AND price < 120) OR NOT venue <> 'XNAS'",
])
def test_the_columnar_predicate_selects_what_the_row_predicate_does(text):
    b = ticks_batch(3000)
    row = compile_predicate(text)
    want = [i for i, p in enumerate(b.payload_list()) if row(p.decode().split(","))]
    fn, fields = compile_columnar(text)
    _, cols = parse_columns(b.payloads, fields)
    got = np.flatnonzero(np.asarray(fn(cols, len(b)).to_pylist(), dtype=bool)).tolist()
    assert got == want


@pytest.mark.parametrize("size", [1, 3, 10, 64])
def test_runs_encode_as_single_batches_do_and_decode_as_one(size):
    b = ticks_batch(640, first=101)
    raws = tuples.encode_runs(b, size)
    assert raws == [tuples.encode(b.slice(k, k + size)) for k in range(b.first, b.end, size)]
    whole = b.slice(b.first, b.first + (len(b) // size) * size)
    k = len(whole) // size
    back = tuples.decode_runs(b"".join(raws[:k]), whole.first, size, [len(r) for r in raws[:k]])
    assert back == whole


@pytest.mark.parametrize("size", [1, 10])
def test_runs_with_seq_steps_decode_only_as_a_run(size):
    b = ticks_batch(200, first=11)
    raws = tuples.encode_runs(b, size, seq_deltas=True)
    assert tuples.decode_runs(b"".join(raws), 11, size, [len(r) for r in raws]) == b
    assert sum(map(len, raws)) <= sum(map(len, tuples.encode_runs(b, size)))  # no bigger, and it compresses
    with pytest.raises(CorruptBatch, match="steps"):  # a batch of such a run is not a batch on its own
        tuples.decode(raws[3])


def test_runs_of_empty_and_mixed_payloads_decode_as_one():
    """The heads and payloads of a run split apart whatever the payloads' sizes, none at all included."""
    empty = TupleBatch(1, [0] * 20, list(range(1, 21)), [b""] * 20)
    raws = tuples.encode_runs(empty, 10)
    assert tuples.decode_runs(b"".join(raws), 1, 10, [len(r) for r in raws]) == empty
    mixed = TupleBatch(1, [0, 1] * 10, list(range(1, 21)), [b"x" * (i % 4) for i in range(20)])
    raws = tuples.encode_runs(mixed, 5, seq_deltas=True)
    assert tuples.decode_runs(b"".join(raws), 1, 5, [len(r) for r in raws]) == mixed


@pytest.mark.parametrize("damage", ["magic", "first", "count", "sizes"])
def test_decode_runs_refuses_a_run_whose_headers_disagree(damage):
    b = ticks_batch(30, first=1)
    raws = [bytearray(r) for r in tuples.encode_runs(b, 10)]
    sizes = [len(r) for r in raws]
    if damage == "magic":
        raws[1][0:4] = b"XXXX"
    elif damage == "first":
        raws[2][5] ^= 1
    elif damage == "count":
        raws[0][13] = 9
    else:
        sizes[0] += 1
        sizes[1] -= 1
    with pytest.raises(CorruptBatch):
        tuples.decode_runs(b"".join(raws), 1, 10, sizes)


def test_select_and_file_lines_keep_positions():
    b = ticks_batch(50, first=7)
    out = b.select(np.array([0, 5, 49]), first=3)
    assert out.sources.tolist() == [7, 12, 56] and out.first == 3 and len(out) == 3
    assert out.payload_list() == [b.payload(0), b.payload(5), b.payload(49)]
    assert b.select([], first=1).sources.tolist() == []


def test_per_stream_sequence_checks_whole_arrays():
    sq = PerStreamSequence("N")
    pending = sq.check(np.array([1, 2, 1, 2, 0]), np.array([5, 9, 6, 10, 3]), skip=0)
    assert pending == {1: 6, 2: 10}
    sq.commit(pending)
    with pytest.raises(DuplicateSequence, match="stream 2 repeated seq 10"):
        sq.check(np.array([1, 2]), np.array([7, 10]))
    with pytest.raises(NonMonotonicSequence, match="stream 1 seq went back to 4"):
        sq.check(np.array([1, 1]), np.array([7, 4]))
    assert sq.check(np.array([1]), np.array([4]), fresh=True) == {1: 4}


def test_records_from_several_places_keep_each_stream_name():
    a = Records(["I1"], [0, 0], [1, 2], [b"a", b"b"])
    b = Records(["_control", "I2"], [1, 0, 1], [1, 1, 2], [b"x", b"c", b"y"])
    both = Records.concat([a, Records([], [], [], []), b])
    assert [(r.stream, r.seq, r.payload) for r in both] == [
        ("I1", 1, b"a"), ("I1", 2, b"b"), ("I2", 1, b"x"), ("_control", 1, b"c"), ("I2", 2, b"y")]


@pytest.mark.parametrize("codec", list(CodecName))
def test_a_run_decodes_to_what_its_batches_decode_to(codec):
    b = ticks_batch(200)
    raws = tuples.encode_runs(b, 10)
    enc = BatchEncoder(codec)
    if codec.uses_dictionary:
        enc.set_dictionary(b"".join(tuples.encode_runs(b, 1))[:2048])
    first, second = enc.encode_run(raws[:7]), enc.encode_run(raws[7:])
    dec = BatchDecoder("N'")
    joined, pos = dec.decode_run(first)
    dec.commit(pos)
    assert joined == b"".join(raws[:7])
    joined, pos = dec.decode_run(second)
    assert joined == b"".join(raws[7:]) and pos.last_index == len(raws) - 1
    with pytest.raises((DuplicateSequence, CorruptBatch)):  # a run that does not follow on
        dec.decode_run(first)


def test_a_run_that_inflates_past_its_declared_sizes_is_refused():
    enc = BatchEncoder(CodecName.ZSTD_STREAM)
    bomb = enc.encode_run([b"\0" * (8 << 20)])
    bomb.raw_sizes = [100]
    with pytest.raises(OversizedMessage):
        BatchDecoder("N'").decode_run(bomb)


def _backup_frame_pb(counts: list[int], raws: list[bytes]):
    run = m.BackupRun(first=1, counts=counts, encoded=BatchEncoder(CodecName.ZSTD_STREAM).encode_run(raws))
    msg = wire.backup_frame_to_pb(m.BackupFrame(epoch=2, sender="Nu", checkpoint=m.Checkpoint(0, 0), runs=[run]))
    return run, type(msg).FromString(msg.SerializeToString())


def _read_back(msg) -> m.BackupRun:
    return wire.backup_frame_from_pb(msg, node="N'").runs[0]


def test_backup_runs_travel_packed_and_inconsistent_ones_are_malformed():
    run, msg = _backup_frame_pb([10] * 4, tuples.encode_runs(ticks_batch(40), 10))
    # Packed: sizes as 2-byte integers (a Bsize-10 batch is over 255 bytes), one count for every batch, no
    # repeated fields.
    assert (msg.runs[0].size_width, msg.runs[0].batch_tuples) == (2, 10)
    assert not (msg.runs[0].counts or msg.runs[0].payload_sizes or msg.runs[0].raw_sizes)
    back = _read_back(msg)
    assert back.counts == [10] * 4 and back.encoded.payload == run.encoded.payload
    assert (back.encoded.payload_sizes, back.encoded.raw_sizes) == (run.encoded.payload_sizes, run.encoded.raw_sizes)
    assert isinstance(back.encoded, EncodedRun)
    msg.runs[0].sizes = msg.runs[0].sizes[:2] + bytes([msg.runs[0].sizes[2] + 1]) + msg.runs[0].sizes[3:]
    with pytest.raises(MalformedMessage, match="payload bytes"):
        _read_back(msg)


def test_a_backup_run_s_sizes_go_four_bytes_wide_when_one_does_not_fit_in_two_and_uneven_counts_go_as_a_list():
    raws = [b"x" * 70_000, b"y" * 10]
    run, msg = _backup_frame_pb([7, 3], raws)
    assert (msg.runs[0].size_width, msg.runs[0].batch_tuples, list(msg.runs[0].counts)) == (4, 0, [7, 3])
    back = _read_back(msg)
    assert back.counts == [7, 3] and back.encoded.raw_sizes == [70_000, 10]
    assert back.encoded.payload_sizes == run.encoded.payload_sizes


def test_a_bsize_1_run_s_sizes_take_a_byte_each():
    b = ticks_batch(5)
    run, msg = _backup_frame_pb([1] * 5, tuples.encode_runs(b, 1))
    assert (msg.runs[0].size_width, msg.runs[0].batch_tuples, len(msg.runs[0].sizes)) == (1, 1, 10)
    assert _read_back(msg).encoded.raw_sizes == run.encoded.raw_sizes


def test_a_backup_run_with_its_sizes_as_repeated_fields_is_still_read():
    run, msg = _backup_frame_pb([10] * 4, tuples.encode_runs(ticks_batch(40), 10))
    r = msg.runs[0]
    r.size_width, r.sizes, r.batch_tuples = 0, b"", 0
    r.counts.extend([10] * 4)
    r.payload_sizes.extend(run.encoded.payload_sizes)
    r.raw_sizes.extend(run.encoded.raw_sizes)
    back = _read_back(msg)
    assert back.counts == [10] * 4 and back.encoded.raw_sizes == run.encoded.raw_sizes


@pytest.mark.parametrize("forge, why", [
    (lambda r: setattr(r, "size_width", 3), "size_width 3"),
    (lambda r: setattr(r, "size_width", 0), "no size_width"),
    (lambda r: setattr(r, "sizes", r.sizes[:-1]), "not two lists"),
    (lambda r: setattr(r, "sizes", r.sizes[:-4]), "payload bytes"),  # two sizes short: the lists shift
    (lambda r: r.raw_sizes.append(1), "both packed and repeated"),
    (lambda r: r.counts.append(10), "both batch_tuples and counts"),
    (lambda r: setattr(r, "batch_tuples", 0), "0 counts"),
])
def test_a_forged_backup_run_s_sizes_are_malformed(forge, why):
    _, msg = _backup_frame_pb([10] * 4, tuples.encode_runs(ticks_batch(40), 10))
    forge(msg.runs[0])
    with pytest.raises(MalformedMessage, match=why):
        _read_back(msg)


class _Net:
    def __call__(self, addr):
        from lazystandby.transport.peer import PeerBase

        class Silent(PeerBase):
            address = addr

        return Silent()


def _nu_config(**kw) -> NodeConfig:
    return NodeConfig(**{"role": "upstream", "listen": "nu", "primary": "n", "standby": "s", "bsize": "10",
                         "frame_max": 100, **kw})


def _nu(**kw):
    from lazystandby.node.upstream import UpstreamNode

    return UpstreamNode(_nu_config(**kw), GeneratorSource(["I1", "I2"], total=10_000), _Net())


def test_nu_admits_no_more_than_backup_lag_max_past_a_responsive_standby():
    nu = _nu(backup_lag_max=250)
    for _ in range(10):
        nu._source_loop()
    assert nu.outbound.oqu.last == 250 and nu.counters["source_waited_for_backup"] >= 1
    nu.outbound.backup.batcher.confirm(200)
    nu._source_loop()
    assert nu.outbound.oqu.last == 350  # one frame's worth more, up to the bound again (frame_max 100)
    nu.outbound.backup.retry_at = nu.clock() + 60  # a standby that does not answer holds nothing up
    nu._source_loop()
    assert nu.outbound.oqu.last == 450


def _clocked_nu(now: list[float], source=None, **kw):
    from lazystandby.node.upstream import UpstreamNode

    source = source or GeneratorSource(["I1", "I2"], total=10_000)
    nu = UpstreamNode(_nu_config(**kw), source, _Net(), clock=lambda: now[0])
    nu.lock.wait = lambda timeout=None: True
    return nu


def test_a_fresh_nu_holds_its_source_until_its_standby_registers():
    """Admitting at once, Nu had shipped some 250,000 tuples when the standby's registration came, and the
    resync it asks for stalled the source mid-run; held back, the backup starts with the data."""
    now = [100.0]
    nu = _clocked_nu(now, standby_wait=1.0)
    nu._hold_source_for_standby()
    nu._source_loop()
    now[0] += 0.5
    nu._source_loop()
    assert nu.outbound.oqu.last == 0 and nu.counters["source_waited_for_standby"] == 2
    nu.handle_register_standby(m.RegisterStandby(node="N2", address="s"))
    nu._source_loop()
    assert nu.outbound.oqu.last == 100 and nu.counters["source_waited_for_standby"] == 2
    assert nu.outbound.backup.resync  # the backup's first call asks the standby where it stands


def test_nu_reports_when_it_started_and_when_it_first_admitted():
    """The bench's runs start there (bench.harness.nu_time): Nu's server answers status before."""
    import time

    nu = _nu(standby_wait=0.0)
    nu.spawn = lambda name, loop: None  # its loops are driven by hand here
    assert nu.snapshot()["started_at"] is None and nu.snapshot()["first_admitted_at"] is None
    before = time.time()
    nu.start()
    nu._source_loop()
    s = nu.snapshot()
    assert before <= s["started_at"] <= s["first_admitted_at"] <= time.time()
    nu._source_loop()
    assert nu.snapshot()["first_admitted_at"] == s["first_admitted_at"]  # the first, not the last


def test_nu_reports_its_cpu_and_page_faults_as_they_were_at_its_start():
    """The bench counts Nu's CPU from there (bench.harness.usage_at_start): the run's clock starts there."""
    import resource

    nu = _nu(standby_wait=0.0)
    nu.spawn = lambda name, loop: None
    assert nu.snapshot()["cpu_seconds_at_start"] is None and nu.snapshot()["minor_faults_at_start"] is None

    def used() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    before = used()
    nu.start()
    s = nu.snapshot()
    assert before <= s["cpu_seconds_at_start"] <= used()
    assert 0 < s["minor_faults_at_start"] <= resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    sum(range(3_000_000))  # CPU spent after the start leaves the reading where it was
    assert nu.snapshot()["cpu_seconds_at_start"] == s["cpu_seconds_at_start"] < used()


def test_a_fresh_nu_admits_without_a_standby_that_does_not_register_within_standby_wait(caplog):
    now = [100.0]
    nu = _clocked_nu(now, standby_wait=1.0)
    nu._hold_source_for_standby()
    nu._source_loop()
    assert nu.outbound.oqu.last == 0
    now[0] += 1.0
    with caplog.at_level("WARNING"):
        nu._source_loop()
        nu._source_loop()
    assert nu.outbound.oqu.last == 200 and nu.counters["source_waited_for_standby"] == 1
    assert [r.getMessage() for r in caplog.records].count(
        "Nu: standby s did not register within standby_wait (1.0 s): admitting without waiting for it") == 1


def test_nu_does_not_wait_for_a_standby_when_restarted_or_told_not_to():
    from lazystandby.core.acks import Checkpoint
    from lazystandby.sources.base import Restored

    class Restarted(GeneratorSource):
        def restore(self):
            return Restored(checkpoint=Checkpoint(0, 0), epoch=1, primary="n", held=TupleBatch(first=1),
                            last_seqs={}, standby="s")

    now = [100.0]
    for nu in (_clocked_nu(now, standby_wait=0.0),  # told not to
               _clocked_nu(now, Restarted(["I1", "I2"], total=10_000), standby_wait=1.0),  # registered before
               _clocked_nu(now, standby_wait=1.0, standby="")):  # none configured
        nu._hold_source_for_standby()
        nu._source_loop()
        assert nu.outbound.oqu.last == 100 and nu.counters["source_waited_for_standby"] == 0


def test_nu_admits_no_more_than_primary_lag_max_past_what_the_primary_has_taken():
    """Beyond the bound the tuples would only wait in OQu while the backup hands them to the standby, which
    then cannot see them covered within standby_defer."""
    nu = _nu(primary_lag_max=250, backup_lag_max=0)
    for _ in range(10):
        nu._source_loop()
    assert nu.outbound.oqu.last == 250 and nu.counters["source_waited_for_primary"] >= 1
    assert nu.counters["source_waited_for_backup"] == 0
    nu.outbound.push.cursor = 201  # the primary took 1..200
    nu._source_loop()
    assert nu.outbound.oqu.last == 350  # one frame's worth more (frame_max 100)
    nu._source_loop()
    assert nu.outbound.oqu.last == 450
    nu._source_loop()
    assert nu.outbound.oqu.last == 450  # 250 past the primary again
    unbounded = _nu(primary_lag_max=0, backup_lag_max=0)
    for _ in range(10):
        unbounded._source_loop()
    assert unbounded.outbound.oqu.last == 1000


def test_a_source_with_less_than_a_frame_is_polled_once_per_linger_ms_and_a_full_one_at_once():
    """Paced at 500,000 tuples/s, Nu polled again as soon as it had admitted a poll and got the few dozen
    tuples made meanwhile: each poll and admission costs about the same for 50 tuples as for 5,000, and it
    spent half its time there. A source that hands over less than asked for waits linger_ms; one with a
    backlog (a full frame each poll) is polled again at once."""
    import time

    from lazystandby.node.upstream import UpstreamNode

    cfg = NodeConfig(role="upstream", listen="nu", primary="n", bsize="10", frame_max=100_000, linger_ms=20)
    paced = UpstreamNode(cfg, GeneratorSource(["I1", "I2"], total=0, rate=50_000.0), _Net())
    polls, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < 0.3:
        last_poll = time.monotonic()
        paced._source_loop()
        polls += 1
    elapsed = time.monotonic() - t0
    assert polls <= elapsed / 0.02 + 3  # without the wait: hundreds of polls of a few tuples each
    # ... and each poll takes all that was made by then: the last one, at least what the source made (it
    # started before t0) until that poll began. (Against the end of the loop instead, a wait that
    # overslept on a loaded machine failed this once in a dozen runs.)
    assert paced.outbound.oqu.last >= 50_000 * (last_poll - t0 - 0.005)
    backlog = _nu(linger_ms=200, primary_lag_max=0, backup_lag_max=0)  # frame_max 100, 10,000 made at once
    t0 = time.monotonic()
    for _ in range(10):
        backlog._source_loop()
    assert backlog.outbound.oqu.last == 1000 and time.monotonic() - t0 < 0.2


def test_nu_does_not_trim_past_what_the_backup_has_cut_while_the_standby_answers():
    nu = _nu()
    while nu.outbound.oqu.last < 300:
        nu._source_loop()
    nu.outbound.level1(1, m.Checkpoint(250, 90))
    assert nu.outbound.checkpoint.input_pos == 250 and nu.outbound.oqu.trimmed_through == 0  # nothing cut yet
    nu.outbound.backup.batcher.due_run(nu.outbound.oqu, 10)  # cuts 1..100
    nu.outbound.trim()
    assert nu.outbound.oqu.trimmed_through == 100
    nu.outbound.standby = None  # no standby (a takeover): trims go all the way
    nu.outbound.trim()
    assert nu.outbound.oqu.trimmed_through == 250 and nu.outbound.backup.batcher.skipped == 0


def _gathering_upstream(t: list[float], calls: list[int], **settings):
    """Nu on the clock `t` (the test moves it; waits return at once), with Bsize 10 and runs of up to 10
    batches, whose standby records the tuples of each backup call in `calls` and acknowledges them."""
    from lazystandby.node.upstream import UpstreamNode
    from lazystandby.transport.peer import PeerBase

    class Standby(PeerBase):
        address = "s"

        def backup(self, frame, timeout):
            calls.append(sum(sum(r.counts) for r in frame.runs))
            return m.BackupAck(applied_through=max([r.first + sum(r.counts) - 1 for r in frame.runs], default=0))

    cfg = NodeConfig(role="upstream", listen="nu", primary="n", standby="s", bsize="10", frame_max=50,
                     max_batches_per_rpc=10, **settings)
    nu = UpstreamNode(cfg, GeneratorSource(["I1", "I2"], total=10_000), lambda a: Standby() if a == "s" else _Net()(a),
                      clock=lambda: t[0])
    nu.lock.wait = lambda timeout=None: True
    return nu


def test_the_backup_link_gathers_batches_for_backup_linger_ms_unless_a_full_run_is_due():
    """At low rates one call per backup_linger_ms carries what is due (less framing per batch); a full run
    (max_batches_per_rpc) goes at once, and so does the first call to a standby that just registered."""
    t, calls = [100.0], []
    nu = _gathering_upstream(t, calls, backup_linger_ms=20)
    try:
        nu._source_loop()
        nu.outbound.backup.loop()
        assert calls == [50]  # the first call goes at once
        nu._source_loop()
        nu.outbound.backup.loop()
        assert calls == [50]  # 50 more due, 5 of 10 batches: gathering
        t[0] += 0.019
        nu.outbound.backup.loop()
        assert calls == [50]
        t[0] += 0.002
        nu.outbound.backup.loop()
        assert calls == [50, 50]  # 21 ms after the last call
        nu._source_loop()
        nu._source_loop()
        nu.outbound.backup.loop()
        assert calls == [50, 50, 100]  # a full run is due: no wait
        nu.outbound.level1(1, m.Checkpoint(200, 80))
        nu.outbound.trim()
        nu._source_loop()
        nu.handle_register_standby(m.RegisterStandby(node="N2", address="s"))
        nu.outbound.backup.loop()
        assert calls == [50, 50, 100, 0]  # a registration first asks where the standby stands
        nu.outbound.backup.loop()
        assert nu.outbound.oqu.trimmed_through == 200 and calls == [50, 50, 100, 0, 50]  # then its backlog, at once
    finally:
        nu.stop()


def test_a_passive_standbys_backup_link_gathers_for_passive_backup_linger_ms():
    """A Passive Standby reads its backup only at a takeover: Nu gathers its batches for
    passive_backup_linger_ms (100 by default), not backup_linger_ms, so it makes fewer calls to it."""
    query = "SELECT symbol, count(*) FROM ticks GROUP BY window(ts, '20 seconds'), symbol"
    assert NodeConfig(query=query).backup_linger_s == pytest.approx(0.02)
    assert NodeConfig(query=query, standby_state="snapshot").backup_linger_s == pytest.approx(0.1)
    assert NodeConfig(query=query, standby_state="snapshot", passive_backup_linger_ms=0).backup_linger_s == 0
    t, calls = [100.0], []
    nu = _gathering_upstream(t, calls, query=query, standby_state="snapshot")
    try:
        nu._source_loop()
        nu.outbound.backup.loop()
        assert calls == [50]
        nu._source_loop()
        t[0] += 0.021
        nu.outbound.backup.loop()
        assert calls == [50]  # a warm standby's link would have called here
        t[0] += 0.08
        nu.outbound.backup.loop()
        assert calls == [50, 50]
    finally:
        nu.stop()


def test_a_standby_that_registers_holding_positions_is_not_sent_them_again():
    """Nu feeds the standby its configuration names before that standby's registration gets through (it
    may have started first and been refused until Nu listened). The registration must not make Nu take it
    for an empty one and send again what it holds: Nu asks first, then goes on after what it holds."""
    from lazystandby.node.upstream import UpstreamNode
    from lazystandby.transport.peer import PeerBase

    calls: list[tuple[int, int]] = []
    held = [0]

    class Standby(PeerBase):
        address = "s"

        def backup(self, frame, timeout):
            for r in frame.runs:
                calls.append((r.first, r.first + sum(r.counts) - 1))
                assert r.first == held[0] + 1, f"positions {r.first}.. sent again; the standby holds {held[0]}"
                held[0] += sum(r.counts)
            return m.BackupAck(applied_through=held[0])

    cfg = NodeConfig(role="upstream", listen="nu", primary="n", standby="s", bsize="10", frame_max=50,
                     backup_linger_ms=0, max_batches_per_rpc=10)
    nu = UpstreamNode(cfg, GeneratorSource(["I1", "I2"], total=10_000), lambda a: Standby() if a == "s" else _Net()(a))
    nu.lock.wait = lambda timeout=None: True
    try:
        for _ in range(3):
            nu._source_loop()
            nu.outbound.backup.loop()
        assert held[0] == 150 and nu.outbound.oqu.trimmed_through == 0
        nu.handle_register_standby(m.RegisterStandby(node="N2", address="s"))
        nu._source_loop()
        nu.outbound.backup.loop()  # the resync: no batches
        nu.outbound.backup.loop()
        assert calls[-1] == (151, 200) and held[0] == 200
        assert nu.counters["standby_registrations"] == 1
        assert not any(k.startswith("backup_error") for k in nu.counters)
    finally:
        nu.stop()


def test_admitted_ticks_parse_the_same_on_the_fast_path_and_anything_else_the_same_every_time():
    good = ticks_batch(500).payloads
    fast = parse_columns(good, {"price", "venue", "volume"}, admitted=True)
    strict = parse_columns(good, {"price", "venue", "volume"})
    assert fast[0] is None and strict[0] is None
    assert all(fast[1][k].equals(strict[1][k]) for k in fast[1])
    mixed = pa.array(good.slice(0, 3).to_pylist() + [b"ACME,5.0,100,1", b"\xff,1,1,1,X"], pa.binary())
    ok, cols = parse_columns(mixed, {"price"}, admitted=True)  # falls back: field counts differ, not UTF-8
    assert ok.to_pylist() == [True, True, True, False, False] and cols["price"].null_count == 2


def test_a_standby_reports_how_far_it_is_behind_the_primary():
    from lazystandby.core.acks import Checkpoint
    from lazystandby.node.operator_node import OperatorNode
    from lazystandby.operators.selection import Selection

    t = [100.0]
    n2 = OperatorNode(NodeConfig(role="standby", listen="s"), Selection("price > 1"), _Net(), clock=lambda: t[0])
    try:
        assert n2.standby_side.standby_lag() == (0, 0.0)
        n2.standby_side.primary_received = 500
        n2.standby_side.primary_seen.extend([(100.0, 200), (101.0, 500)])
        n2.processed = Checkpoint(150, 10)
        t[0] = 103.0
        assert n2.standby_side.standby_lag() == (350, 3.0)  # position 151 was at the primary from t=100 on
        n2.processed = Checkpoint(300, 20)
        assert n2.standby_side.standby_lag() == (200, 2.0)  # 301 from t=101
        n2.covered = (Checkpoint(400, 25), None)  # Nd's output covers through 400: no work left there
        assert n2.standby_side.standby_lag() == (100, 2.0)
        n2.processed = Checkpoint(500, 30)
        assert n2.standby_side.standby_lag() == (0, 0.0)
        assert n2.snapshot()["standby_lag_tuples"] == 0
    finally:
        n2.stop()


def test_a_gathering_takeover_waits_for_nus_resend_or_its_deadline_and_no_longer():
    from lazystandby.core.roles import Role
    from lazystandby.node.operator_node import GATHER_MAX_S, OperatorNode
    from lazystandby.operators.selection import Selection

    t = [100.0]
    n2 = OperatorNode(NodeConfig(role="standby", listen="s"), Selection("price > 1"), _Net(), clock=lambda: t[0])
    try:
        def gathering(role: Role, head: int | None, received: int) -> bool:
            n2.takeover.gathering = True
            n2.state.role = role  # the states of a takeover, set directly: the steps are tested elsewhere
            n2.takeover.gather = None if head is None else (head, t[0] + GATHER_MAX_S)
            n2.inbound.received_through = received
            return n2.takeover.still_gathering()

        assert gathering(Role.PROMOTING, None, 10)  # links being rebuilt: nothing is taken
        assert gathering(Role.PRIMARY, 50, 10)  # Nu's resend through 50 not in yet
        assert not gathering(Role.PRIMARY, 50, 50) and not n2.takeover.gathering  # it is: take everything
        assert gathering(Role.PRIMARY, 50, 10)
        t[0] += GATHER_MAX_S  # a resend that never comes holds the operator this long, no longer
        assert not n2.takeover.still_gathering() and n2.takeover.gather is None
        assert not gathering(Role.STANDBY, None, 10)  # refused by Nd: back to standby, nothing held
    finally:
        n2.stop()


def test_streams_present_are_the_ids_in_the_column_ascending_whatever_its_type():
    from lazystandby.core.seq import streams_present

    assert streams_present(np.array([3, 1, 3, 0], np.uint16)) == [0, 1, 3]
    assert streams_present(np.array([65535, 2], np.uint16)) == [2, 65535]
    assert streams_present(np.array([5, -1, 5], np.int64)) == [-1, 5]  # not ids on the wire: sorted as they are
    assert streams_present(np.array([], np.uint16)) == []
    rng = np.random.default_rng(2)
    col = rng.integers(0, 40, 5000).astype(np.uint16)
    assert streams_present(col) == np.unique(col).tolist()


def test_a_size_past_four_bytes_is_refused_before_anything_is_sent():
    with pytest.raises(ValueError, match="does not fit in 4 bytes"):
        wire._packed_sizes([1 << 32], [10])
    with pytest.raises(ValueError, match="does not fit in 4 bytes"):
        wire._packed_sizes([-1], [10])


def test_sizes_pack_little_endian_in_the_narrowest_width_that_holds_both_lists():
    assert wire._packed_sizes([1, 255], [2, 3]) == (1, bytes([1, 255, 2, 3]))
    # The payload sizes fit one byte; a raw size does not: both lists go two bytes wide.
    assert wire._packed_sizes([1, 2], [256, 3]) == (2, bytes([1, 0, 2, 0, 0, 1, 3, 0]))
    assert wire._packed_sizes([70_000], [1]) == (4, (70_000).to_bytes(4, "little") + (1).to_bytes(4, "little"))
    assert wire._packed_sizes([], []) == (1, b"")


def test_batches_of_no_tuples_keep_their_counts_on_the_wire():
    # batch_tuples 0 reads as "no common count": such a run's counts must travel as the list.
    _, msg = _backup_frame_pb([0, 0], [b"h", b"i"])
    assert (msg.runs[0].batch_tuples, list(msg.runs[0].counts)) == (0, [0, 0])
    assert _read_back(msg).counts == [0, 0]
