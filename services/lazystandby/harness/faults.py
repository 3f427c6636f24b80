"""The fault catalog, as data: each fault is a sequence of steps (target role, action, timing) with the
behaviour expected. The process launcher (harness/launcher.py), the fault campaign (harness/campaign.py)
and the container chaos runner (deploy/chaos/chaos.py) all read it, so a fault has one name and one
expectation wherever it runs; each runner maps the target role onto its own process or container and the
action onto its own signal, docker call or forged request.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Action(StrEnum):
    KILL = "kill"  # SIGKILL (process group) / docker kill
    STOP = "stop"  # SIGTERM to the node alone, and wait for it to exit / docker stop (a rolling upgrade's)
    PAUSE = "pause"  # SIGSTOP for `duration` (0: past the detector's timeout), then SIGCONT / docker pause
    RESTART = "restart"  # kill (if it runs), then start again with the same settings and state
    START = "start"  # start a node in a place whose node was killed (an operator place gets a new standby)
    KILL_REPEATEDLY = "kill-repeatedly"  # kill the primary, a spare standby joins, again (containers)
    FORGE_DELIVER = "forge-deliver"  # a client that is no node: Deliver claiming the next epoch, no tuples
    FORGE_PUSH = "forge-push"  # a client: Push claiming the next epoch
    FORGE_BACKUP = "forge-backup"  # a client: Backup with no batches and a checkpoint at input 10^9
    FORGE_HANDOVER = "forge-handover"  # a client: a Handover notice in the epoch in force, as if N were leaving
    BOMB = "bomb"  # a client: a backup batch of 32 KB that inflates to 1 GiB, claiming 100 bytes
    PARTITION = "partition"  # the links between target and `peer` ("*": every other node) carry nothing for
    # `duration` (0: past the detector's timeout), both ways, while every process runs; then they heal
    # (processes: loopback relays; containers: off the compose network and back, "*" only)
    CUT = "cut"  # as PARTITION, but the links stay cut, with the later steps running, until a HEAL step
    HEAL = "heal"  # the links a CUT step cut carry traffic again (and what they held arrives)
    KILL_OPERATOR = "kill-operator"  # SIGKILL the processes the node started (its Spark JVM and workers)
    LOOP_DIES = "loop-dies"  # SIGUSR1 to the node alone: its main loop (Nu's source, an operator node's
    # operator loop) raises as a bug would; the node must exit 70 and be replaced (processes only)
    HANG = "hang"  # SIGSTOP the processes the node started (its Spark JVM and workers), not the node, for
    # `duration` (0: past operator_stall_max and the detector's timeout), then SIGCONT


class Runner(StrEnum):
    PROCESSES = "processes"  # `lazystandby launch --fault`, failover-check, the campaign, integration tests
    CONTAINERS = "containers"  # `make chaos FAULT=...`, the system tests


@dataclass(frozen=True, slots=True)
class Step:
    target: str  # upstream | primary | standby | downstream
    action: Action
    delay: float = 0.0  # seconds after the previous step (or after the load started, for the first)
    after: str = ""  # wait for this first: "takeover" (Nu has accepted a takeover); "standby" (Nu has a
    # standby again, registered and in sync)
    duration: float = 0.0  # PAUSE, PARTITION: seconds stopped or cut off; 0 = four times the detector's timeout
    peer: str = ""  # PARTITION: the role on the other side of the cut, or "*" for all of them


@dataclass(frozen=True, slots=True)
class Fault:
    name: str
    expect: str
    steps: tuple[Step, ...]
    runners: frozenset[Runner] = frozenset({Runner.PROCESSES})
    kafka: bool = False  # needs the Kafka source (a restarted Nu rebuilds OQu from the link log)
    takes_over: bool = False  # a failover must happen (the new primary goes live)
    load: int = 40_000  # tuples of source load in a container run
    spark: bool = False  # needs the Spark operator (its action stops the operator's own processes)

    @property
    def target(self) -> str:
        return self.steps[0].target if self.steps else ""

    def unfit_for(self, operator: str) -> str:
        """Why this fault cannot be run with `operator` ("" when it can); each runner adds how to choose."""
        if self.spark and operator != "spark":
            return (f"{self.name} stops the primary's or the standby's Spark JVM and workers and needs the Spark "
                    f"operator, not {operator!r}")
        return ""

    @property
    def action(self) -> Action:
        return self.steps[0].action if self.steps else Action.KILL

    @property
    def double(self) -> bool:
        """Two faults or more (a START that repairs is not one)."""
        return sum(s.action is not Action.START for s in self.steps) > 1


def standby_back(nu: dict) -> bool:
    """Nu's status (`after="standby"`): it backs up to a standby again, registered since the last takeover
    (a takeover leaves Nu with none) and in sync."""
    return bool(nu.get("standby")) and bool(nu.get("standby_in_sync"))


_BOTH = frozenset({Runner.PROCESSES, Runner.CONTAINERS})
# A fenced node under a supervisor (exit_when_fenced; the compose stack's restart: on-failure, launch's own).
_BACK = "; on the compose stack and under launch N then exits (75), is started again, and rejoins as the standby"
_FORGED = ("; the call comes from a client with no node certificate: refused (TLS: at the handshake; plaintext: "
           "by the protocol's checks), nothing changes, no failover, Nd's output is exact")

CATALOG: dict[str, Fault] = {f.name: f for f in [
    Fault("none", "no fault: the run completes, Nd's output is exact, no failover", ()),
    Fault("kill-primary", "N' detects the loss and takes over in epoch 2; Nd's output is exact (0 lost, 0 duplicated)",
          (Step("primary", Action.KILL),), runners=_BOTH, takes_over=True),
    Fault("pause-primary", "N is stopped past the heartbeat timeout and N' takes over; when N resumes it is fenced "
          "by epoch, and nothing it sends reaches Nd" + _BACK, (Step("primary", Action.PAUSE),), runners=_BOTH,
          takes_over=True),
    Fault("kill-standby", "no failover; Nu's backup to N' fails, loudly (one WARN, NoStandby), and OQu is still "
          "trimmed by the primary's acks; Nd's output is exact", (Step("standby", Action.KILL),), runners=_BOTH),
    Fault("loop-dies-primary", "N's operator loop ends by an exception: N is NOT_SERVING and exits (70) at once, "
          "N' takes over in epoch 2, the supervisor starts N again as the standby; Nd's output is exact",
          (Step("primary", Action.LOOP_DIES),), takes_over=True),
    Fault("loop-dies-standby", "N''s operator loop ends by an exception: N' exits (70) at once and is started again "
          "as the standby; no failover; Nd's output is exact", (Step("standby", Action.LOOP_DIES),)),
    Fault("loop-dies-upstream", "Nu's source loop ends by an exception: Nu exits (70) at once, is started again and "
          "rebuilds OQu from the link log at the same positions; Nd's output is exact",
          (Step("upstream", Action.LOOP_DIES),), kafka=True),
    Fault("kill-upstream-restart", "Nu is killed and restarted; it rebuilds OQu from the link log at the same "
          "positions; Nd's output is exact", (Step("upstream", Action.RESTART),), runners=_BOTH, kafka=True),
    Fault("kill-downstream-restart", "Nd is killed and restarted; it reads its last output (and epoch) from the "
          "results topic, or its file, and loses or repeats nothing", (Step("downstream", Action.RESTART),),
          runners=_BOTH),
    Fault("pause-downstream", "Nd is stopped for 2 s: acks stop, N's OQ fills and backpressure reaches Nu; no "
          "livelock however small OQ is; Nd's output is exact", (Step("downstream", Action.PAUSE, duration=2.0),),
          runners=_BOTH),
    Fault("pause-standby", "N' is stopped for 2 s under load: no failover; once a backup call has gone unanswered for "
          "backup_stall_max, Nu counts N' out of sync (one WARN, lazystandby_standby_in_sync 0) and neither its "
          "source nor OQu's trim waits for it; when N' answers it skips to a checkpoint and is in sync again; "
          "Nd's output is exact", (Step("standby", Action.PAUSE, duration=2.0),), runners=_BOTH),
    Fault("pause-upstream", "Nu is stopped for 2 s under load: admission stops and N and N' wait (no failover: N' "
          "watches N, not Nu); Nu resumes where it was, and after a call that timed out while it was stopped "
          "it asks the receiver what it holds (a resync) and goes on from there; Nd's output is exact",
          (Step("upstream", Action.PAUSE, duration=2.0),), runners=_BOTH),
    Fault("kill-primary-repeatedly", "the primary is killed three times; after each takeover a spare standby "
          "starts empty, registers with Nu, learns the primary from it, is re-seeded from the trim point, and "
          "takes over at the next kill (epochs 2, 3, 4); Nd's output is exact",
          (Step("primary", Action.KILL_REPEATEDLY),), runners=frozenset({Runner.CONTAINERS}), load=200_000),
    # Sequences and pairs, with their timings.
    Fault("kill-primary-then-upstream", "N' takes over; Nu is killed as soon as it has accepted the takeover "
          "and restarted: the takeover was durable before Nu answered, so the restarted Nu knows the new primary "
          "and epoch; Nd's output is exact",
          (Step("primary", Action.KILL), Step("upstream", Action.RESTART, after="takeover")),
          runners=_BOTH, kafka=True, takes_over=True),
    Fault("kill-upstream-and-primary", "Nu and N die together; Nu restarts; N' takes over at the restarted Nu; "
          "Nd's output is exact", (Step("primary", Action.KILL), Step("upstream", Action.RESTART)),
          runners=_BOTH, kafka=True, takes_over=True),
    Fault("kill-primary-then-restart", "N is killed and N' takes over (epoch 2); N is started again with its own "
          "settings, is shown epoch 2 by Nd before it has done anything, and rejoins as N''s standby, empty, "
          "re-seeded by Nu; then N' is killed and N takes over (epoch 3): two failovers with two operator nodes; "
          "Nd's output is exact",
          (Step("primary", Action.KILL), Step("primary", Action.RESTART, after="takeover"),
           Step("standby", Action.KILL, after="standby")), runners=_BOTH, takes_over=True),
    Fault("stop-primary", "N is asked to stop (SIGTERM, as docker stop sends): it hands over (handover_on_stop): "
          "takes no more input, ends its lease at Nd with its last frame, tells N' to heartbeat now and says LEAVING "
          "to it, and N' takes over at once, not after the detector's timeout; N exits 0; Nd's output is exact",
          (Step("primary", Action.STOP),), runners=_BOTH, takes_over=True),
    Fault("rolling-restart", "both operator nodes restarted in turn, as a rolling upgrade does: N is stopped and "
          "hands over to N' (epoch 2), is started again and rejoins as the standby; then N' is stopped and hands "
          "back to N (epoch 3); each takeover at once, on the leaving primary's word; Nd's output is exact",
          (Step("primary", Action.STOP), Step("primary", Action.RESTART, after="takeover"),
           Step("standby", Action.STOP, after="standby")), runners=_BOTH, takes_over=True),
    Fault("kill-standby-then-primary", "N' is killed, then N 2 s later: the pipeline stalls, loudly (WARN lines "
          "for the failed links, lazystandby_peer_up 0, NoStandby and PipelineStalled); a new standby started in "
          "N's place registers with Nu, learns the dead primary, takes over; Nd's output is exact",
          (Step("standby", Action.KILL), Step("primary", Action.KILL, delay=2.0),
           Step("primary", Action.START, delay=3.0)), runners=_BOTH, takes_over=True),
    Fault("pause-standby-then-kill-primary", "N' is stopped for 2 s (out of sync: the pipeline goes on without it, "
          "and Nu trims past what it holds); N is killed 0.1 s after N' resumes, while it catches up: N' takes "
          "over from the checkpoint it skipped to and Nu's resend; Nd's output is exact",
          (Step("standby", Action.PAUSE, duration=2.0), Step("primary", Action.KILL, delay=0.1)),
          runners=_BOTH, takes_over=True),
    Fault("kill-primary-then-pause-downstream", "N' takes over while Nd is stopped for 2 s; the takeover waits "
          "for Nd; Nd's output is exact",
          (Step("primary", Action.KILL), Step("downstream", Action.PAUSE, delay=0.2, duration=2.0)),
          runners=_BOTH, takes_over=True),
    # Partitions: every process runs on; only the links between two of them carry nothing, then heal, and
    # what was sent meanwhile arrives late (a call its client gave up on still reaches the server).
    Fault("partition-primary-standby", "N' hears nothing from a live N past the detector's timeout while N still "
          "serves Nu and Nd: N' suspects N after each timeout, and Nd declines each takeover while N's deliveries "
          "renew its lease (takeover_lease); N' withdraws to epoch 1 and watches again; no failover, and at the heal "
          "N' hears N again; Nd's output is exact",
          (Step("standby", Action.PARTITION, peer="primary"),), runners=_BOTH),
    Fault("isolate-primary", "N is cut off from every node past the detector's timeout, still running: N' takes "
          "over in epoch 2; when the links heal, N's retried and late calls are refused by epoch" + _BACK
          + "; Nd's output is exact", (Step("primary", Action.PARTITION, peer="*"),), runners=_BOTH, takes_over=True),
    Fault("partition-upstream-primary", "Nu and N are cut off from each other for 2 s: no failover (N' still "
          "hears N); Nu's pushes time out and are retried after a resync, and the ones that arrive late are "
          "taken once; Nd's output is exact",
          (Step("upstream", Action.PARTITION, peer="primary", duration=2.0),), runners=_BOTH),
    Fault("partition-primary-downstream", "N and Nd are cut off from each other for 2 s: no failover; N's "
          "deliveries time out and are retried, the late ones taken once, OQ fills and backpressure reaches "
          "Nu; Nd's output is exact", (Step("primary", Action.PARTITION, peer="downstream", duration=2.0),),
          runners=_BOTH),
    Fault("partition-upstream-standby", "Nu and N' are cut off from each other for 2 s while N' still hears N: "
          "no failover; Nu counts N' out of sync after backup_stall_max and goes on without it; at the heal the "
          "backup calls that timed out reach N' late, and N' catches up from a checkpoint; Nd's output is exact",
          (Step("upstream", Action.PARTITION, peer="standby", duration=2.0),), runners=_BOTH),
    Fault("partition-upstream-standby-then-kill-primary", "Nu and N' are cut off from each other, and N is "
          "killed 0.1 s later: N' takes over in epoch 2 and fences Nd, but cannot reach Nu until the links heal "
          "2 s after the cut; meanwhile Nu pushes to a dead N and nothing moves (loudly); at the heal N' "
          "finishes the takeover at Nu; Nd's output is exact",
          (Step("upstream", Action.CUT, peer="standby"), Step("primary", Action.KILL, delay=0.1),
           Step("upstream", Action.HEAL, peer="standby", delay=1.9)), runners=_BOTH, takes_over=True),
    Fault("partition-primary-standby-then-kill-primary", "N and N' are cut off from each other: N' suspects N "
          "after each timeout and Nd declines, since N delivers (within its lease, or heard after N' lost it); N is "
          "killed 1.5 s after the cut, while the cut holds: N' takes over in epoch 2, after at most one more "
          "timeout (its word on N counts from its last decline), and the link heals 1 s later; Nd's output is exact",
          (Step("standby", Action.CUT, peer="primary"), Step("primary", Action.KILL, delay=1.5),
           Step("standby", Action.HEAL, peer="primary", delay=1.0)), runners=_BOTH, takes_over=True),
    Fault("isolate-standby", "N' is cut off from every node past the detector's timeout: it suspects N and "
          "starts a takeover that reaches no one, while Nu counts it out of sync and the pipeline goes on "
          "through N; when the links heal, Nd declines the takeover (N still delivers: its lease holds), N' "
          "withdraws to epoch 1 and catches up as a standby; no failover; Nd's output is exact",
          (Step("standby", Action.PARTITION, peer="*"),), runners=_BOTH),
    Fault("hang-operator", "N's operator stops (its Spark JVM and workers are stopped) while N runs, answering "
          "heartbeats and Nd's calls: after operator_stall_max N says it is stalled in its heartbeat replies and "
          "stops renewing its lease at Nd, N' takes over; N finds itself fenced and delivers nothing more"
          + _BACK + "; Nd's output is exact",
          (Step("primary", Action.HANG),), runners=_BOTH, takes_over=True, spark=True),
    Fault("kill-operator", "N's Spark JVM and workers are killed while N runs: its calls to the operator fail, N "
          "says so in its heartbeat replies and exits (code 70: a node that cannot process is better dead than "
          "alive), N' takes over well within operator_stall_max; on the compose stack (restart: on-failure) N "
          "is started again and rejoins as the standby; Nd's output is exact",
          (Step("primary", Action.KILL_OPERATOR),), runners=_BOTH, takes_over=True, spark=True),
    Fault("kill-standby-operator", "N''s Spark JVM and workers are killed while N' runs: N' exits (code 70) rather "
          "than wait as a standby that would take over and stall; Nu's backup to it fails, loudly (NoStandby), and "
          "the pipeline goes on through N; on the compose stack N' is started again and registers anew, empty; no "
          "failover; Nd's output is exact",
          (Step("standby", Action.KILL_OPERATOR),), runners=_BOTH, spark=True),
    Fault("kill-standby-then-hang-operator", "N' is killed, then N's operator stops (as in hang-operator) past "
          "operator_stall_max: nobody can take over, so N says it is stalled (OperatorStalled) but stays primary, "
          "and when its JVM runs again it goes on where it stopped; no failover; Nd's output is exact",
          (Step("standby", Action.KILL), Step("primary", Action.HANG, delay=1.0)), runners=_BOTH, spark=True),
    Fault("forged-deliver", "a Deliver claiming epoch e+1 with no tuples" + _FORGED,
          (Step("downstream", Action.FORGE_DELIVER),)),
    Fault("forged-push", "a Push claiming epoch e+1" + _FORGED, (Step("primary", Action.FORGE_PUSH),)),
    Fault("forged-backup", "a Backup with no batches and a checkpoint at input 10^9" + _FORGED,
          (Step("standby", Action.FORGE_BACKUP),)),
    Fault("forged-handover", "a Handover notice to N' in the epoch in force, as if N were leaving, from a client "
          "that is no node: over plaintext N' heartbeats at once, hears N answer as the primary and does not take "
          "over (TLS: refused at the handshake); nothing changes, no failover, Nd's output is exact",
          (Step("standby", Action.FORGE_HANDOVER),)),
    Fault("decompression-bomb", "a 32 KB backup batch that inflates to 1 GiB, claiming 100 bytes, from a client "
          "with no node certificate: refused (TLS: at the handshake; plaintext: within 100 ms, decoded outside the "
          "node lock and bounded by the declared size), N' stays small, no failover; Nd's output is exact",
          (Step("standby", Action.BOMB),)),
]}


def for_runner(runner: Runner) -> dict[str, Fault]:
    """The faults `runner` can inject, by name."""
    return {n: f for n, f in CATALOG.items() if runner in f.runners}
