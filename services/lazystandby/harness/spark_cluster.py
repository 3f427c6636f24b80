"""A Spark standalone cluster (one master, one worker) on loopback, started from the pyspark package's own
jars and scripts: what the integration tests run the Spark operator against, as compose runs it against
the `spark-master` and `spark-worker` services.

    python -m lazystandby.harness.spark_cluster   starts one, prints its master URL, stops on Ctrl-C

Two applications share the worker (N's and N''s sessions), so each must ask for part of it:
`APP_CONF` is what a node passes as --spark-conf.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# One core and a small executor per application: the worker has room for both N's and N''s.
APP_CONF = ("spark.cores.max=1", "spark.executor.cores=1", "spark.executor.memory=512m")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


class StandaloneCluster:
    """`with StandaloneCluster() as c: c.master_url`; both processes are always stopped on exit."""

    def __init__(self, cores: int = 2, memory: str = "2g") -> None:
        self.cores, self.memory = cores, memory
        self.port = _free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.webui_port = _free_port()
        self.workdir = Path(tempfile.mkdtemp(prefix="lazystandby-spark-cluster-"))
        # Every scratch file of the cluster (its executors' blocks and Python workers' included) in its work
        # directory, which stop() removes: not in /tmp, where a killed executor would leave them.
        self.scratch = self.workdir / "tmp"
        self.scratch.mkdir()
        self.procs: list[subprocess.Popen] = []

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_WORKER_DIR": str(self.workdir / "work"),
               "SPARK_LOG_DIR": str(self.workdir), "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
               "SPARK_LOCAL_DIRS": str(self.scratch), "TMPDIR": str(self.scratch),
               "SPARK_DAEMON_JAVA_OPTS": shlex.quote(f"-Djava.io.tmpdir={self.scratch}")}
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
        p = subprocess.Popen([_spark_class(), *args], stdout=log, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        self.procs.append(p)
        return p

    def _wait_log(self, name: str, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        path = self.workdir / f"{name}.log"
        while time.monotonic() < deadline:
            if path.exists() and text in path.read_text(errors="replace"):
                return
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.2)
        raise RuntimeError(f"Spark {name} did not log {text!r} within {timeout:.0f}s; see {path}")

    def start(self) -> StandaloneCluster:
        try:
            self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                        "--port", str(self.port), "--webui-port", str(self.webui_port))
            self._wait_log("master", "I have been elected leader", 90)
            self._start("worker", "org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                        "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(_free_port()))
            self._wait_log("worker", "Successfully registered with master", 90)
        except BaseException:
            self.stop()
            raise
        return self

    def applications(self) -> list[str]:
        """Names of the applications the master has run or runs (its JSON status page)."""
        import json
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=10) as r:
            state = json.load(r)
        return [a["name"] for a in state.get("activeapps", []) + state.get("completedapps", [])]

    def stop(self) -> None:
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        self.procs.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


if __name__ == "__main__":
    with StandaloneCluster() as cluster:
        print(cluster.master_url, flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
