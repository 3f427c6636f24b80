"""How a node process's C allocator keeps the memory it frees (glibc's malloc, through mallopt).

A node allocates and frees a frame's buffers many times a second: a 16,384-tuple frame is about 1 MB as
encoded tuples, again as the message gRPC sends, and again as the backup run's compressed bytes. glibc
serves blocks that size with mmap and hands them back with munmap (or trims the heap top once 128 KB are
free), so the next frame faults every page of its buffers in afresh.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# glibc's ceiling for M_MMAP_THRESHOLD on a 64-bit machine (HEAP_MAX_SIZE / 2): a larger value is refused.
MMAP_THRESHOLD_MAX = 32 << 20
KEEP_MB_MAX = 1024


def keep_freed_memory(mb: int, libc: Any = None) -> bool:
    """Let malloc keep up to `mb` MB of freed memory for reuse instead of returning it to the kernel, and
    serve blocks up to half that (at most 32 MB) from that memory rather than from fresh mappings. 0 leaves
    glibc's own adaptive thresholds. True when the allocator took both settings; False on a C library
    without mallopt (musl refuses every setting, macOS has none), where the node runs as it would anyway."""
    if not 0 <= mb <= KEEP_MB_MAX:
        raise ValueError(f"malloc_keep_mb must be 0-{KEEP_MB_MAX}, not {mb}")
    if mb == 0:
        return False
    libc = _libc() if libc is None else libc
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    keep = mb << 20
    # Fixing the mmap threshold also stops glibc from adapting it (and the trim threshold) as blocks are freed.
    return bool(mallopt(M_MMAP_THRESHOLD, min(keep // 2, MMAP_THRESHOLD_MAX))) and bool(mallopt(M_TRIM_THRESHOLD, keep))


def _libc() -> Any:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None)
    except OSError:
        return None
