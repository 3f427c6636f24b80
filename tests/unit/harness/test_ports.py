"""The harness's ports: below the kernel's ephemeral range, never twice."""

import pytest


def test_the_harness_picks_ports_below_the_kernels_ephemeral_range_and_never_twice(monkeypatch):
    """A port the kernel picked for bind(0) is one it may hand to the next process that connects anywhere
    (a Spark JVM opens dozens): the harness picks from below that range, distinct ports, each free."""
    import socket

    from lazystandby.harness import launcher

    monkeypatch.delenv(launcher.PORT_RANGE_ENV, raising=False)  # the suite's parallel workers set one
    low, _ = launcher.ephemeral_range()
    ports = launcher.free_ports(40)
    assert len(set(ports)) == 40
    assert all(launcher.PORTS_FROM <= p < low for p in ports)
    s = socket.socket()
    s.bind(("127.0.0.1", ports[0]))  # free when handed out
    s.close()
    # A range that leaves no room below it: the kernel's choice, still distinct.
    monkeypatch.setattr(launcher, "ephemeral_range", lambda: (launcher.PORTS_FROM + 1, 60999))
    assert len(set(launcher.free_ports(5))) == 5


def test_the_ephemeral_range_is_read_from_the_kernel_or_defaults(tmp_path):
    from lazystandby.harness.launcher import ephemeral_range

    f = tmp_path / "range"
    f.write_text("40000\t50000\n")
    assert ephemeral_range(str(f)) == (40000, 50000)
    assert ephemeral_range(str(tmp_path / "missing")) == (32768, 60999)


def test_a_port_range_from_the_environment_narrows_the_draw(monkeypatch):
    """Harnesses side by side on one host (the suite's workers) draw from ranges of their own."""
    from lazystandby.harness import launcher

    monkeypatch.setenv(launcher.PORT_RANGE_ENV, "23000-23100")
    ports = launcher.free_ports(20)
    assert len(set(ports)) == 20 and all(23000 <= p < 23100 for p in ports)
    for bad in ("23000", "23100-23000", "80-90", "a-b"):
        monkeypatch.setenv(launcher.PORT_RANGE_ENV, bad)
        with pytest.raises(ValueError, match="LS_PORT_RANGE"):
            launcher.free_ports(1)


def test_a_port_handed_out_is_not_drawn_again_before_its_node_may_bind_it(monkeypatch):
    """A pipeline of several stages draws every stage's ports before any node starts: a port drawn for
    stage 1 and drawn again for stage 2 (free both times, since nobody has bound it yet) made the second
    node to bind it exit. A port handed out is not drawn again while it is among the last ones."""
    from lazystandby.harness import launcher

    monkeypatch.setenv(launcher.PORT_RANGE_ENV, "24000-30000")
    first, other = launcher.free_ports(2)

    class Repeating:
        """Draws `first` twice, then `other`: the second draw of `first` must be passed over."""

        def __init__(self):
            self.draws = [first, first, other]

        def randrange(self, lo, hi):
            return self.draws.pop(0) if self.draws else 0

    monkeypatch.setattr(launcher, "_RECENT_PORTS", launcher.collections.deque(maxlen=launcher.RECENT_PORTS_KEPT))
    monkeypatch.setattr(launcher, "_PORT_DRAWS", Repeating())
    assert launcher.free_ports(1) == [first]
    assert launcher.free_ports(1) == [other]  # `first` is free still, and passed over all the same
