"""A real Prometheus (Debian's package, deploy/prometheus/install.sh) on loopback, scraping local nodes,
with the repo's alert rules; and the HTTP API calls the checks need."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"


def install() -> None:
    subprocess.run(["bash", str(ROOT / "deploy" / "prometheus" / "install.sh")], check=True)


def rules_with_short_for(text: str, seconds: int = 2) -> str:
    """The same rules with every `for:` cut to a few seconds, so a test sees an alert fire quickly."""
    return re.sub(r"for: \d+[smh]", f"for: {seconds}s", text)


def api(url: str, path: str, **params) -> dict:
    """A call to the HTTP API of the Prometheus at `url` (`query`, `query_range`, `alerts`, ...): its JSON."""
    q = urllib.parse.urlencode(params)
    with urllib.request.urlopen(f"{url}/api/v1/{path}?{q}", timeout=10) as r:
        return json.loads(r.read())


class LocalPrometheus:
    def __init__(self, workdir: Path, targets: dict[str, str], *, scrape_interval: str = "1s",
                 short_for: bool = False) -> None:
        from .launcher import free_port

        self.workdir = Path(workdir)
        self.targets = targets
        self.port = free_port()
        self.scrape_interval = scrape_interval
        self.short_for = short_for
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> LocalPrometheus:
        install()
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        self.workdir.mkdir(parents=True)
        rules = RULES.read_text()
        (self.workdir / "rules.yml").write_text(rules_with_short_for(rules) if self.short_for else rules)
        jobs = [{"job_name": job, "static_configs": [{"targets": [t]}]} for job, t in self.targets.items()]
        cfg = {"global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.scrape_interval},
               "rule_files": [str(self.workdir / "rules.yml")], "scrape_configs": jobs}
        (self.workdir / "prometheus.yml").write_text(json.dumps(cfg))  # JSON is YAML
        log = open(self.workdir / "prometheus.log", "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={self.workdir / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.workdir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=1)
                return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"prometheus exited; see {self.workdir}/prometheus.log") from None
                time.sleep(0.2)
        raise TimeoutError(f"prometheus not ready after {timeout}s")

    def api(self, path: str, **params) -> dict:
        return api(self.url, path, **params)

    def query(self, expr: str) -> dict:
        try:
            return self.api("query", query=expr)
        except urllib.error.HTTPError as e:
            return json.loads(e.read() or b'{"status": "error"}')

    def query_range(self, expr: str, start: float, end: float, step: str = "1s") -> dict:
        return self.api("query_range", query=expr, start=start, end=end, step=step)

    def alerts(self) -> list[dict]:
        return self.api("alerts")["data"]["alerts"]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def __enter__(self) -> LocalPrometheus:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
