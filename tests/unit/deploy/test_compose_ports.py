"""The compose stack's ports and the kernel's ephemeral range: a port a node listens on that an outgoing
socket could draw must be reserved in the node's network namespace (docker-compose.yml, read as text:
the nodes share one block, `x-node`)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EPHEMERAL = range(32768, 61000)  # Linux's default ip_local_port_range
TEXT = (ROOT / "docker-compose.yml").read_text()


def _block(name: str) -> str:
    start = TEXT.index(f"\n{name}:")
    end = re.search(r"\n[a-z]", TEXT[start + 1:])
    return TEXT[start: start + 1 + end.start()] if end else TEXT[start:]


def test_the_only_port_in_the_ephemeral_range_is_the_nodes_and_every_node_reserves_it():
    ports = {int(p) for p in re.findall(r"(?<![\w.])(?:0\.0\.0\.0|localhost|[a-z][\w-]*):(\d{2,5})\b", TEXT)}
    assert {50051, 9092, 7100, 7077} <= ports
    assert sorted(p for p in ports if p in EPHEMERAL) == [50051]
    node = _block("x-node")
    assert "LS_LISTEN: 0.0.0.0:50051" in node
    assert re.search(r'net\.ipv4\.ip_local_reserved_ports: "50051"', node)
    parts = re.split(r"^  ([a-z][\w-]*):\n", _block("services"), flags=re.M)[1:]
    listeners = [name for name, body in zip(parts[::2], parts[1::2], strict=True) if '"--advertise"' in body]
    assert set(listeners) == {"nu", "n", "n-standby", "n-standby-2", "n-standby-3", "nd"}
    for name, body in zip(parts[::2], parts[1::2], strict=True):
        if name in listeners:
            assert "<<: *node" in body, f"{name} listens on 50051 without the node block's reservation"
