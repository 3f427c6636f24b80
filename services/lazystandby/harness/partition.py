"""Network partitions on loopback: a TCP relay on each link a fault cuts, which the harness opens and shuts.

A node dials its peer through a `LinkRelay` instead of the peer's port. Cut, the relay stops moving bytes
both ways: what was sent waits, as it waits in a real network's buffers and retransmissions, and calls time
out at their deadlines while both processes go on running (a pause stops the process; a partition does
not). New connections are taken but go nowhere until the heal. Healed, everything held is delivered late,
in order, as TCP would deliver it: a call its client gave up on still reaches the server afterwards, which
is the harder case for the protocol (a stale frame from a fenced epoch arriving after the takeover).

Only loopback and this process: no namespaces, no firewall rules, nothing to undo if the harness dies.
"""

from __future__ import annotations

import contextlib
import socket
import threading

CHUNK = 1 << 16


class LinkRelay:
    """Relays connections from `listen` (127.0.0.1, a free port) to `target` (host:port) until `close()`;
    `cut()` and `heal()` stop and resume every byte on it, both ways."""

    def __init__(self, target: str) -> None:
        host, _, p = target.rpartition(":")
        self.target = (host or "127.0.0.1", int(p))
        self._server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._server.getsockname()[1]}"
        self._open = threading.Event()
        self._open.set()
        self._closed = False
        self._lock = threading.Lock()
        self._socks: set[socket.socket] = set()
        # Bytes the relay itself held across a cut (the first read on each busy connection); the rest of
        # what was sent meanwhile waits in the kernel's socket buffers. Both arrive at the heal.
        self.held_while_cut = 0
        threading.Thread(target=self._accept, name=f"relay-{self.address}", daemon=True).start()

    def cut(self) -> None:
        self._open.clear()

    def heal(self) -> None:
        self._open.set()

    def close(self) -> None:
        """Stop relaying and drop every connection (a healed relay is closed the same way)."""
        self._closed = True
        self._open.set()
        with contextlib.suppress(OSError):
            self._server.close()
        with self._lock:
            socks, self._socks = list(self._socks), set()
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()

    def _track(self, s: socket.socket) -> bool:
        with self._lock:
            if self._closed:
                return False
            self._socks.add(s)
            return True

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if not self._track(client):
                client.close()
                return
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        # Reaching the server crosses the link too: not while it is cut.
        self._open.wait()
        try:
            server = socket.create_connection(self.target, timeout=5.0)
            server.settimeout(None)
        except OSError:
            # Nothing listens there (a killed node): the client's connection ends, as a reset would end it.
            self._drop(client)
            return
        if not self._track(server):
            server.close()
            return
        for src, dst in ((client, server), (server, client)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                self._open.wait()
                data = src.recv(CHUNK)
                if not data:
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    return
                if not self._open.is_set():
                    # Read just as the link was cut: held, and delivered after the heal.
                    self.held_while_cut += len(data)
                    self._open.wait()
                if self._closed:
                    return
                dst.sendall(data)
        except OSError:
            self._drop(src)
            self._drop(dst)

    def _drop(self, s: socket.socket) -> None:
        with self._lock:
            self._socks.discard(s)
        with contextlib.suppress(OSError):
            s.close()
