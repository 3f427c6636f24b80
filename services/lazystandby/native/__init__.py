"""Nu's backup compression in one call per run: `RunCompressor`, over libzstd and `zrun.c`.

Why: python-zstandard takes two calls per batch (compress, then flush), and lets go of the GIL around
each. At Bsize 10 and a million tuples/s that is 200,000 calls a second, each one giving the GIL to Nu's
source or primary thread and waiting to get it back, with a Python join before each to make the batch's
bytes. `ls_compress_run` (zrun.c) compresses all of a run's batches in one call through ctypes, which lets
go of the GIL once for the whole run, through zstd's buffer-less API (ZSTD_compressBegin_advanced, then
ZSTD_compressContinue per batch: a fifth less CPU per batch than a streaming context flushed per batch).
The bytes are zstd's streaming format, one batch after another, as python-zstandard's compressobj writes
them when flushed per batch: byte for byte without a dictionary; with one, which this loads into the
context's tables (python-zstandard cannot ask for that), faster and as small within a few in 10,000. The
receiving end does not know which wrote them.

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

_MIN_VERSION = 10400
# The least a context's window buffer holds: runs at full speed are up to 2 MB (max_batches_per_rpc batches).
RING_BYTES = 4 << 20
_CONTENTSIZE_UNKNOWN = (1 << 64) - 1


class _ZstdParameters(ctypes.Structure):
    """zstd.h's ZSTD_parameters (ZSTD_compressionParameters, then ZSTD_frameParameters), passed by value to
    ZSTD_compressBegin_advanced, stable since zstd 1.3."""

    _fields_ = [("window_log", ctypes.c_uint), ("chain_log", ctypes.c_uint), ("hash_log", ctypes.c_uint),
                ("search_log", ctypes.c_uint), ("min_match", ctypes.c_uint), ("target_length", ctypes.c_uint),
                ("strategy", ctypes.c_int), ("content_size_flag", ctypes.c_int), ("checksum_flag", ctypes.c_int),
                ("no_dict_id_flag", ctypes.c_int)]


class _Libs:
    def __init__(self, zstd_lib: ctypes.CDLL, run_lib: ctypes.CDLL) -> None:
        z = zstd_lib
        z.ZSTD_createCCtx.restype = ctypes.c_void_p
        z.ZSTD_freeCCtx.argtypes = [ctypes.c_void_p]
        # Buffer-less compression (zstd.h's "advanced" section, exported by every libzstd.so since 1.3; 1.5.6
        # marks it deprecated, still there in 1.5.7). Where it is missing, _load fails and the codec stays on
        # python-zstandard.
        z.ZSTD_compressBegin_advanced.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                                  _ZstdParameters, ctypes.c_ulonglong]
        z.ZSTD_compressBegin_advanced.restype = ctypes.c_size_t
        z.ZSTD_isError.argtypes = [ctypes.c_size_t]
        z.ZSTD_isError.restype = ctypes.c_uint
        z.ZSTD_getErrorName.argtypes = [ctypes.c_size_t]
        z.ZSTD_getErrorName.restype = ctypes.c_char_p
        self.zstd = z
        run = run_lib.ls_compress_run
        run.restype = ctypes.c_longlong
        run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong,
                        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_void_p,
                        ctypes.c_longlong, ctypes.c_void_p]
        self.run = run
        self.compress_continue = ctypes.cast(z.ZSTD_compressContinue, ctypes.c_void_p).value
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
    """Which library compresses a streaming codec's runs, for the status and the bench."""
    if _LIBS is None:
        return f"python-zstandard {zstd.__version__}"
    v = _LIBS.version
    return f"libzstd {v // 10000}.{v // 100 % 100}.{v % 100} via zrun.c"


def compressor() -> type[RunCompressor] | None:
    """What Nu passes to its RunEncoder (core.codec.RunCompressorFactory): None when not available()."""
    return RunCompressor if _LIBS is not None else None


class RunCompressor:
    """One zstd frame of a codec session with `params` and `dictionary` (zstd's format or raw content, as
    python-zstandard's DICT_TYPE_AUTO reads it; loaded into the context's tables). `compress` takes runs in
    order. One caller at a time. After an error the context is broken (`broken`): its session must be
    replaced."""

    def __init__(self, params: zstd.ZstdCompressionParameters, dictionary: bytes = b"") -> None:
        libs = _LIBS
        if libs is None:
            raise RuntimeError("lazystandby.native is not available (see backend())")
        self._libs = libs
        self.backend = backend()
        z = libs.zstd
        cctx = z.ZSTD_createCCtx()
        if not cctx:
            raise MemoryError("ZSTD_createCCtx")
        self._cctx = cctx
        weakref.finalize(self, z.ZSTD_freeCCtx, cctx)
        # Every parameter given: with a dictionary, a level alone lets zstd derive the others from the
        # dictionary's size, and the bytes would differ from python-zstandard's. No content size, no checksum,
        # no dictionary id, as python-zstandard's streaming compressor writes.
        zp = _ZstdParameters(params.window_log, params.chain_log, params.hash_log, params.search_log,
                             params.min_match, params.target_length, params.strategy, 0, 0, 1)
        # zstd's buffer-less API reads its window where the bytes lie: the dictionary, then every batch after
        # it, are copied into one buffer back to back (zrun.c), as its streaming context does into its own. A
        # run that does not fit at the end starts again at the front, which zstd sees (ZSTD_window_update):
        # what it overwrites leaves the window, the rest stays until overwritten in turn.
        window = 1 << params.window_log
        self._ring = np.empty(max(RING_BYTES, 2 * window + len(dictionary)), np.uint8)
        self._ring[:len(dictionary)] = np.frombuffer(dictionary, np.uint8)
        self._pos = len(dictionary)
        self._outgrown: np.ndarray | None = None  # a ring a bigger run replaced: zstd may read its last bytes
        self._check(z.ZSTD_compressBegin_advanced(cctx, self._ring.ctypes.data if dictionary else None,
                                                  len(dictionary), zp, _CONTENTSIZE_UNKNOWN),
                    "dictionary and parameters")
        self.broken = False

    def _place(self, size: int) -> int:
        """Where the next `size` bytes of batches go in the ring (its address), and self._pos at its start."""
        if self._pos + size > len(self._ring):
            if size > len(self._ring):
                self._outgrown, self._ring = self._ring, np.empty(2 * size, np.uint8)
            self._pos = 0
        return self._ring.ctypes.data + self._pos

    def _check(self, code: int, what: str) -> None:
        z = self._libs.zstd
        if z.ZSTD_isError(code):
            raise zstd.ZstdError(f"zstd {what}: {z.ZSTD_getErrorName(code).decode()}")

    def compress(self, heads: memoryview, head_size: int, data: memoryview,
                 cuts: np.ndarray) -> tuple[bytes, list[int]]:
        """The batches of a run (tuples.RunLayout's parts), each compressed into blocks of its own in turn:
        (their bytes back to back, each batch's size)."""
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
        # one block per 128 KB, and the frame header.
        cap = raw + 3 * count + 3 * (raw >> 17) + 64
        dst = np.empty(cap, np.uint8)
        at = self._place(raw)
        sizes = np.empty(count, np.int64)
        head_buf = np.frombuffer(heads, np.uint8) if len(heads) else np.zeros(1, np.uint8)
        data_buf = np.frombuffer(data, np.uint8) if len(data) else np.zeros(1, np.uint8)
        libs = self._libs
        done = libs.run(libs.compress_continue, libs.is_error, self._cctx, head_buf.ctypes.data, head_size,
                        data_buf.ctypes.data, cuts.ctypes.data, count, at, dst.ctypes.data, cap,
                        sizes.ctypes.data)
        self._pos += raw
        if done < 0:
            self.broken = True
            raise zstd.ZstdError("zstd compression failed")
        return dst[:done].tobytes(), sizes.tolist()
