import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.system)


@pytest.fixture(scope="session")
def stack_images():
    """The engine running and the stack's images built (deploy/docker/up.sh does both, idempotently; it
    also starts the stack, which each test then takes down and brings up as it needs)."""
    subprocess.run(["bash", str(ROOT / "deploy" / "docker" / "up.sh")], check=True, cwd=ROOT)
    yield
    subprocess.run(["docker", "compose", "-p", "lazystandby", "-f", str(ROOT / "docker-compose.yml"), "-f",
                    str(ROOT / "deploy" / "docker" / "compose.local.yml"), "down", "-v", "--remove-orphans"],
                   cwd=ROOT, check=False)
