"""The compose stack for real: kill the N container with the docker SDK under load, then the truth-table
check inside the stack's network. Containers, networks and volumes are removed afterwards, also on failure
(logs of every container are kept in run/chaos-<fault>.log when a fault's run breaks)."""

import sys
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "deploy" / "chaos"))

import chaos  # noqa: E402


def test_kill_the_primary_container_under_load(stack_images):
    client = docker.from_env()
    chaos.compose("down", "-v", "--remove-orphans", check=False)
    try:
        r = chaos.run(chaos.FAULTS["kill-primary"], client)
    finally:
        chaos.compose("down", "-v", "--remove-orphans", check=False)
    assert r["expected"] > 1000
    assert r["lost"] == 0 and r["duplicated"] == 0, r
    assert r["recovery_ms"] is not None and r["recovery_ms"] < 30_000


def test_down_leaves_nothing_behind(stack_images):
    client = docker.from_env()
    chaos.compose("down", "-v", "--remove-orphans", check=False)
    label = "com.docker.compose.project=lazystandby"
    assert not client.containers.list(all=True, filters={"label": label})
    assert not client.networks.list(filters={"label": label})
    assert not client.volumes.list(filters={"label": label})
