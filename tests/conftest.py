import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "services"), str(ROOT / "spark")]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def pytest_collection_modifyitems(items):
    """Mark each test with its tier (integration, system) from its directory. One hook here: a hook in a
    tier's own conftest would see, and mark, the items of every tier."""
    for item in items:
        tier = Path(str(item.fspath)).resolve().relative_to(ROOT / "tests").parts[0]
        if tier in ("integration", "system"):
            item.add_marker(getattr(pytest.mark, tier))


_TIER_SPAN: dict[str, list[float]] = {}  # tier -> [first test's start, last test's end] (time.monotonic)


def _tier(nodeid: str) -> str:
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"


def pytest_runtest_logstart(nodeid, location):
    _TIER_SPAN.setdefault(_tier(nodeid), [time.monotonic(), time.monotonic()])


def pytest_runtest_logfinish(nodeid, location):
    _TIER_SPAN[_tier(nodeid)][1] = time.monotonic()


def pytest_terminal_summary(terminalreporter):
    """Each tier's wall time, from its first test's start to its last test's end (session fixtures it
    started and stopped included): the suite's budget is kept per tier."""
    if not _TIER_SPAN:
        return
    spans = ", ".join(f"{tier} {end - start:.1f} s" for tier, (start, end) in _TIER_SPAN.items())
    terminalreporter.write_line(f"tier wall time: {spans}")
