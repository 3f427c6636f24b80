"""The fault catalog, as data: each fault names its target role, what is done to it, and the behaviour
expected. The process launcher (harness/launcher.py) and the container chaos runner (deploy/chaos/chaos.py)
both read it, so a fault has one name and one expectation wherever it runs; each runner maps the target
role onto its own process or container and the action onto its own signal or docker call.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Action(StrEnum):
    KILL = "kill"  # SIGKILL (process group) / docker kill
    PAUSE = "pause"  # SIGSTOP past the detector's timeout, then SIGCONT / docker pause, unpause
    RESTART = "restart"  # kill, then start again with the same settings and state
    KILL_REPEATEDLY = "kill-repeatedly"  # kill the primary, a spare standby joins, again (containers)


class Runner(StrEnum):
    PROCESSES = "processes"  # `lazystandby launch --fault`, failover-check, the integration tests
    CONTAINERS = "containers"  # `make chaos FAULT=...`, the system tests


@dataclass(frozen=True, slots=True)
class Fault:
    name: str
    target: str  # upstream | primary | standby | downstream
    action: Action
    expect: str
    runners: frozenset[Runner] = frozenset({Runner.PROCESSES, Runner.CONTAINERS})
    load: int = 40_000  # tuples of source load in a container run (the fault must land while they flow)


_BOTH = frozenset({Runner.PROCESSES, Runner.CONTAINERS})

CATALOG: dict[str, Fault] = {f.name: f for f in [
    Fault("kill-primary", "primary", Action.KILL,
          "N' detects the loss and takes over in epoch 2; Nd's output is exact (0 lost, 0 duplicated)"),
    Fault("pause-primary", "primary", Action.PAUSE,
          "N is stopped past the heartbeat timeout and N' takes over; when N resumes it is fenced by epoch, "
          "and nothing it sends reaches Nd"),
    Fault("kill-standby", "standby", Action.KILL,
          "no failover; Nu's backup to N' fails and piles up nowhere (OQu is still trimmed by the primary's "
          "acks); Nd's output is exact"),
    Fault("kill-upstream-restart", "upstream", Action.RESTART,
          "Nu is killed and restarted; it rebuilds OQu from the link log at the same positions (Kafka source); "
          "Nd's output is exact"),
    Fault("kill-downstream-restart", "downstream", Action.RESTART,
          "Nd is killed and restarted; it reads its last output from the results topic (or its file) and "
          "loses or repeats nothing"),
    Fault("kill-primary-repeatedly", "primary", Action.KILL_REPEATEDLY,
          "the primary is killed three times; after each takeover a spare standby starts empty, registers "
          "with Nu, learns the primary from it, is re-seeded from the trim point, and takes over at the next "
          "kill (epochs 2, 3, 4); Nd's output is exact",
          runners=frozenset({Runner.CONTAINERS}), load=200_000),
]}
assert all(f.runners <= _BOTH for f in CATALOG.values())


def for_runner(runner: Runner) -> dict[str, Fault]:
    """The faults `runner` can inject, by name."""
    return {n: f for n, f in CATALOG.items() if runner in f.runners}
