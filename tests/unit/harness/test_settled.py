"""When a trial's fault has run its course under a supervisor (launcher._settled): every operator node
alive is in Nd's epoch and not fenced, and the pipeline has its standby back unless the primary is the
only operator node left."""

from lazystandby.harness.launcher import _settled
from lazystandby.harness.places import N2, ND, NU, N


class FakeTopology:
    def __init__(self, nodes: dict[str, dict], *, restarts=("n",), nu=None, waiting=()):
        self.nodes, self.supervisor_restarts, self.waiting = nodes, list(restarts), set(waiting)
        self.nu = nu if nu is not None else {"standby": "", "standby_in_sync": False}

    def alive(self, key: str) -> bool:
        return key in self.nodes

    def waiting_restart(self, key: str) -> bool:
        return key in self.waiting

    def status(self, key: str) -> dict:
        return {ND: {"epoch": 3}, NU: self.nu}.get(key) or self.nodes[key]


def test_a_node_started_again_is_waited_for_until_nu_backs_up_to_it_in_sync():
    both = {N: {"role": "primary", "epoch": 3}, N2: {"role": "standby", "epoch": 3}}
    assert not _settled(FakeTopology(both))
    assert _settled(FakeTopology(both, nu={"standby": "s", "standby_in_sync": True}))


def test_the_primary_alone_is_settled_when_the_fault_killed_the_other_node():
    """N, fenced by a takeover the load caused, was started again and took over when the fault killed N':
    no standby can come back, and the trial is not failed for it."""
    assert _settled(FakeTopology({N: {"role": "primary", "epoch": 3}}))


def test_a_fenced_node_a_node_behind_nds_epoch_or_one_waiting_to_start_is_not_settled():
    primary = {"role": "primary", "epoch": 3}
    assert not _settled(FakeTopology({N: primary, N2: {"role": "fenced", "epoch": 3}}))
    assert not _settled(FakeTopology({N: {"role": "primary", "epoch": 2}}))
    assert not _settled(FakeTopology({N: primary}, waiting=(N2,)))
    assert _settled(FakeTopology({N: primary, N2: {"role": "standby", "epoch": 3}}, restarts=()))
