"""Nu's backup compression in one call per run: `RunCompressor`, over libzstd and `zrun.c`; for the
streaming codecs and, a frame per batch, for zstd and zstd-dict.

Why: python-zstandard takes two calls per batch (compress, then flush), and lets go of the GIL around
each. At Bsize 10 and a million tuples/s that is 200,000 calls a second, each one giving the GIL to Nu's
source or primary thread and waiting to get it back, with a Python join before each to make the batch's
bytes. `ls_compress_run` (zrun.c) compresses all of a run's batches in one call through ctypes, which lets
go of the GIL once for the whole run; it reads each batch's head and payload where `tuples.layout_runs`
left them, so nothing is joined. The bytes are zstd's streaming format, flushed batch by batch, as
python-zstandard's compressobj writes them: byte for byte without a dictionary; with one, which this
loads into the context's tables (python-zstandard cannot ask for that), faster and as small within a few
in 10,000. The receiving end does not know which wrote them.

zstd and zstd-dict take the same path with `frames`: each batch a frame of its own, as python-zstandard's
ZstdCompressor.compress writes one (its size in the header, tables sized to it), one call and one GIL
release per run instead of one per batch: less of Nu's CPU per tuple with zstd and zstd-dict
(docs/benchmarks.md, "Tuning": native codec); the zstd work itself is what remains.

`zrun.c` is compiled when the package is installed (setup.py, `make setup`: build.py). Where it was not
(no C compiler), or no libzstd >= 1.4 loads, or LS_ZSTD_NATIVE=0, `available()` is False and the codec
compresses through python-zstandard as before (`backend()` says which, in the status and the bench).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import weakref

import numpy as np
import zstandard as zstd

from .build import HERE, LIBRARY, build  # noqa: F401  (build: `make setup`, setup.py)

DISABLE_ENV = "LS_ZSTD_NATIVE"  # "0": python-zstandard always (a fallback kept tested)

# zstd.h's stable parameter ids (ZSTD_cParameter) and dictionary loading constants.
_LEVEL = 100
_PARAMS = {"window_log": 101, "hash_log": 102, "chain_log": 103, "search_log": 104, "min_match": 105,
           "target_length": 106, "strategy": 107}
_CONTENT_SIZE_FLAG, _CHECKSUM_FLAG, _DICT_ID_FLAG = 200, 201, 202
_DLM_BY_COPY, _DCT_AUTO = 0, 0
# ZSTD_c_forceAttachDict (experimental, zstd >= 1.4.5) = ZSTD_dictForceLoad: the dictionary is loaded into the
# context's own tables at each frame's start, instead of searched beside them on every block: faster per
# Bsize-10 batch and no larger (docs/benchmarks.md, "Tuning": native codec). A frame starts once per
# session or FRESH_EVERY tuples, so loading costs nothing seen.
_FORCE_ATTACH_DICT, _DICT_FORCE_LOAD = 1001, 3
_MIN_VERSION = 10400  # ZSTD_compressStream2 and the parameter API


class _Libs:
    def __init__(self, zstd_lib: ctypes.CDLL, run_lib: ctypes.CDLL) -> None:
        z = zstd_lib
        z.ZSTD_createCCtx.restype = ctypes.c_void_p
        z.ZSTD_freeCCtx.argtypes = [ctypes.c_void_p]
        z.ZSTD_CCtx_setParameter.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        z.ZSTD_CCtx_setParameter.restype = ctypes.c_size_t
        z.ZSTD_CCtx_loadDictionary_advanced.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                                        ctypes.c_int, ctypes.c_int]
        z.ZSTD_CCtx_loadDictionary_advanced.restype = ctypes.c_size_t
        z.ZSTD_isError.argtypes = [ctypes.c_size_t]
        z.ZSTD_isError.restype = ctypes.c_uint
        z.ZSTD_getErrorName.argtypes = [ctypes.c_size_t]
        z.ZSTD_getErrorName.restype = ctypes.c_char_p
        self.zstd = z
        run = run_lib.ls_compress_run
        run.restype = ctypes.c_longlong
        run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong,
                        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_longlong,
                        ctypes.c_void_p]
        self.run = run
        # A library built before ls_compress_frames has none (AttributeError: not available; `make native`
        # rebuilds it whenever zrun.c changes).
        frames = run_lib.ls_compress_frames
        frames.restype = ctypes.c_longlong
        frames.argtypes = [*run.argtypes[:2], ctypes.c_void_p, *run.argtypes[2:]]  # set_pledged after is_error
        self.frames = frames
        self.pledge = ctypes.cast(z.ZSTD_CCtx_setPledgedSrcSize, ctypes.c_void_p).value
        self.stream2 = ctypes.cast(z.ZSTD_compressStream2, ctypes.c_void_p).value
        self.is_error = ctypes.cast(z.ZSTD_isError, ctypes.c_void_p).value
        self.version = z.ZSTD_versionNumber()


def _load() -> _Libs | None:
    if os.environ.get(DISABLE_ENV, "1") == "0" or not (HERE / LIBRARY).exists():
        return None
    for name in ("libzstd.so.1", ctypes.util.find_library("zstd")):
        if not name:
            continue
        try:
            z = ctypes.CDLL(name)  # CDLL, not PyDLL: each call lets go of the GIL
            z.ZSTD_versionNumber.restype = ctypes.c_uint
            if z.ZSTD_versionNumber() < _MIN_VERSION:
                continue
            return _Libs(z, ctypes.CDLL(str(HERE / LIBRARY)))
        except (OSError, AttributeError):
            continue
    return None


_LIBS = _load()


def available() -> bool:
    return _LIBS is not None


def backend() -> str:
    """Which library compresses the zstd codecs' runs, for the status and the bench."""
    if _LIBS is None:
        return f"python-zstandard {zstd.__version__}"
    v = _LIBS.version
    return f"libzstd {v // 10000}.{v // 100 % 100}.{v % 100} via zrun.c"


def compressor() -> type[RunCompressor] | None:
    """What Nu passes to its RunEncoder (core.codec.RunCompressorFactory): None when not available()."""
    return RunCompressor if _LIBS is not None else None


class RunCompressor:
    """One zstd context (one codec session) with `params` and `dictionary` (zstd's format or raw content,
    as python-zstandard's DICT_TYPE_AUTO reads it). `compress` takes runs in order. Streaming (the default):
    every batch flushed in one stream, on exactly `params`, the dictionary loaded (_DICT_FORCE_LOAD).
    `frames`: every batch a frame of its own that declares its size, on `params`' level only (zstd sizes
    the rest to each small batch, as python-zstandard's one-shot compress does), the dictionary attached.
    One caller at a time. After an error the context is broken (`broken`): its session must be replaced."""

    def __init__(self, params: zstd.ZstdCompressionParameters, dictionary: bytes = b"", *,
                 frames: bool = False) -> None:
        libs = _LIBS
        if libs is None:
            raise RuntimeError("lazystandby.native is not available (see backend())")
        self._libs = libs
        self.frames = frames
        self.backend = backend()
        z = libs.zstd
        cctx = z.ZSTD_createCCtx()
        if not cctx:
            raise MemoryError("ZSTD_createCCtx")
        self._cctx = cctx
        weakref.finalize(self, z.ZSTD_freeCCtx, cctx)
        # Streaming, every parameter set explicitly: with a dictionary loaded, a level alone lets zstd derive
        # the others from the dictionary's size, and the bytes would differ from python-zstandard's.
        settings = [(_LEVEL, params.compression_level), (_CONTENT_SIZE_FLAG, int(frames)), (_CHECKSUM_FLAG, 0),
                    (_DICT_ID_FLAG, 0)]
        if not frames:
            settings += [(key, getattr(params, name)) for name, key in _PARAMS.items()]
        for key, value in settings:
            self._check(z.ZSTD_CCtx_setParameter(cctx, key, value), f"parameter {key}")
        if dictionary:
            # An older libzstd refuses the experimental parameter: it then searches the dictionary attached,
            # as python-zstandard does (same bytes). A frame per batch would load it for every batch.
            if not frames:
                z.ZSTD_CCtx_setParameter(cctx, _FORCE_ATTACH_DICT, _DICT_FORCE_LOAD)
            self._check(z.ZSTD_CCtx_loadDictionary_advanced(cctx, dictionary, len(dictionary), _DLM_BY_COPY,
                                                            _DCT_AUTO), "dictionary")
        self.broken = False

    def _check(self, code: int, what: str) -> None:
        z = self._libs.zstd
        if z.ZSTD_isError(code):
            raise zstd.ZstdError(f"zstd {what}: {z.ZSTD_getErrorName(code).decode()}")

    def compress(self, heads: memoryview, head_size: int, data: memoryview,
                 cuts: np.ndarray) -> tuple[bytes, list[int]]:
        """The batches of a run (tuples.RunLayout's parts), each compressed and flushed in turn: (their
        bytes back to back, each batch's size)."""
        if self.broken:
            raise zstd.ZstdError("zstd context broken by an earlier error: start a new session")
        count = len(cuts) - 1
        if count <= 0:
            return b"", []
        cuts = np.ascontiguousarray(cuts, np.int64)
        raw = head_size * count + int(cuts[-1] - cuts[0])
        if len(heads) < head_size * count or len(data) < int(cuts[-1] - cuts[0]):
            raise ValueError("a run's heads or data are shorter than its cuts say")
        # zstd stores a block that does not shrink as it is, behind a 3-byte header: room for every batch so,
        # one block per 128 KB, and the frame header (at most 18 bytes; with frames, one per batch).
        cap = raw + (21 if self.frames else 3) * count + 3 * (raw >> 17) + 64
        dst = np.empty(cap, np.uint8)
        sizes = np.empty(count, np.int64)
        head_buf = np.frombuffer(heads, np.uint8)
        data_buf = np.frombuffer(data, np.uint8) if len(data) else np.zeros(1, np.uint8)
        libs = self._libs
        args = (self._cctx, head_buf.ctypes.data, head_size, data_buf.ctypes.data, cuts.ctypes.data, count,
                dst.ctypes.data, cap, sizes.ctypes.data)
        done = (libs.frames(libs.stream2, libs.is_error, libs.pledge, *args) if self.frames
                else libs.run(libs.stream2, libs.is_error, *args))
        if done < 0:
            self.broken = True
            raise zstd.ZstdError({-1: "zstd compression failed", -2: "zstd output exceeded its bound"}.get(
                done, "zstd refused a batch's size"))
        return dst[:done].tobytes(), sizes.tolist()
