import os
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "services"), str(ROOT / "spark")]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

# `make test` runs the suite on parallel workers (pytest-xdist). Each worker draws the harness's ports from
# its own slice of 20000-32000 (two workers never pick the same free port before either binds it) and has a
# temporary directory of its own (the tests that check a killed Spark driver left no scratch behind look
# at it, and must not see another worker's Spark session).
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if WORKER:
    _n = int(WORKER.removeprefix("gw"))
    _width = 12_000 // max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    os.environ["LS_PORT_RANGE"] = f"{20_000 + _n * _width}-{20_000 + (_n + 1) * _width}"
    _tmp = Path(tempfile.gettempdir()) / f"lazystandby-tests-{WORKER}"
    _tmp.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(_tmp)
    tempfile.tempdir = None  # read TMPDIR again


def pytest_collection_modifyitems(items):
    """Mark each test with its tier (integration, system) from its directory. One hook here: a hook in a
    tier's own conftest would see, and mark, the items of every tier."""
    for item in items:
        tier = Path(str(item.fspath)).resolve().relative_to(ROOT / "tests").parts[0]
        if tier in ("integration", "system"):
            item.add_marker(getattr(pytest.mark, tier))
        if tier == "system":
            # One compose project for the whole tier: its tests run on one worker, one after another.
            item.add_marker(pytest.mark.xdist_group("compose"))
    if WORKER:
        # That tier first: it is the longest piece one worker must run alone, so it must not start last.
        # (In one process it stays last: its stack is not kept up through the other tiers.)
        items.sort(key=lambda item: 0 if "/tests/system/" in str(item.fspath) else 1)


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
