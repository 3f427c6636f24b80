"""A node holds its port before it builds anything slow (cli.run_node): whatever the node starts while it
is built (a Spark session's sockets) cannot take the address."""

import errno
import socket

from lazystandby import cli


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _taken(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
        return False


def test_the_port_is_held_while_the_node_is_built_and_let_go_when_it_cannot_be(monkeypatch, capsys):
    port = _free_port()
    seen = {}

    def build(cfg, peers):
        seen["taken"] = _taken(port)
        raise ValueError("the deployment cannot be run")

    monkeypatch.setattr(cli, "build_node", build)
    assert cli.run_node(["--role", "primary", "--listen", f"127.0.0.1:{port}"]) == 2
    assert seen == {"taken": True}
    assert "cannot be run" in capsys.readouterr().err
    assert not _taken(port)


def test_a_taken_port_ends_the_node_in_one_line_before_it_is_built(monkeypatch, capsys):
    built = []
    monkeypatch.setattr(cli, "build_node", lambda cfg, peers: built.append(cfg))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert cli.run_node(["--role", "primary", "--listen", f"127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err.strip()
    assert built == [] and f"cannot listen on 127.0.0.1:{port}" in err and len(err.splitlines()) == 1
