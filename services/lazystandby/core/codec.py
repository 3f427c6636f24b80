"""Backup-batch codecs: none, zlib, zstd, zstd with a trained dictionary, and a zstd context kept across
the batches of one link (with or without a dictionary).

Seed 000 compressed each batch with zlib, whose header made a 33-byte tuple 41 bytes at Bsize 1. A zstd
context kept across batches (flushed at every batch, so each batch is decodable on arrival) pays for the
header once per link session, not once per batch. Both ends reset the context together: a new `session`
id starts at index 0, and the receiver refuses an index that does not follow on.
"""

from __future__ import annotations

import io
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import numpy as np
import zstandard as zstd

from .errors import CorruptBatch, DuplicateSequence, OversizedMessage
from .tuples import RunLayout


class CodecName(StrEnum):
    NONE = "none"
    ZLIB = "zlib"
    ZSTD = "zstd"
    ZSTD_DICT = "zstd-dict"
    ZSTD_STREAM = "zstd-stream"
    ZSTD_STREAM_DICT = "zstd-stream-dict"

    @property
    def uses_dictionary(self) -> bool:
        return self in (CodecName.ZSTD_DICT, CodecName.ZSTD_STREAM_DICT)

    @property
    def streaming(self) -> bool:
        return self in (CodecName.ZSTD_STREAM, CodecName.ZSTD_STREAM_DICT)


@dataclass(slots=True)
class EncodedBatch:
    """What travels: the compressed bytes and what the receiver needs to decode them in order."""

    codec: CodecName
    session: int
    index: int
    payload: bytes
    raw_bytes: int
    dictionary: bytes = b""


@dataclass(slots=True)
class EncodedRun:
    """Consecutive batches of one session (indices first_index ..), each compressed on its own, travelling
    together: batch i is payload[sum(payload_sizes[:i]):][:payload_sizes[i]] and decodes to raw_sizes[i]
    bytes. One object per run, not per batch: at Bsize 10 and 0.5 M tuples/s that is 50,000 batches/s."""

    codec: CodecName
    session: int
    first_index: int
    payload: bytes
    payload_sizes: list[int]
    raw_sizes: list[int]
    dictionary: bytes = b""
    # A streaming session's run that opens a new zstd frame: decodable without the runs before it in its
    # session (with the session's dictionary), which lets a standby leave runs it never needs undecoded.
    # Another codec's run is always decodable so; a lazy standby marks it fresh when it holds it (held.py).
    fresh: bool = False

    def __len__(self) -> int:
        return len(self.raw_sizes)

    def check_sizes(self, where: str, max_batch_bytes: int) -> None:
        """What a receiver checks before decoding anything: the payload sizes add up to the payload, one per
        batch, and no batch declares more than `max_batch_bytes` raw bytes (decoding is capped at that)."""
        if len(self.payload_sizes) != len(self) or sum(self.payload_sizes) != len(self.payload):
            raise CorruptBatch(f"{where}: payload sizes do not add up to the {len(self.payload)} bytes sent")
        if self.raw_sizes and max(self.raw_sizes) > max_batch_bytes:
            raise OversizedMessage(f"{where}: a batch of {max(self.raw_sizes)} raw bytes exceeds {max_batch_bytes}")

    def payloads(self) -> list[memoryview]:
        """Each batch's compressed bytes (views into `payload`)."""
        out, off, view = [], 0, memoryview(self.payload)
        for size in self.payload_sizes:
            out.append(view[off:off + size])
            off += size
        return out


# zstd's dictionary trainer (fastCover) with its segment and d-mer sizes set, instead of trying a range of
# them. Nu trains at start-up, on the backup thread, while the source waits for the first backup call
# (backup_lag_max): a third of the training time, and a backup no bigger (docs/benchmarks.md, "Tuning":
# codec parameters).
DICT_TRAIN = {"k": 200, "d": 8}


def train_dictionary(samples: list[bytes], size: int) -> bytes:
    """A zstd dictionary for these samples; raw-content dictionary when there are too few to train on."""
    try:
        return zstd.train_dictionary(size, samples, **DICT_TRAIN).as_bytes()
    except zstd.ZstdError:
        return b"".join(samples)[-size:]


def _zstd_dict(data: bytes) -> zstd.ZstdCompressionDict:
    # A trained dictionary starts with zstd's magic; anything else is raw content.
    kind = zstd.DICT_TYPE_AUTO if data[:4] == b"\x37\xa4\x30\xec" else zstd.DICT_TYPE_RAWCONTENT
    return zstd.ZstdCompressionDict(data, dict_type=kind)


# A streaming context flushes one block of a few hundred bytes per batch. The tables zstd sizes for a level
# and an unknown input (512 KB of hash and 256 KB of chain at level 3, for a 2 MB window) then miss the cache
# on every call, and index far more history than a batch finds matches in. Small tables at level 1 are
# faster per batch than level 3 and as small (docs/benchmarks.md, "Tuning": codec parameters).
SMALL_TABLES = {"window_log": 17, "hash_log": 12, "chain_log": 12}


def small_tables(codec: CodecName, bsize: int | None) -> bool:
    """Whether a link's context uses SMALL_TABLES: a streaming codec past Bsize 2 (at Bsize 1-2, level 9's
    own tables find the matches that make a tuple or two per block worth compressing)."""
    return codec.streaming and not (bsize is not None and bsize <= 2)


def default_level(codec: CodecName, bsize: int | None) -> int:
    """zstd's level when none is set. A streaming context at Bsize 1-2 compresses a tuple or two per call:
    level 9 costs little more there than 3 (5 against 1.5 us a batch) and saves a tenth of the bytes. From
    Bsize 3 up, each flush at level 9 costs 30 us a batch against 3 at level 3, which at Bsize 10 and half a
    million tuples/s would take more than a core. There a streaming context runs level 1 on small tables
    (`small_tables`), which compresses a Bsize-10 batch faster than level 3 on its own tables and a little
    smaller; with the seqs written as steps (tuples.encode_runs), under 0.3 of the primary bytes."""
    if small_tables(codec, bsize):
        return 1
    return 9 if codec.streaming else 3


class RunCompressor(Protocol):
    """A zstd context that compresses a run's batches in one call (lazystandby.native), each flushed in
    one stream, as python-zstandard's compressobj would, or (`frames`) each a frame of its own, as its
    compress would: any zstd decoder with the session's dictionary reads them."""

    backend: str

    def compress(self, heads: memoryview, head_size: int, data: memoryview,
                 cuts: np.ndarray) -> tuple[bytes, list[int]]: ...


class RunCompressorFactory(Protocol):
    """Makes a RunCompressor for a session's parameters and dictionary; `frames`: a frame per batch."""

    def __call__(self, params: zstd.ZstdCompressionParameters, dictionary: bytes, *,
                 frames: bool = False) -> RunCompressor: ...


class BatchEncoder:
    """The sending end of one link's codec. Dictionary codecs start without a dictionary (plain zstd)
    until `set_dictionary` is called, which opens a new session carrying it. With `native`, a streaming
    link on SMALL_TABLES and a zstd or zstd-dict link compress their runs through it (one call per run);
    the other links, and every link without it, through python-zstandard (zlib: the standard library)."""

    def __init__(self, codec: CodecName, *, level: int = 0, bsize: int | None = 10,
                 native: RunCompressorFactory | None = None) -> None:
        self.codec = CodecName(codec)
        self._make_native = native if self.codec not in (CodecName.NONE, CodecName.ZLIB) else None
        self.level = level or default_level(self.codec, bsize)
        self.small_tables = small_tables(self.codec, bsize)
        self.dictionary = b""
        self.session = random.getrandbits(62) | 1
        self._index = 0
        self._compressor: zstd.ZstdCompressor | None = None
        self._stream: zstd.ZstdCompressionObj | None = None
        self._open()

    @property
    def needs_dictionary(self) -> bool:
        return self.codec.uses_dictionary and not self.dictionary

    def set_dictionary(self, dictionary: bytes) -> None:
        self.dictionary = dictionary
        self.reset()

    def reset(self) -> None:
        """Start a new session, as after a reconnect or a refused batch: the receiver resets too."""
        self.session += 1
        self._index = 0
        self._open()

    def _open(self) -> None:
        """A fresh zstd context for the session: the native one where it serves (then python-zstandard's is
        not built: with a dictionary that costs a digest of it per session and per fresh frame)."""
        self._native: RunCompressor | None = None
        self._compressor = self._stream = None
        params = (zstd.ZstdCompressionParameters.from_level(self.level, write_content_size=1, **SMALL_TABLES)
                  if self.small_tables else None)
        if self._make_native is not None and not self.codec.streaming:
            # A frame per batch, sized by zstd to each batch: only the level is the link's.
            self._native = self._make_native(zstd.ZstdCompressionParameters.from_level(self.level),
                                             self.dictionary, frames=True)
            return
        if params is not None and self._make_native is not None:
            self._native = self._make_native(params, self.dictionary)
            return
        dict_data = _zstd_dict(self.dictionary) if self.dictionary else None
        self._compressor = (zstd.ZstdCompressor(compression_params=params, dict_data=dict_data) if params is not None
                            else zstd.ZstdCompressor(level=self.level, dict_data=dict_data, write_checksum=False,
                                                     write_content_size=True))
        if self.codec.streaming:
            self._stream = self._compressor.compressobj()

    def encode(self, raw: bytes) -> EncodedBatch:
        return self.encode_many([raw])[0]

    @property
    def backend(self) -> str:
        """What compresses this link's batches."""
        return self._native.backend if self._native is not None else f"python-zstandard {zstd.__version__}"

    def encode_run(self, raws: list[bytes], *, fresh: bool = False) -> EncodedRun:
        """`encode_many` as one run (no object per batch). `fresh` (streaming codecs): the run opens a new
        zstd frame, so that it decodes without the session's earlier runs; a session's first run always
        does."""
        return self._run([len(r) for r in raws], fresh, lambda: self._compress_joined(raws))

    def encode_layout(self, layout: RunLayout, *, fresh: bool = False) -> EncodedRun:
        """`encode_run(layout.joined())`, without joining when the native compressor takes the parts."""
        if self._native is None:
            return self.encode_run(layout.joined(), fresh=fresh)
        # self._native read when called: a fresh frame replaces it first
        return self._run(layout.raw_sizes(), fresh,
                         lambda: self._native.compress(layout.heads, layout.head_size, layout.data, layout.cuts))

    def _run(self, raw_sizes: list[int], fresh: bool, compress: Callable[[], tuple[bytes, list[int]]]) -> EncodedRun:
        fresh = self.codec.streaming and (fresh or self._index == 0)
        if fresh and self._index:
            self._open()  # the same session and dictionary; no history from the runs before
        payload, sizes = compress()
        run = EncodedRun(self.codec, self.session, self._index, payload, sizes, raw_sizes,
                         self.dictionary if (self._index == 0 and self.codec.uses_dictionary) else b"", fresh)
        self._index += len(raw_sizes)
        return run

    def _compress_joined(self, raws: list[bytes]) -> tuple[bytes, list[int]]:
        if self._native is not None:
            cuts = np.zeros(len(raws) + 1, np.int64)
            np.cumsum([len(r) for r in raws], out=cuts[1:])
            return self._native.compress(memoryview(b""), 0, memoryview(b"".join(raws)), cuts)
        payloads = self._compress(raws)
        return b"".join(payloads), [len(p) for p in payloads]

    def _compress(self, raws: list[bytes]) -> list[bytes]:
        c = self.codec
        if c is CodecName.NONE:
            return list(raws)
        if c is CodecName.ZLIB:
            return [zlib.compress(r) for r in raws]
        if self._native is not None:
            joined, sizes = self._compress_joined(raws)
            cuts = np.cumsum([0, *sizes]).tolist()
            return [joined[cuts[i]:cuts[i + 1]] for i in range(len(raws))]
        if self._stream is not None:
            compress, flush, block = self._stream.compress, self._stream.flush, zstd.COMPRESSOBJ_FLUSH_BLOCK
            return [compress(r) + flush(block) for r in raws]
        assert self._compressor is not None
        return [self._compressor.compress(r) for r in raws]

    def encode_many(self, raws: list[bytes]) -> list[EncodedBatch]:
        """Batches in order, each decodable after the ones before it, one compression call per batch.
        (zstd's multi_compress_to_buffer was tried: it releases the GIL, and with Nu's source thread busy,
        getting it back made 10 batches cost 115 us instead of 34 us.)"""
        c = self.codec
        payloads = self._compress(raws)
        out = []
        for raw, payload in zip(raws, payloads, strict=True):
            out.append(EncodedBatch(
                codec=c,
                session=self.session,
                index=self._index,
                payload=payload,
                raw_bytes=len(raw),
                dictionary=self.dictionary if (self._index == 0 and c.uses_dictionary) else b"",
            ))
            self._index += 1
        return out


class _Capped(io.RawIOBase):
    """The sink of a streaming decompressor: refuses to hold more than `cap` bytes of one batch, so a batch
    that inflates past what its sender declared fails after `cap` bytes, not after all of them."""

    def __init__(self) -> None:
        self.cap = 0
        self.parts: list[bytes] = []
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # type: ignore[override]
        self.size += len(b)
        if self.size > self.cap:
            raise OversizedMessage(f"inflates past the {self.cap} bytes declared")
        self.parts.append(bytes(b))
        return len(b)

    def take(self, cap: int) -> None:
        self.cap, self.parts, self.size = cap, [], 0


class _Session:
    """One codec session of a link: the decompression context its batches share (streaming codecs) and
    the dictionary it was opened with."""

    def __init__(self, codec: CodecName, session: int, dictionary: bytes, max_write: int = 1 << 20) -> None:
        self.codec = codec
        self.session = session
        self.dictionary = dictionary
        self.broken = False
        d = _zstd_dict(dictionary) if dictionary else None
        # Built once per session: loading a dictionary costs far more than decoding one small batch.
        self.dctx = zstd.ZstdDecompressor(dict_data=d, max_window_size=1 << 27)
        self.sink = _Capped()
        # python-zstandard's writer emits at most write_size bytes of output per write; whatever a write
        # decodes beyond that comes out only with the next write (flush does not drain it). So consecutive
        # batches are written together only while their declared output fits one write, and write_size (1 MiB)
        # bounds both that and what a bomb can inflate to before the cap sees it. (A single batch of more
        # than 1 MiB, Bsize times the tuple size, is refused as corrupt: its tail would lag a write behind.)
        self.max_write = max_write
        self.stream = (self.dctx.stream_writer(self.sink, write_size=max_write) if codec.streaming else None)

    def decode(self, batch: EncodedBatch) -> bytes:
        """The batch's bytes, never more than it declared (`raw_bytes`): every path is bounded, including
        a zstd frame whose header claims a larger size and a stream that keeps inflating."""
        c, limit = batch.codec, batch.raw_bytes
        if c is CodecName.NONE:
            return batch.payload
        if c is CodecName.ZLIB:
            d = zlib.decompressobj()
            out = d.decompress(batch.payload, limit + 1)
            if not d.eof or len(out) > limit:
                raise zlib.error("truncated zlib stream, or one that inflates past its declared size")
            return out
        if self.stream is not None:
            return self.decode_stream(batch.payload, [len(batch.payload)], [limit])
        declared = zstd.frame_content_size(batch.payload)
        if declared > limit:
            # python-zstandard allocates a frame's declared size whatever max_output_size says: refuse first.
            raise OversizedMessage(f"its zstd frame declares {declared} bytes")
        return self.dctx.decompress(batch.payload, max_output_size=limit)

    def decode_stream(self, payload: bytes | memoryview, payload_sizes: list[int], sizes: list[int]) -> bytes:
        """Blocks of this session's stream, in order (`payload` holds them back to back, payload_sizes[i]
        bytes each), each flushed by the sender, never more than their declared `sizes` in all. Consecutive
        blocks are written together, as slices of `payload`, while their sizes fit one write's output; a
        block that inflates past its size fails at the cap."""
        assert self.stream is not None
        self.sink.take(sum(sizes))
        view = memoryview(payload)
        try:
            for start, end in write_groups(payload_sizes, sizes, self.max_write):
                self.stream.write(view[start:end])
            self.stream.flush()
        finally:
            parts, self.sink.parts = self.sink.parts, []
        return b"".join(parts)


def write_groups(payload_sizes: list[int], sizes: list[int], room: int) -> list[tuple[int, int]]:
    """Byte ranges of a payload (blocks back to back, payload_sizes[i] bytes each) to write together: as
    many consecutive blocks as declare at most `room` bytes of output between them, a block declaring more
    on its own. Found with a search per write, not a step per block (a run holds thousands of blocks and
    one or two writes)."""
    if len(payload_sizes) != len(sizes):  # the callers check a run's lists against its count first
        raise ValueError(f"{len(payload_sizes)} payload sizes for {len(sizes)} blocks")
    if not sizes:
        return []
    out_end = np.cumsum(sizes, dtype=np.int64)
    in_end = np.cumsum(payload_sizes, dtype=np.int64)
    groups, i, n, base = [], 0, len(sizes), 0
    while i < n:
        # The last block j with out_end[j] - base <= room, and at least block i.
        j = max(i, int(np.searchsorted(out_end, base + room, side="right")) - 1)
        groups.append((int(in_end[i - 1]) if i else 0, int(in_end[j])))
        base, i = int(out_end[j]), j + 1
    return groups


def opens_session(where: str, session: int, index: int, codec: CodecName,
                  held: tuple[int, int, CodecName] | None) -> bool:
    """The protocol's rule for the next batch (or run) of a link, given where its session stands (`held`:
    the session, the index its next batch must carry, its codec; None: no session open): True when it
    opens a new session (at index 0), False when it follows on in the one held. Anything else is refused:
    an index already held (DuplicateSequence), a gap, a new session past index 0, or another codec within a
    session (CorruptBatch). The decoder and a lazy standby's ledger both judge by it."""
    if held is None or session != held[0]:
        if index != 0:
            raise CorruptBatch(f"{where}: a new session must start at index 0")
        return True
    if index < held[1]:
        raise DuplicateSequence(f"{where}: already held up to index {held[1] - 1}")
    if index != held[1]:
        raise CorruptBatch(f"{where}: expected index {held[1]}")
    if codec is not held[2]:
        raise CorruptBatch(f"{where}: codec {codec} in a {held[2]} session")
    return False


@dataclass(frozen=True, slots=True)
class DecoderPosition:
    """Where a decoder stands: the session it follows and the last index it decoded there."""

    session: _Session | None
    last_index: int


class BatchDecoder:
    """The receiving end of one link's codec: follows the sender's sessions, refuses batches out of order.

    Two phases, so that nothing changes for batches the receiver then refuses: `decode_many` decodes a
    frame's batches and returns where the decoder would stand; `commit` moves it there. A batch that opens
    a new session is decoded in that session's own context, and a refused one leaves the current session
    as it was. (A streaming context that decoded part of a refused frame is marked broken: its sender
    resets, as it does after any refusal.)"""

    def __init__(self, node: str, *, max_batch_bytes: int = 64 << 20) -> None:
        self.node = node
        self.max_batch_bytes = max_batch_bytes
        self.position = DecoderPosition(None, -1)

    @property
    def session(self) -> int:
        ses = self.position.session
        return ses.session if ses is not None else 0

    @property
    def last_index(self) -> int:
        return self.position.last_index

    def decode(self, batch: EncodedBatch) -> bytes:
        """Decode one batch and move on past it."""
        raws, pos = self.decode_many([batch])
        self.commit(pos)
        return raws[0]

    def decode_many(self, batches: list[EncodedBatch],
                    pos: DecoderPosition | None = None) -> tuple[list[bytes], DecoderPosition]:
        pos, out = (self.position if pos is None else pos), []
        for b in batches:
            raw, pos = self._decode(b, pos)
            out.append(raw)
        return out, pos

    def decode_run(self, run: EncodedRun, pos: DecoderPosition | None = None) -> tuple[bytes, DecoderPosition]:
        """A run's batches decoded and joined (raw_sizes say where each ends), from `pos` (default: where
        the decoder stands); a fresh run (`EncodedRun.fresh`) also from a position in another session or
        behind it. A streaming session decodes the whole run in one call, capped at the sizes declared; the
        other codecs batch by batch, `none` as it came. The same checks as `decode_many`."""
        pos = self.position if pos is None else pos
        n = len(run)
        where = f"{self.node}: backup run session {run.session} indices {run.first_index}..{run.first_index + n - 1}"
        if not n:
            return b"", pos
        run.check_sizes(where, self.max_batch_bytes)
        head = EncodedBatch(run.codec, run.session, run.first_index, b"", 0, run.dictionary)
        ses = self._fresh_session(head, pos, where) if run.fresh else self._session_for(head, pos, where)
        if run.codec.streaming:
            raw = self._decoded(ses, where, sum(run.raw_sizes),
                                lambda: ses.decode_stream(run.payload, run.payload_sizes, run.raw_sizes))
        elif run.codec is CodecName.NONE:
            if run.payload_sizes != run.raw_sizes:
                i = next(i for i, (p, r) in enumerate(zip(run.payload_sizes, run.raw_sizes, strict=True)) if p != r)
                raise CorruptBatch(f"{where}: uncompressed batch {run.first_index + i} of {run.payload_sizes[i]} "
                                   f"bytes declares {run.raw_sizes[i]}")
            raw = bytes(run.payload)
        else:
            raw = b"".join(self._decoded(ses, f"{where}: batch {run.first_index + i}", size, lambda p=p, size=size:
                                         ses.decode(EncodedBatch(run.codec, run.session, 0, p, size)))
                           for i, (p, size) in enumerate(zip(run.payloads(), run.raw_sizes, strict=True)))
        return raw, DecoderPosition(ses, run.first_index + n - 1)

    def commit(self, pos: DecoderPosition) -> None:
        self.position = pos

    def _decode(self, batch: EncodedBatch, pos: DecoderPosition) -> tuple[bytes, DecoderPosition]:
        where = f"{self.node}: backup batch session {batch.session} index {batch.index}"
        if batch.raw_bytes > self.max_batch_bytes:
            raise OversizedMessage(f"{where}: {batch.raw_bytes} raw bytes exceeds {self.max_batch_bytes}")
        ses = self._session_for(batch, pos, where)
        raw = self._decoded(ses, where, batch.raw_bytes, lambda: ses.decode(batch))
        return raw, DecoderPosition(ses, batch.index)

    @staticmethod
    def _decoded(ses: _Session, where: str, declared: int, decode) -> bytes:
        """`decode()` in session `ses`, its failures as the protocol's errors and its size checked against
        what the sender declared; a streaming context that failed is marked broken (the sender resets)."""
        try:
            raw = decode()
        except OversizedMessage as e:
            ses.broken = ses.codec.streaming
            raise OversizedMessage(f"{where}: {ses.codec} batch refused: {e.message}; "
                                   f"the sender declared {declared}") from None
        except (zstd.ZstdError, zlib.error) as e:
            ses.broken = ses.codec.streaming
            raise CorruptBatch(f"{where}: {ses.codec} does not decode: {e}") from None
        if len(raw) != declared:
            ses.broken = ses.codec.streaming
            raise CorruptBatch(f"{where}: decoded {len(raw)} bytes; the sender said {declared}")
        return raw

    def _session_for(self, batch: EncodedBatch, pos: DecoderPosition, where: str) -> _Session:
        """The session `batch` (the first of a run) decodes in: the current one if it follows on there, a
        new one if it opens one (index 0); anything else is refused."""
        ses = pos.session
        held = None if ses is None else (ses.session, pos.last_index + 1, ses.codec)
        if opens_session(where, batch.session, batch.index, batch.codec, held):
            return self._open(batch, ses)
        assert ses is not None
        if ses.broken:
            raise CorruptBatch(f"{where}: the session's context was lost; the sender must reset")
        return ses

    def _fresh_session(self, batch: EncodedBatch, pos: DecoderPosition, where: str) -> _Session:
        """The context a fresh run (a new zstd frame) decodes in: a new one, whatever the decoder held
        before, in the run's session; past the session's first run only forward, with the dictionary the
        run carries or the session's own (a run of another session carries its own, if it had one)."""
        ses = pos.session
        same = ses is not None and ses.session == batch.session
        if same and batch.index <= pos.last_index:
            raise DuplicateSequence(f"{where}: already decoded up to index {pos.last_index}")
        if batch.index == 0:
            return self._open(batch, ses)
        if same and batch.codec is not ses.codec:
            raise CorruptBatch(f"{where}: codec {batch.codec} in a {ses.codec} session")
        if same and not batch.codec.streaming:
            return ses  # no context between its batches to start again: keep the one the dictionary is loaded in
        return self._open(batch, ses if same else None)

    def _open(self, batch: EncodedBatch, current: _Session | None) -> _Session:
        """A context for the session `batch` opens; a dictionary session without a dictionary of its own
        keeps the one the link had."""
        dictionary = b""
        if batch.codec.uses_dictionary:
            dictionary = batch.dictionary or (current.dictionary if current is not None else b"")
        return _Session(batch.codec, batch.session, dictionary)
