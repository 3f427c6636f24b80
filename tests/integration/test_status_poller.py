"""The bench's kept status channel (Topology.poller) on a real node process: one channel across calls, dropped
when a call fails, and a fresh one once the node is back."""

import signal

import pytest

from lazystandby.core.errors import PeerError
from lazystandby.harness.launcher import Topology


def test_a_kept_status_channel_is_dropped_when_its_node_dies_and_made_afresh_when_it_is_back(tmp_path):
    with Topology({"total": 0, "rate": 1000.0}, tmp_path, with_standby=False) as topo:
        topo.start("nd")
        topo.wait_ready("nd")
        with topo.poller() as poller:
            assert poller.status("nd")["role"] == "downstream"
            kept = poller._peers["nd"]
            assert poller.status("nd")["role"] == "downstream" and poller._peers["nd"] is kept
            topo.signal("nd", signal.SIGKILL)
            topo.procs["nd"].wait(10)
            with pytest.raises(PeerError):
                poller.status("nd", 1.0)
            assert "nd" not in poller._peers  # the failed channel is gone, not retried on
            topo.start("nd")
            topo.wait_ready("nd")
            assert poller.status("nd")["role"] == "downstream" and poller._peers["nd"] is not kept
        assert not poller._peers  # closed with the context


def test_a_status_call_to_a_node_that_exited_says_how_it_ended(tmp_path):
    """A refused connection alone cannot tell a node that died from one slow to listen: the harness's
    status names the exit code and the log."""
    with Topology({"total": 0, "rate": 1000.0}, tmp_path, with_standby=False) as topo:
        topo.start("nd")
        topo.wait_ready("nd")
        topo.signal("nd", signal.SIGKILL)
        topo.procs["nd"].wait(10)
        with pytest.raises(PeerError, match=r"Nd exited -9: .*\[log: .*nd\.log\]") as e:
            topo.status("nd", 1.0)
        assert e.value.unreachable
