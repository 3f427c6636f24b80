"""A main thread that answers its process's signals while it waits to stop.

The kernel hands a signal sent to the process to any of its threads that does not block it (gRPC's and
the node's own do not); CPython then only marks it, and runs its Python handler in the main thread at its
next bytecode. A main thread asleep in an untimed wait is woken by a signal delivered to itself alone, so
a SIGTERM, SIGINT or SIGUSR1 taken by another thread would go unanswered for good. The main thread of a
node and of `lazystandby run` therefore waits in short looks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# Seconds between the main thread's looks at its stop event: the most a signal's handler may wait to run.
HALT_LOOK_S = 0.1


def wait_for(halt: threading.Event, look_s: float = HALT_LOOK_S, *, every_s: float = 0.0,
             tick: Callable[[], None] | None = None) -> None:
    """Return once `halt` is set, running this process's Python signal handlers within `look_s` of their
    signal. With `tick`, call it every `every_s` seconds meanwhile (a progress line); a tick that runs long
    delays the next look, not the handler's bound between ticks."""
    due = time.monotonic() + every_s
    while not halt.wait(look_s):
        if tick is not None and time.monotonic() >= due:
            tick()
            due = time.monotonic() + every_s
