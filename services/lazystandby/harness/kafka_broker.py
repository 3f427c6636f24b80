"""A single-node Apache Kafka broker (KRaft, combined broker+controller) on loopback, from the jars that
deploy/kafka/resolve.sh fetched from Maven Central. For local runs and tests; compose uses apache/kafka.

    python -m lazystandby.harness.kafka_broker start [--dir run/kafka] [--port 19092]   prints bootstrap
    python -m lazystandby.harness.kafka_broker stop  [--dir run/kafka]

KAFKA_BOOTSTRAP, when set, points everything at an existing cluster instead and nothing is started.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LIBS = ROOT / ".cache" / "kafka" / "libs"

PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{cport}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs={logs}
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
message.max.bytes=16777216
log.segment.bytes=67108864
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resolve() -> None:
    subprocess.run(["bash", str(ROOT / "deploy" / "kafka" / "resolve.sh")], check=True)


def _java(heap: str, tmp: Path) -> list[str]:
    """The JVM's command line; its temporary files (native libraries it unpacks: lz4, zstd, snappy) in
    `tmp`, inside the broker's work directory, not in /tmp where a killed broker would leave them."""
    return ["java", f"-Xmx{heap}", f"-Xms{heap}", "-XX:+UseG1GC", "-Djava.awt.headless=true",
            f"-Djava.io.tmpdir={tmp}",
            f"-Dlog4j2.configurationFile={ROOT / 'deploy' / 'kafka' / 'log4j2.yaml'}",
            "-cp", f"{LIBS}/*"]


class LocalKafka:
    """Start, wait for, and stop one broker whose files live in `workdir`."""

    def __init__(self, workdir: Path, port: int = 0, heap: str = "512m") -> None:
        self.workdir = Path(workdir)
        self.port = port or _free_port()
        self.cport = _free_port()
        self.heap = heap
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> LocalKafka:
        resolve()
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        (self.workdir / "logs").mkdir(parents=True)
        tmp = self.workdir / "tmp"
        tmp.mkdir()
        props = self.workdir / "server.properties"
        props.write_text(PROPERTIES.format(port=self.port, cport=self.cport, logs=self.workdir / "logs"))
        cluster = str(uuid.uuid4()).replace("-", "")[:22]
        subprocess.run([*_java("256m", tmp), "kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(props)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        log = open(self.workdir / "broker.log", "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen([*_java(self.heap, tmp), "kafka.Kafka", str(props)], stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        (self.workdir / "broker.pid").write_text(str(self.proc.pid))
        (self.workdir / "bootstrap").write_text(self.bootstrap)
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float) -> None:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.proc.returncode}; see {self.workdir}/broker.log")
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=3000)
                admin.list_topics()
                admin.close()
                return
            except (KafkaError, OSError, ValueError) as e:
                last = e
                time.sleep(0.5)
        raise TimeoutError(f"Kafka not ready at {self.bootstrap} after {timeout}s ({last}); see {self.workdir}")

    def stop(self) -> None:
        stop_dir(self.workdir)


def stop_dir(workdir: Path) -> None:
    pidfile = Path(workdir) / "broker.pid"
    if not pidfile.exists():
        return
    pid = int(pidfile.read_text())
    try:
        os.killpg(pid, signal.SIGTERM)
        for _ in range(100):
            os.kill(pid, 0)
            time.sleep(0.1)
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    pidfile.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kafka_broker")
    ap.add_argument("action", choices=["start", "stop", "resolve"])
    ap.add_argument("--dir", default=str(ROOT / "run" / "kafka"))
    ap.add_argument("--port", type=int, default=19092)
    args = ap.parse_args(argv)
    if args.action == "resolve":
        resolve()
    elif args.action == "start":
        stop_dir(Path(args.dir))
        k = LocalKafka(Path(args.dir), args.port).start()
        print(k.bootstrap)
    else:
        stop_dir(Path(args.dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
