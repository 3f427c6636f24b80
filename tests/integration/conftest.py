import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def kafka():
    """A real Kafka broker for the session: KAFKA_BOOTSTRAP if set, else a local KRaft broker started from
    the Maven Central jars (deploy/kafka/resolve.sh) and always stopped afterwards."""
    from lazystandby.config import kafka_bootstrap_from_env

    if existing := kafka_bootstrap_from_env():
        yield existing
        return
    from lazystandby.harness.kafka_broker import LocalKafka

    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # one broker per parallel worker
    broker = LocalKafka(ROOT / "run" / ("test-kafka" + (f"-{worker}" if worker else "")))
    try:
        broker.start()
        yield broker.bootstrap
    finally:
        broker.stop()
