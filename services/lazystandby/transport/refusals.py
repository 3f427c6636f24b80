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
from collections.abc import Callable

from ..core.errors import LazyStandbyError, Status
from ..core.reminder import Reminder

LOUD = frozenset({Status.INVALID_ARGUMENT, Status.PERMISSION_DENIED, Status.UNAUTHENTICATED, Status.DATA_LOSS,
                  Status.FAILED_PRECONDITION})


class RefusalLog:
    def __init__(self, node: str, every: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.log = logging.getLogger(f"lazystandby.{node}")
        self.every, self.clock = every, clock
        self._kinds: dict[tuple[str, str], Reminder] = {}
        self._lock = threading.Lock()

    def refused(self, rpc: str, e: LazyStandbyError) -> None:
        if e.status not in LOUD:
            return
        with self._lock:
            kind = self._kinds.get((rpc, e.counter))
            if kind is None:  # not built per refusal: a flood of them comes this way
                kind = self._kinds[(rpc, e.counter)] = Reminder(self.clock, self.every)
            if not kind.due():
                return
            more = kind.take_suppressed()
        self.log.warning("refused %s (%s): %s%s", rpc, e.status, e.message,
                         f" [{more} more like it since the last line]" if more else "")


def refuse(handler, log: RefusalLog, rpc: str, e: LazyStandbyError) -> None:
    """Count and log one refusal (the caller then answers with e.status)."""
    handler.count_error(e.counter)
    log.refused(rpc, e)
