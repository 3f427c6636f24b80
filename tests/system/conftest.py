import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def python_operator(monkeypatch):
    """The system tier runs the stack with the Python operator: two Spark JVMs in containers on CI's 2 cores
    would take most of its time budget (two tests, hang-operator and kill-operator, set the Spark operator
    themselves: its JVM is what those faults stop). `make chaos` runs the stack's own default (spark). Set
    per test: a worker runs other tiers' tests between these."""
    monkeypatch.setenv("LS_OPERATOR", "python")


@pytest.fixture(scope="session")
def stack_images():
    """A running Docker engine and the stack's images built (deploy/docker/build.sh: idempotent, cached).
    Only a machine where no engine can run at all skips these tests, and says why; a failing build fails."""
    engine = subprocess.run(["bash", str(ROOT / "deploy" / "docker" / "engine.sh")], cwd=ROOT, capture_output=True,
                            text=True)
    if engine.returncode == 3:
        pytest.skip(f"no Docker engine can run here: {engine.stderr.strip()[-400:]}")
    assert engine.returncode == 0, engine.stderr
    subprocess.run(["bash", str(ROOT / "deploy" / "docker" / "build.sh")], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL)
    yield
    subprocess.run(["docker", "compose", "-p", "lazystandby", "-f", str(ROOT / "docker-compose.yml"), "-f",
                    str(ROOT / "deploy" / "docker" / "compose.local.yml"), "--profile", "spares", "down", "-v",
                    "--remove-orphans"], cwd=ROOT, check=False)


@pytest.fixture(scope="session")
def chaos_run(stack_images):
    """Runs one fault of the catalog on the stack the system tier shares: the broker, Prometheus, the Spark
    cluster and the TLS material come up once; each fault gets fresh nodes and topics of its own
    (chaos.run_shared). Returns the fault's result."""
    import docker

    sys.path.insert(0, str(ROOT / "deploy" / "chaos"))
    import chaos

    client = docker.from_env()
    chaos.compose("down", "-v", "--remove-orphans", check=False)
    count = itertools.count(1)
    def run(fault: str) -> dict:
        topics = re.sub(r"[^\w.-]", "-", fault)  # kill-primary@1+2: Kafka refuses @ and + in a topic's name
        return chaos.run_shared(fault, client, prefix=f"t{next(count)}-{topics}.")

    return run
