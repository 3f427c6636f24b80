"""The native backup compressor (lazystandby.native): the same bytes as python-zstandard, one call per run,
a clear error on bad input, and python-zstandard wherever it is not available."""

import numpy as np
import pytest
import zstandard as zstd

from lazystandby import native
from lazystandby.core.batching import RunEncoder
from lazystandby.core.codec import BatchDecoder, BatchEncoder, CodecName
from lazystandby.core.tuples import TupleBatch, decode_runs, encode_runs, layout_runs
from lazystandby.sources.generator import Interleaved

needs_native = pytest.mark.skipif(not native.available(), reason=f"native compressor not built: {native.backend()}")


def ticks(n: int, first: int = 1) -> TupleBatch:
    idx, seqs, payloads = Interleaved(["I1", "I2", "I3"]).take(first - 1 + n)
    return TupleBatch(1, idx + 1, seqs, payloads).slice(first, first + n)


def encoded(make, bsize: int, run: int, k: int, fresh_every: int):
    enc = RunEncoder(CodecName.ZSTD_STREAM_DICT, bsize=bsize, fresh_every=fresh_every, dict_samples=50, native=make)
    enc.encoder.session = 7  # both encoders in the same session, so their runs compare byte for byte
    return enc, [enc.encode(ticks(run, 1 + i * run)) for i in range(k)]


def test_layout_runs_joined_is_encode_runs():
    batch = ticks(95, 11)
    layout = layout_runs(batch, 10, seq_deltas=True)
    assert layout.count == 9
    assert layout.joined() == encode_runs(batch, 10, seq_deltas=True)[:9]
    assert layout.raw_sizes() == [len(r) for r in layout.joined()]


@needs_native
@pytest.mark.parametrize("bsize", [3, 10])
def test_native_runs_decode_as_python_zstandards_do_and_are_no_bigger(bsize):
    run = 60 * bsize
    nat_enc, nat = encoded(native.compressor(), bsize, run, 12, fresh_every=4 * run)
    py_enc, py = encoded(None, bsize, run, 12, fresh_every=4 * run)
    assert nat_enc.encoder.backend.startswith("libzstd") and py_enc.encoder.backend.startswith("python-zstandard")
    assert [r.encoded.fresh for r in nat] == [r.encoded.fresh for r in py]
    assert [r.encoded.raw_sizes for r in nat] == [r.encoded.raw_sizes for r in py]
    with_dict = [i for i, r in enumerate(nat) if r.encoded.dictionary]
    assert with_dict  # the dictionary's session came in on the way
    for a, b in zip(nat[:with_dict[0]], py[:with_dict[0]], strict=True):  # before it: the very same bytes
        assert (a.encoded.payload, a.encoded.payload_sizes) == (b.encoded.payload, b.encoded.payload_sizes)
    # With it, native loads the dictionary into its tables (python-zstandard searches it beside them): other
    # bytes, as small within 1 % (over 200,000 ticks here: -0.02 % at Bsize 10, +0.04 % at Bsize 3).
    nat_bytes, py_bytes = (sum(len(r.encoded.payload) for r in rs) for rs in (nat, py))
    assert abs(nat_bytes - py_bytes) <= 0.01 * py_bytes
    dec = BatchDecoder("N'")
    for i, r in enumerate(nat):
        raw, pos = dec.decode_run(r.encoded)
        dec.commit(pos)
        back = decode_runs(raw, r.first, bsize, r.encoded.raw_sizes)
        assert back.payloads.to_pylist() == ticks(run, 1 + i * run).payloads.to_pylist()


@needs_native
@pytest.mark.parametrize("codec", [CodecName.ZSTD, CodecName.ZSTD_DICT])
def test_a_codec_that_does_not_stream_writes_a_frame_per_batch_natively(codec):
    """zstd and zstd-dict: every batch a frame of its own that declares its size, as python-zstandard's
    compress writes it; any decoder with the session's dictionary reads each alone."""
    def runs(make):
        enc = RunEncoder(codec, bsize=10, dict_samples=50, native=make)
        return enc, [enc.encode(ticks(600, 1 + i * 600)) for i in range(5)]

    nat_enc, nat = runs(native.compressor())
    py_enc, py = runs(None)
    assert nat_enc.encoder.backend.startswith("libzstd") and py_enc.encoder.backend.startswith("python-zstandard")
    assert [r.encoded.raw_sizes for r in nat] == [r.encoded.raw_sizes for r in py]
    nat_bytes, py_bytes = (sum(len(r.encoded.payload) for r in rs) for rs in (nat, py))
    assert nat_bytes <= 1.01 * py_bytes  # sized to each batch as python-zstandard's are (no dictionary id)
    dictionary = next((r.encoded.dictionary for r in nat if r.encoded.dictionary), b"")
    assert bool(dictionary) == codec.uses_dictionary
    alone = zstd.ZstdDecompressor(dict_data=zstd.ZstdCompressionDict(dictionary) if dictionary else None)
    last = nat[-1].encoded
    for frame, size in zip(last.payloads(), last.raw_sizes, strict=True):
        assert zstd.frame_content_size(bytes(frame)) == size
        assert len(alone.decompress(bytes(frame))) == size
    dec = BatchDecoder("N'")
    for i, r in enumerate(nat):
        raw, pos = dec.decode_run(r.encoded)
        dec.commit(pos)
        assert decode_runs(raw, r.first, 10, r.encoded.raw_sizes).payloads.to_pylist() == \
            ticks(600, 1 + i * 600).payloads.to_pylist()


@needs_native
def test_encode_many_on_a_native_link_keeps_one_stream():
    """The per-batch API on a native link goes through the same context: batches still decode in order."""
    raws = encode_runs(ticks(40), 10, seq_deltas=False)
    enc = BatchEncoder(CodecName.ZSTD_STREAM, bsize=10, native=native.compressor())
    batches = enc.encode_many(raws[:2]) + [enc.encode(raws[2]), *enc.encode_many(raws[3:])]
    dec = BatchDecoder("N'")
    assert [dec.decode(b) for b in batches] == raws


@needs_native
def test_a_run_whose_cuts_overrun_its_data_is_refused_before_zstd_sees_it():
    layout = layout_runs(ticks(30), 10)
    comp = native.RunCompressor(zstd.ZstdCompressionParameters.from_level(1))
    cuts = layout.cuts.copy()
    cuts[-1] += 5
    with pytest.raises(ValueError, match="shorter than its cuts"):
        comp.compress(layout.heads, layout.head_size, layout.data, cuts)
    with pytest.raises(ValueError, match="shorter than its cuts"):
        comp.compress(layout.heads[:-1], layout.head_size, layout.data, layout.cuts)
    assert comp.compress(layout.heads, layout.head_size, layout.data, layout.cuts)[1]  # still usable


@needs_native
@pytest.mark.parametrize(("frames", "code", "message"), [(False, -1, "failed"), (True, -1, "failed"),
                                                         (False, -2, "exceeded its bound"),
                                                         (True, -3, "refused a batch's size")])
def test_a_zstd_error_breaks_the_context_until_a_new_session(monkeypatch, frames, code, message):
    layout = layout_runs(ticks(30), 10)
    comp = native.RunCompressor(zstd.ZstdCompressionParameters.from_level(1), frames=frames)
    assert comp.compress(layout.heads, layout.head_size, layout.data, layout.cuts)[1]
    monkeypatch.setattr(comp._libs, "frames" if frames else "run", lambda *a: code)
    with pytest.raises(zstd.ZstdError, match=message):
        comp.compress(layout.heads, layout.head_size, layout.data, layout.cuts)
    monkeypatch.undo()
    with pytest.raises(zstd.ZstdError, match="broken"):
        comp.compress(layout.heads, layout.head_size, layout.data, layout.cuts)


def test_without_the_library_the_codec_compresses_through_python_zstandard(monkeypatch):
    monkeypatch.setattr(native, "_LIBS", None)
    assert native.compressor() is None and not native.available()
    assert native.backend().startswith("python-zstandard")
    with pytest.raises(RuntimeError, match="not available"):
        native.RunCompressor(zstd.ZstdCompressionParameters.from_level(1))
    enc = RunEncoder(CodecName.ZSTD_STREAM_DICT, bsize=10, native=native.compressor())
    assert enc.encoder.backend.startswith("python-zstandard")
    r = enc.encode(ticks(40))
    raw, _ = BatchDecoder("N'").decode_run(r.encoded)
    assert decode_runs(raw, 1, 10, r.encoded.raw_sizes).payloads.to_pylist() == ticks(40).payloads.to_pylist()


def test_disabled_by_environment(monkeypatch):
    monkeypatch.setenv(native.DISABLE_ENV, "0")
    assert native._load() is None


def test_build_compiles_a_loadable_library_and_reports_a_missing_compiler(tmp_path, capsys):
    assert native.build(tmp_path / "x", cc=str(tmp_path / "no-such-cc")) is None
    assert "failed" in capsys.readouterr().out
    out = native.build(tmp_path / "ok")
    if out is None:
        pytest.skip("no C compiler here")
    import ctypes

    lib = ctypes.CDLL(str(out))
    assert lib.ls_compress_run and lib.ls_compress_frames
    assert not list((tmp_path / "ok").glob("*.tmp"))


def test_a_library_built_before_frames_is_not_used(tmp_path, monkeypatch):
    """A _zrun.so from before ls_compress_frames (`make native` rebuilds it when zrun.c changes): the codec
    compresses through python-zstandard, and says so, rather than fail on the first zstd link."""
    import shutil
    import subprocess

    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler here")
    (tmp_path / "old.c").write_text("long long ls_compress_run(void) { return -1; }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / native.LIBRARY), str(tmp_path / "old.c")], check=True)
    monkeypatch.setattr(native, "HERE", tmp_path)
    assert native._load() is None


def test_a_run_that_is_not_whole_batches_is_refused():
    with pytest.raises(ValueError, match="not whole batches"):
        RunEncoder(CodecName.ZSTD_STREAM, bsize=10).encode(ticks(25))
    assert np.array_equal(layout_runs(ticks(25), 10).cuts, layout_runs(ticks(20), 10).cuts)
