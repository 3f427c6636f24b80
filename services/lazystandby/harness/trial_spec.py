"""A trial as a value: what runs, the load it gets, which fault hits it, where it runs and how long it may
take. `launcher.run_trial` runs one phase by phase; `launch`, `failover-check`, the campaign, the bench and
the tests each build one (`TrialSpec(...)`, or the next from one with `dataclasses.replace`).

Frozen: a trial's description does not change while it runs, so what a result row says ran is what ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .faults import Fault
from .stages import FAULTS


@dataclass(frozen=True)
class TrialSpec:
    """One trial. Every field has the default a trial of the tick example runs with."""

    # The fault: a catalog name or a Fault; of a pipeline of several stages, `name@K` or `name@1+2`, or
    # a Fault per stage (harness/stages.py). It hits `kill_after` s into the load, or once the source is
    # exhausted and the backup drained (`quiesce`: the figures then count the mechanism alone).
    fault: str | Fault | Mapping[int, Fault] = "kill-primary"
    kill_after: float = 1.0
    quiesce: bool = False
    # What runs: a pipeline file (through Kafka), else the tick example's selection `predicate` (or the
    # query in `extra`); the backup's Bsize (tuples, or None/'inf') and codec; further NodeConfig settings,
    # typed, for every node (`extra`) or for one place (`per_node`, by harness/places name).
    pipeline: str = ""
    predicate: str = "price > 100"
    bsize: int | str | None = 10
    codec: str = "zstd-stream-dict"
    extra: Mapping[str, Any] | None = None
    per_node: Mapping[str, Mapping[str, Any]] | None = None
    # The load: `total` records (of each table, for a pipeline) at `rate` a second from `seed`; malformed
    # records every `malformed_every`, or the records `bad_records` (None: a pipeline's own), and a control
    # record (position, parameter) into the tick stream.
    total: int = 40_000
    rate: float = 20_000
    seed: int = 7
    malformed_every: int = 0
    bad_records: list[bytes | None] | None = None
    param_change_at: tuple[int, str] | None = None
    # Where: a Kafka bootstrap ("" for the built-in generator and a file sink), mutual TLS between the
    # nodes, and shaped links (Topology.link: 10mbit, 100mbit, 1gbit or RATE[:DELAY_MS]).
    kafka: str = ""
    tls: bool = False
    link: str = ""
    # How long each wait may take, and whether a passing trial's work directory is kept.
    timeout: float = 60.0
    keep: bool = False

    @property
    def operator(self) -> str:
        return (self.extra or {}).get("operator", "python")

    def single_fault(self) -> Fault:
        """The fault of a trial of one stage; ValueError for a fault that names stages or cannot run with
        this operator."""
        fault = self.fault
        if isinstance(fault, Mapping):
            raise ValueError("a fault per stage needs a pipeline of several stages (CREATE VIEW ...)")
        if isinstance(fault, str) and "@" in fault:
            raise ValueError(f"fault {fault!r}: @STAGE names a stage of a pipeline of several (CREATE VIEW ...)")
        f = fault if isinstance(fault, Fault) else FAULTS[fault]
        if why := f.unfit_for(self.operator):
            raise ValueError(f"{why} (extra={{'operator': 'spark'}})")
        return f

    def check_staged(self) -> None:
        """ValueError when a trial of a pipeline of several stages asks for what only one stage runs with."""
        if self.per_node or self.link or self.malformed_every or self.param_change_at or self.quiesce:
            raise ValueError("a pipeline of several stages runs with none of per_node, link, malformed_every, "
                             "param_change_at, quiesce")
        if not self.kafka:
            raise ValueError("a pipeline trial runs through Kafka (kafka=...)")
