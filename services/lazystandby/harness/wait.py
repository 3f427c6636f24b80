"""Polling for a condition of a running system, with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..core.errors import PeerError


def wait_until(cond: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    """Poll `cond` every `step` seconds until it holds (True) or `timeout` passes (False). A node that
    does not answer yet (PeerError) counts as "not yet"."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if cond():
                return True
        except PeerError:
            pass
        time.sleep(step)
    return False
