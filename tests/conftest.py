import os
import sys
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
