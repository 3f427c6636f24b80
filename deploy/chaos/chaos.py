"""Chaos against the compose stack, with the docker SDK. Faults are data: each names its target, what is
done to it, and the behaviour expected. After each fault the generator is let finish, the pipeline drains,
and the truth-table check runs inside the stack's network. One JSON line per fault:
{"fault", "lost", "duplicated", "recovery_ms", ...}.

    python deploy/chaos/chaos.py kill-primary        (make chaos FAULT=kill-primary; FAULT=all for every one)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "lazystandby"
FILES = ["-f", str(ROOT / "docker-compose.yml"), "-f", str(ROOT / "deploy" / "docker" / "compose.local.yml")]


@dataclass(frozen=True)
class Fault:
    name: str
    service: str
    action: str  # kill | pause | restart
    expect: str


FAULTS = {f.name: f for f in [
    Fault("kill-primary", "n", "kill", "N' takes over in a new epoch; 0 lost, 0 duplicated"),
    Fault("kill-standby", "n-standby", "kill", "no failover; the output is exact"),
    Fault("kill-upstream", "nu", "restart", "Nu restarts and rebuilds OQu from the link log; exact output"),
    Fault("kill-downstream", "nd", "restart", "Nd restarts from the results topic's tail; exact output"),
    Fault("pause-primary", "n", "pause", "N is frozen past the heartbeat timeout; N' takes over; N is fenced "
          "when unfrozen; exact output"),
]}


SERVICES = ["kafka", "nd", "n", "n-standby", "nu", "prometheus"]
# A finite load for each fault (the compose default is a long one); override from the environment.
LOAD = {"LS_GEN_TOTAL": "40000", "LS_GEN_RATE": "4000", "LS_OPERATOR": "python"}


def compose(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**LOAD, **os.environ}
    return subprocess.run(["docker", "compose", "-p", PROJECT, *FILES, *args], check=check, capture_output=True,
                          text=True, env=env)


def container(client: docker.DockerClient, service: str):
    found = client.containers.list(all=True, filters={"label": [f"com.docker.compose.project={PROJECT}",
                                                                 f"com.docker.compose.service={service}"]})
    if not found:
        raise RuntimeError(f"no container for service {service}; is the stack up (make up)?")
    return found[0]


def stack_check() -> dict:
    out = compose("run", "--rm", "--no-deps", "--entrypoint", "python", "generator", "-m", "lazystandby.cli",
                  "stack-check", "--status", "N'=n-standby:50051,Nd=nd:50051", check=False)
    if out.returncode != 0:
        # A check can fail while the stack is still settling (a broker busy, a node restarting): try again.
        return {"got": 0, "expected": 0, "check_error": out.stderr.strip().splitlines()[-3:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(fault: Fault, client: docker.DockerClient, timeout: float = 300.0) -> dict:
    compose("up", "-d", "--wait", "--wait-timeout", "300", *SERVICES)
    compose("up", "-d", "generator")
    time.sleep(4)  # load on
    c = container(client, fault.service)
    t0 = time.time()
    if fault.action == "kill":
        c.kill()
    elif fault.action == "pause":
        c.pause()
        time.sleep(5)
        c.unpause()
    else:
        c.kill()
        time.sleep(1)
        c.start()
    gen = container(client, "generator")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        gen.reload()
        if gen.status == "exited":
            break
        time.sleep(2)
    result: dict = {}
    while time.monotonic() < deadline:
        result = stack_check()
        if result["got"] >= result["expected"] > 0:
            break
        time.sleep(3)
    rec = (result.get("nodes", {}).get("N'", {}) or {}).get("recovery") or {}
    return {"fault": fault.name, "expect": fault.expect, "lost": result.get("lost"),
            "duplicated": result.get("duplicated"), "expected": result.get("expected"), "got": result.get("got"),
            "recovery_ms": round((rec["live_at"] - t0) * 1000, 1) if rec.get("live_at") else None,
            "check_error": result.get("check_error"),
            "ok": result.get("lost") == 0 and result.get("duplicated") == 0 and result.get("expected", 0) > 0}


def main(argv: list[str]) -> int:
    names = sorted(FAULTS) if not argv or argv[0] == "all" else argv
    client = docker.from_env()
    ok = True
    for name in names:
        compose("down", "-v", "--remove-orphans", check=False)
        try:
            r = run(FAULTS[name], client)
        except Exception as e:
            r = {"fault": name, "error": str(e)[:500], "ok": False}
            logs = compose("logs", "--no-color", "--tail", "200", check=False).stdout
            (ROOT / "run").mkdir(exist_ok=True)
            (ROOT / "run" / f"chaos-{name}.log").write_text(logs)
        finally:
            compose("down", "-v", "--remove-orphans", check=False)
        ok = ok and r["ok"]
        print(json.dumps(r), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
