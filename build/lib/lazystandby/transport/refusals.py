"""What a transport does when a node refuses a call: count it on the node, and say so in one log line.

Refusals that mean "a peer sent something wrong" (undecodable, forbidden, corrupt, in an unknown epoch) are
logged at WARNING, one line per kind of refusal per node every `every` seconds at most, so a client that
keeps sending garbage cannot flood the log; the counter still counts every one. Backpressure and ordinary
protocol answers (queue full, already held) are counted only.
"""

from __future__ import annotations

import logging
import threading
import time

from ..core.seq import LazyStandbyError, Status

LOUD = frozenset({Status.INVALID_ARGUMENT, Status.PERMISSION_DENIED, Status.UNAUTHENTICATED, Status.DATA_LOSS,
                  Status.FAILED_PRECONDITION})


class RefusalLog:
    def __init__(self, node: str, every: float = 10.0) -> None:
        self.log = logging.getLogger(f"lazystandby.{node}")
        self.every = every
        self._last: dict[tuple[str, str], float] = {}
        self._suppressed: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def refused(self, rpc: str, e: LazyStandbyError) -> None:
        if e.status not in LOUD:
            return
        key, now = (rpc, e.counter), time.monotonic()
        with self._lock:
            if now - self._last.get(key, -self.every) < self.every:
                self._suppressed[key] = self._suppressed.get(key, 0) + 1
                return
            self._last[key] = now
            more = self._suppressed.pop(key, 0)
        self.log.warning("refused %s (%s): %s%s", rpc, e.status, e.message,
                         f" [{more} more like it since the last line]" if more else "")


def refuse(handler, log: RefusalLog, rpc: str, e: LazyStandbyError) -> None:
    """Count and log one refusal (the caller then answers with e.status)."""
    handler.count_error(e.counter)
    log.refused(rpc, e)
