"""A local topology of real node processes on loopback, faults as data, and the trials built on them.

    python -m lazystandby.cli launch          the main job: pipeline under load, N killed mid-run
    python -m lazystandby.cli failover-check  K trials, SIGKILL of N at a random moment, JSON summary

Each trial starts Nu, N, N', Nd as separate OS processes, drives a deterministic load through them, injects
one fault, waits until Nd holds every expected output (or a deadline), and checks Nd's output against the
truth table rebuilt from the generator. Processes are always stopped, logs kept under run/.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import config
from ..config import NodeConfig
from ..core.batching import format_bsize, parse_bsize
from ..core.errors import PeerError, SettingError
from ..halting import wait_for
from ..node.common import EXIT_FAILED, EXIT_FENCED
from ..sinks.base import read_output_file
from ..sinks.kafka_sink import read_results
from ..sources.generator import interleave
from ..sources.kafka_generator import BAD_RECORDS
from ..transport.grpc_transport import GrpcPeer
from ..transport.tls import TlsFiles
from . import forge, results, stages
from .check import (
    compare,
    compare_results,
    dead_letter_keys,
    expected_outputs,
    kafka_expected,
    kafka_window_expected,
    nu_read_all,
    window_expected,
)
from .faults import Action, Fault, Step, standby_back
from .links import ShapedNetwork, parse_link
from .operator_procs import hang, kill_all, no_process_left
from .partition import LinkRelay
from .places import N2, NAME, ND, NU, OPERATORS, PLACE_OF_ROLE, ROLE_AT_START, N
from .stages import FAULTS
from .trial_spec import TrialSpec
from .wait import wait_until

ROOT = Path(__file__).resolve().parents[3]
# Run from a source checkout, a node process needs the runtime package, the Spark side and the repository on
# its path; installed (`pip install .`), it finds them in site-packages like this process does.
SOURCE_TREE = (ROOT / "services" / "lazystandby").is_dir()
PYTHONPATH = [ROOT / "services", ROOT / "spark", ROOT] if SOURCE_TREE else []

# The detector for runs with the Spark operator: two Spark JVMs, a broker and four nodes share this machine's
# cores, and five misses rather than three avoid failovers that only CPU starvation caused (correct anyway,
# thanks to epochs, but noisy).
SPARK_DETECTOR = {"heartbeat_interval": 0.1, "heartbeat_misses": 5}
# Seconds between `lazystandby run`'s progress lines (admitted, delivered, dead letters per stage).
RUN_REPORT_S = 10.0


def run_dir() -> Path:
    """Where runs keep their work directories and logs: LS_RUN_DIR, else ./run."""
    d = Path(os.environ.get("LS_RUN_DIR", "run")).resolve()
    d.mkdir(parents=True, exist_ok=True)
    return d


@contextlib.contextmanager
def scratch(prefix: str, *, under: Path | None = None, keep: bool = False) -> Iterator[Path]:
    """A fresh work directory for one run: removed when the run ends without an exception (unless `keep`),
    left in place, with its logs, when it fails. A throughput run at full speed leaves a hundred MB or more of
    Nd output, so a bench's hundreds of runs, kept, would fill a disk."""
    d = Path(tempfile.mkdtemp(prefix=prefix, dir=under))
    yield d
    if not keep:
        shutil.rmtree(d, ignore_errors=True)


PORTS_FROM = 20_000  # the low end of the ports free_ports picks from
# LS_PORT_RANGE=LOW-HIGH narrows the draw (high end excluded): harnesses that run side by side on one host
# (the suite's parallel workers) each draw from their own range, so one never takes a port another has
# picked and not yet bound.
PORT_RANGE_ENV = "LS_PORT_RANGE"
_PORT_DRAWS = random.SystemRandom()  # not the module's generator, which a seeded campaign replays
# How many of the ports this process handed out last free_ports does not draw again: a port is free when it
# is drawn and taken only when its node starts, and a pipeline of several stages draws every stage's ports
# before any stage starts; a port drawn twice makes the second node to bind it exit (EADDRINUSE).
RECENT_PORTS_KEPT = 2048
_RECENT_PORTS: collections.deque[int] = collections.deque(maxlen=RECENT_PORTS_KEPT)
_PORTS_LOCK = threading.Lock()


def free_port() -> int:
    return free_ports(1)[0]


def ephemeral_range(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> tuple[int, int]:
    """The ports the kernel hands out for bind(0) and outgoing connections (Linux's default if unknown)."""
    try:
        with open(path) as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def port_range() -> tuple[int, int]:
    """The ports free_ports draws from, [low, high): LS_PORT_RANGE if set, else from PORTS_FROM to the
    kernel's ephemeral range."""
    spec = os.environ.get(PORT_RANGE_ENV, "")
    if spec:
        try:
            lo, hi = (int(x) for x in spec.split("-"))
        except ValueError:
            raise ValueError(f"{PORT_RANGE_ENV}={spec!r}: expected LOW-HIGH, e.g. 20000-26000") from None
        if not 1024 <= lo < hi <= 65536:
            raise ValueError(f"{PORT_RANGE_ENV}={spec!r}: expected 1024 <= LOW < HIGH <= 65536")
        return lo, hi
    return PORTS_FROM, ephemeral_range()[0]


def free_ports(n: int) -> list[int]:
    """`n` distinct free loopback ports, below the kernel's ephemeral range: a port the kernel picked (bind to
    0) is free only until the kernel hands it to someone else, and the Spark JVMs started before the later
    nodes open dozens of ephemeral ports, any of which may be a port handed out earlier for a node yet to
    start. The sockets stay bound until all are picked, so no port is handed out twice in one call (two gRPC
    servers on one port would split its connections between them), and none of the RECENT_PORTS_KEPT last
    handed out is drawn again where the range has room. Falls back to the kernel's choice where the range
    leaves no room below it."""
    with _PORTS_LOCK:  # the stages of a trial may restart nodes at once (harness/stages.at_once)
        return _draw_ports(n)


def _draw_ports(n: int) -> list[int]:
    start, low = port_range()
    socks: list[socket.socket] = []
    try:
        tries = 0
        roomy = low - start > 2 * RECENT_PORTS_KEPT
        while len(socks) < n:
            tries += 1
            port = _PORT_DRAWS.randrange(start, low) if low - start >= 4 * n and tries <= 20 * n else 0
            if port and roomy and port in _RECENT_PORTS:
                continue
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            socks.append(s)
        ports = [s.getsockname()[1] for s in socks]
        _RECENT_PORTS.extend(ports)
        return ports
    finally:
        for s in socks:
            s.close()


CERT_ROLES = {"upstream": "upstream", "primary": "operator", "standby": "operator", "downstream": "downstream"}


def make_certs(out: Path, specs: list[str]) -> None:
    """A development CA and certificates `NAME:ROLE` under `out` (deploy/tls/make-certs.sh, or the copy an
    installed package carries; idempotent)."""
    script = ROOT / "deploy" / "tls" / "make-certs.sh"
    if not script.exists():
        script = Path(__file__).resolve().parent / "make-certs.sh"  # setup.py copies it into the package
    subprocess.run(["bash", str(script), str(out), *specs], check=True)


def _kill(topo: Topology, key: str, step: Step) -> dict:
    topo.signal(key, signal.SIGKILL)
    topo.procs[key].wait(timeout=10)  # gone before the next step looks at who is alive
    return {}


LOOP_DIES_WAIT_S = 30.0  # a node whose loop died exits at once (cli.run_node: no handover, 0.5 s joins)
STOP_WAIT_S = 60.0  # a stopped node's exit: its handover is bounded to a few seconds (PrimarySide.hand_over)
EXIT_WAIT_S = 30.0  # a fenced node's exit after it stops serving: its operator's stop (a Spark session's)


def _stop(topo: Topology, key: str, step: Step) -> dict:
    """SIGTERM to the node alone, as `docker stop` sends it to a container's first process (its Spark JVM
    is the node's to stop), and its exit awaited: a primary hands over first (handover_on_stop)."""
    t0 = time.monotonic()
    topo.procs[key].send_signal(signal.SIGTERM)
    code = _exit_of(topo, key, STOP_WAIT_S, "SIGTERM")
    return {"exit_code": code, "stopped_ms": round((time.monotonic() - t0) * 1000, 1)}


def _loop_dies(topo: Topology, key: str, step: Step) -> dict:
    """SIGUSR1 to the node alone: its main loop raises (cli.run_node); its exit is awaited and timed. The
    supervisor starts it again (EXIT_FAILED is one of the exits it restarts)."""
    t0 = time.monotonic()
    topo.procs[key].send_signal(signal.SIGUSR1)
    code = _exit_of(topo, key, LOOP_DIES_WAIT_S, "SIGUSR1")
    return {"exit_code": code, "exited_ms": round((time.monotonic() - t0) * 1000, 1)}


def _exit_of(topo: Topology, key: str, wait_s: float, sent: str) -> int:
    """The exit code of node `key`, which `sent` (a signal) asked to end. A node still there after
    `wait_s` is asked for its threads' stacks (SIGQUIT: cli.run_node), which its log then holds, and the
    step fails."""
    p = topo.procs[key]
    try:
        return p.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGQUIT)
        time.sleep(1.0)  # the dump is written from the signal handler, at once
        raise RuntimeError(f"{key} had not exited {wait_s:.0f} s after {sent}; its threads' stacks are in "
                           f"{topo.workdir / f'{key}.log'}") from None


def _pause(topo: Topology, key: str, step: Step) -> dict:
    # By default past the detector's timeout, then back: an old primary must find itself fenced.
    topo.signal(key, signal.SIGSTOP)
    time.sleep(topo.lasting(step))
    topo.signal(key, signal.SIGCONT)
    return {}


def _hang(topo: Topology, key: str, step: Step) -> dict:
    return {"stopped": hang(topo.procs[key].pid, topo.lasting(step))}


def _kill_operator(topo: Topology, key: str, step: Step) -> dict:
    return {"killed": kill_all(topo.procs[key].pid)}


def _restart(topo: Topology, key: str, step: Step) -> dict:
    topo.signal(key, signal.SIGKILL)
    topo.procs[key].wait()
    time.sleep(0.5)
    topo.start(key)
    return {"started": key}


def _start(topo: Topology, key: str, step: Step) -> dict:
    """A node again in a place whose node was killed; in an operator place, a new, empty standby that
    learns the primary from Nu (as a spare does), so that it can take over from a dead primary."""
    topo.procs[key].wait()
    if key in OPERATORS:
        topo.start(key, role="standby", name=f"{topo.NAMES[key]}-{len(topo.restarts) + 2}")
    else:
        topo.start(key)
    return {"started": key}


def _links(topo: Topology, key: str, step: Step) -> list[LinkRelay]:
    peer = "*" if step.peer == "*" else PLACE_OF_ROLE[step.peer]
    links = topo.links(key, peer)
    if not links:
        raise ValueError(f"no link between {key} and {peer} can be cut: the topology was started without relays")
    return links


def _partition(topo: Topology, key: str, step: Step) -> dict:
    # By default past the detector's timeout, as a pause; every process runs on meanwhile.
    _cut(topo, key, step)
    time.sleep(topo.lasting(step))
    return _heal(topo, key, step)


def _cut(topo: Topology, key: str, step: Step) -> dict:
    links = _links(topo, key, step)
    for relay in links:
        relay.cut()
    return {"peer": step.peer, "links": len(links)}


def _heal(topo: Topology, key: str, step: Step) -> dict:
    links = _links(topo, key, step)
    for relay in links:
        relay.heal()
    return {"peer": step.peer, "links": len(links), "held_bytes": sum(r.held_while_cut for r in links)}


def cuttable(fault: Fault) -> frozenset[frozenset[str]]:
    """The pairs of places whose links `fault` cuts (their nodes then dial each other through relays)."""
    pairs = set()
    for s in fault.steps:
        if s.action in (Action.PARTITION, Action.CUT):
            key = PLACE_OF_ROLE[s.target]
            others = [k for k in Topology.ROLES if k != key] if s.peer == "*" else [PLACE_OF_ROLE[s.peer]]
            pairs.update(frozenset((key, o)) for o in others)
    return frozenset(pairs)


def _forge(call: Callable[..., forge.Answer], epoch_delta: int) -> Callable[[Topology, str, Step], dict]:
    def act(topo: Topology, key: str, step: Step) -> dict:
        # The epoch in force, from Nd (which may be restarting after an earlier step: wait for it).
        seen: list[int] = []
        wait_until(lambda: seen.append(topo.status(ND)["epoch"]) is None, 60)
        epoch = (seen[0] if seen else 1) + epoch_delta
        rss_before = topo.rss_mb(key) if step.action is Action.BOMB else None
        a = call(topo.addrs[key], epoch, ca=topo.tls.ca if topo.tls else "")
        out = {"answer": a.status, "answer_ms": round(a.ms, 1), "details": a.details[:200]}
        if step.action is Action.FORGE_BACKUP and a.status == "OK":
            # A standby answers what it holds: refused means it did not move to the forged checkpoint.
            out["answer"] = "APPLIED" if topo.status(key)["received_through"] >= 10**9 else "NOT_APPLIED"
        if step.action is Action.FORGE_HANDOVER and a.status == "OK":
            # Taken (a heartbeat now), but it must move nothing: the standby is still one once that
            # heartbeat has had time to come back.
            time.sleep(0.5)
            out["answer"] = "NOT_APPLIED" if topo.status(key)["role"] == "standby" else "APPLIED"
        if step.action is Action.BOMB:
            out["rss_mb"] = topo.rss_mb(key)
            out["rss_before_mb"] = rss_before
        return out

    return act


# How this runner carries out the catalog's actions, and where each role runs.
ACTIONS: dict[Action, Callable[[Topology, str, Step], dict]] = {
    Action.KILL: _kill, Action.STOP: _stop, Action.PAUSE: _pause, Action.RESTART: _restart, Action.START: _start,
    Action.FORGE_DELIVER: _forge(forge.deliver, 1), Action.FORGE_PUSH: _forge(forge.push, 1),
    Action.FORGE_BACKUP: _forge(forge.backup_jump, 0), Action.FORGE_HANDOVER: _forge(forge.handover, 0),
    Action.BOMB: _forge(forge.bomb, 0),
    Action.PARTITION: _partition, Action.CUT: _cut, Action.HEAL: _heal, Action.HANG: _hang,
    Action.KILL_OPERATOR: _kill_operator, Action.LOOP_DIES: _loop_dies,
}
FORGED = frozenset({Action.FORGE_DELIVER, Action.FORGE_PUSH, Action.FORGE_BACKUP, Action.FORGE_HANDOVER,
                    Action.BOMB})


def places_at_fault(topo: Topology, fault: Fault) -> dict[str, str]:
    """Where each role the catalog names runs when `fault` starts: N's and N''s places swapped when the
    node in N''s place is the primary (it took over before the fault: on a saturated machine a detector
    may time out on a live primary), so that `kill-primary` kills the primary. A fault that cuts links
    keeps the places it was set up with (its relays are laid between them before the run)."""
    places = dict(PLACE_OF_ROLE)
    if cuttable(fault) or not topo.alive(N2):
        return places
    try:
        if topo.status(N2).get("role") == "primary":
            places.update(primary=N2, standby=N)
    except PeerError:
        pass  # not answering: it is no primary that a fault should hit
    return places


def inject(topo: Topology, fault: Fault, timeout: float) -> list[dict]:
    """Carry out `fault`'s steps in order, with their timings; one event per step."""
    places = places_at_fault(topo, fault)
    events = []
    for step in fault.steps:
        if step.after == "takeover":
            wait_until(lambda: bool(topo.status(NU)["takeovers"]), timeout, step=0.005)
        elif step.after == "standby":
            # Nu's word alone is not enough for a step that needs the standby (a handover tells the standby
            # that heartbeats): its first heartbeat may not have reached the primary yet.
            wait_until(lambda: standby_back(topo.status(NU)) and _standby_hears_primary(topo), timeout, step=0.05)
        if step.delay:
            time.sleep(step.delay)
        at = time.time()
        out = ACTIONS[step.action](topo, places[step.target], step)
        events.append({"at": at, "target": step.target, "place": places[step.target], "action": str(step.action),
                       **out})
    return events


def _standby_hears_primary(topo: Topology) -> bool:
    """A node in an operator place is the standby and its heartbeats reach the primary."""
    for key in OPERATORS:
        if topo.alive(key):
            s = topo.status(key)
            if s.get("role") == "standby" and s.get("primary_heard") is True:
                return True
    return False


class StatusPoller:
    """Nodes' status over one channel per node, kept from call to call, for a measurement that polls all
    along. A fresh channel per call (Topology.status) cost 2.6 ms of CPU between the harness and the node
    against 0.7-1.0 ms on a kept one (200 calls each way to an idle N, twice): at the bench's 20 polls a second, 5 % of
    a core taken from the pipeline it measures. A call that fails drops its channel, so the next one starts
    afresh as Topology.status would. One caller at a time; `close()` when done (or use it as a context)."""

    def __init__(self, addrs: dict[str, str], tls: TlsFiles | None = None) -> None:
        self._addrs, self._tls = addrs, tls
        self._peers: dict[str, GrpcPeer] = {}

    def status(self, key: str, timeout: float = 2.0) -> dict:
        peer = self._peers.get(key)
        if peer is None:
            peer = self._peers[key] = GrpcPeer(self._addrs[key], tls=self._tls)
        try:
            return peer.status(timeout).snapshot
        except PeerError:
            self._peers.pop(key).close()
            raise

    def close(self) -> None:
        for peer in self._peers.values():
            peer.close()
        self._peers.clear()

    def __enter__(self) -> StatusPoller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Topology:
    """Nu, N, N', Nd as processes on 127.0.0.1 with the given node settings (typed values of NodeConfig's
    fields; each node gets them as flags)."""

    settings: dict[str, Any]
    workdir: Path
    with_standby: bool = True  # False: no N' at all (the no-HA baseline of the benchmarks)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    addrs: dict[str, str] = field(default_factory=dict)
    restarts: list[str] = field(default_factory=list)
    per_node: dict[str, dict[str, Any]] = field(default_factory=dict)  # settings for one place only
    tls_dir: Path | None = None  # mutual TLS: a development CA and a certificate per node are made here
    tls: TlsFiles | None = None  # the harness's own (admin) certificate when the nodes run mutual TLS
    cuttable: frozenset[frozenset[str]] = frozenset()  # pairs of places whose links run through a LinkRelay
    relays: dict[tuple[str, str], LinkRelay] = field(default_factory=dict)  # (client place, server place)
    # Start a node again when it ends itself (fenced with exit_when_fenced, or its operator failed), as the
    # compose stack's `restart: on-failure` does: without it, a primary deposed while it ran stays fenced,
    # and the pipeline goes on with no standby.
    supervise: bool = False
    supervisor_restarts: list[str] = field(default_factory=list)  # places the supervisor started again, in order
    # Shaped links (harness.links: a preset or RATE[:DELAY_MS]): each place in a network namespace of its
    # own behind a link of that rate; "" runs every node on 127.0.0.1.
    link: str = ""
    net: ShapedNetwork | None = None

    ROLES = ROLE_AT_START
    NAMES = NAME

    def __post_init__(self) -> None:
        ports = free_ports(2 * len(self.ROLES))
        hosts = {k: "127.0.0.1" for k in self.ROLES}
        if self.link:
            if self.cuttable or self.settings.get("kafka_bootstrap"):
                raise SettingError(f"link ({self.link}): shaped links run the generator's pipeline; a fault that "
                                   f"cuts links and a Kafka source are run on loopback")
            self.net = ShapedNetwork(tuple(self.ROLES), parse_link(self.link)).up()
            hosts = {k: self.net.address(k) for k in self.ROLES}
        self.addrs = {k: f"{hosts[k]}:{ports[i]}" for i, k in enumerate(self.ROLES)}
        self.metrics_ports = {k: ports[len(self.ROLES) + i] for i, k in enumerate(self.ROLES)}
        self.sink = str(self.workdir / "nd-output.tsv")
        for client, server in self.DIALS:
            if frozenset((client, server)) in self.cuttable:
                self.relays[client, server] = LinkRelay(self.addrs[server])
        if self.tls_dir is not None:
            # A node behind a shaped link is reached at its namespace's address: its certificate names it.
            make_certs(self.tls_dir, [f"{k}:{CERT_ROLES[self.ROLES[k]]}" + (f":{k},{hosts[k]}" if self.net else "")
                                      for k in self.ROLES] + ["admin:admin"])
            self.tls = TlsFiles(str(self.tls_dir / "ca.crt"), str(self.tls_dir / "admin.crt"),
                                str(self.tls_dir / "admin.key"))
        # Starting a node (a fault's step, or the supervisor's restart) is one act at a time per topology.
        self._life = threading.RLock()
        self._stopping = threading.Event()
        self._started_as: dict[str, tuple[str, str]] = {}  # place: (role, name) its node was last started with
        self._supervisor: threading.Thread | None = None

    # Who calls whom: Nu pushes to N and backs up to N'; N delivers to Nd; N' watches N, registers and takes
    # over at Nu and Nd (an operator node keeps its Nu address for when it is a standby).
    DIALS = ((NU, N), (NU, N2), (N, NU), (N, ND), (N2, NU), (N2, ND), (N2, N))

    def dial(self, client: str, server: str) -> str:
        """The address `client` reaches `server` at: a relay's, when that link can be cut."""
        relay = self.relays.get((client, server))
        return relay.address if relay is not None else self.addrs[server]

    def links(self, key: str, peer: str) -> list[LinkRelay]:
        """The relays between places `key` and `peer` ("*": every other place), both directions."""
        return [r for (c, s), r in self.relays.items()
                if key in (c, s) and (peer == "*" or peer in (c, s))]

    @property
    def heartbeat_timeout(self) -> float:
        """The detector's timeout these nodes run with (a pause must outlast it to count as a failure)."""
        interval = self.settings.get("heartbeat_interval", NodeConfig.heartbeat_interval)
        return float(interval) * int(self.settings.get("heartbeat_misses", NodeConfig.heartbeat_misses))

    def lasting(self, step: Step) -> float:
        """How long a pause, a partition or a hang lasts: its duration, or four times the detector's timeout
        (a hang: past operator_stall_max as well)."""
        stall = float(self.settings.get("operator_stall_max", NodeConfig.operator_stall_max))
        return step.duration or self.heartbeat_timeout * 4 + (stall if step.action is Action.HANG else 0.0)

    def args(self, key: str, role: str = "", name: str = "") -> list[str]:
        """The command line of the node in place `key`: its place's role, or `role` (a standby started in
        an operator's place learns the primary from Nu, as a spare does)."""
        a = self.addrs

        def to(server: str) -> str:
            return self.dial(key, server)

        role = role or self.ROLES[key]
        peers = {
            "upstream": {"primary": to(N), "standby": to(N2) if self.with_standby else ""},
            "primary": {"upstream": to(NU), "downstream": to(ND)},
            "standby": {"upstream": to(NU), "downstream": to(ND),
                        "primary": to(N) if key == N2 and not name else ""},
            "downstream": {"sink": self.sink},
        }[role]
        opts = {"role": role, "name": name or self.NAMES[key], "listen": a[key],
                "metrics_port": self.metrics_ports[key], **peers, **self.settings, **self.per_node.get(key, {})}
        if (NU, key) in self.relays:
            # An operator node names itself to Nu (registering, taking over, announcing) by the address Nu
            # reaches it at, as it would behind any network: Nu's relay to it.
            opts["advertise"] = self.dial(NU, key)
        if self.tls_dir is not None:
            opts.update(tls_ca=str(self.tls_dir / "ca.crt"), tls_cert=str(self.tls_dir / f"{key}.crt"),
                        tls_key=str(self.tls_dir / f"{key}.key"))
        return [sys.executable, "-m", "lazystandby.cli", "node", *config.to_args(opts)]

    def scratch_dir(self, key: str) -> Path:
        """The node's TMPDIR, inside the work directory: a node killed with -9 cannot remove its temporary
        files (its Spark session's, whose JVM follows TMPDIR too: lazystandby_spark.query.driver_settings),
        and /tmp kept about 100 of them from each run of the suite; here they go when the run's work
        directory does."""
        d = self.workdir / "tmp" / key
        d.mkdir(parents=True, exist_ok=True)
        return d

    def start(self, key: str, role: str = "", name: str = "") -> None:
        with self._life:
            self._start(key, role, name)

    def _start(self, key: str, role: str, name: str) -> None:
        env = dict(os.environ)
        if not self.settings.get("kafka_bootstrap"):
            # The generator, not a cluster the caller's environment happens to name.
            env.pop("KAFKA_BOOTSTRAP", None)
            env.pop("LS_KAFKA_BOOTSTRAP", None)
        if PYTHONPATH:
            env["PYTHONPATH"] = os.pathsep.join(str(p) for p in PYTHONPATH)
        env["TMPDIR"] = str(self.scratch_dir(key))
        log = open(self.workdir / f"{key}.log", "ab")  # noqa: SIM115 - owned by the child
        if key in self.procs:
            self.restarts.append(key)
        argv = self.args(key, role, name)
        if self.net is not None:
            argv = self.net.wrap(key, argv)  # ip execs the node: the process is the node's still
        # Its own process group, so that a fault hits the node with its Spark JVM, as it would a container.
        self.procs[key] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                           start_new_session=True)
        self._started_as[key] = (role, name)

    # The exits a node chooses for its supervisor to start it again (node.common); a killed node (-9) is
    # the fault a trial asked for, and is left alone.
    RESTARTED = (EXIT_FAILED, EXIT_FENCED)

    def _supervise(self) -> None:
        """Every 50 ms: a node that ended itself is started again as it was last started (its place's
        settings: N as the primary of epoch 1). Nd refuses it before it has done anything, and a node that
        has not worked in its life rejoins as the standby, as on the compose stack."""
        while not self._stopping.wait(0.05):
            for key, p in list(self.procs.items()):
                if p.poll() not in self.RESTARTED:
                    continue
                with self._life:
                    if self.procs.get(key) is p and not self._stopping.is_set():
                        self.supervisor_restarts.append(key)
                        self._start(key, *self._started_as[key])

    def waiting_restart(self, key: str) -> bool:
        """The node in place `key` ended itself, and the supervisor has not started it again yet."""
        return self.supervise and key in self.procs and self.procs[key].poll() in self.RESTARTED

    def last_words(self, key: str) -> str:
        """The last line a node wrote that is not a traceback frame: its error, when it failed to start."""
        lines = [ln.strip() for ln in (self.workdir / f"{key}.log").read_text(errors="replace").splitlines()]
        lines = [ln for ln in lines if ln and not ln.startswith(("File ", "Traceback", "^", "~"))]
        return lines[-1] if lines else "(no output)"

    def alive(self, key: str) -> bool:
        return key in self.procs and self.procs[key].poll() is None

    def rss_mb(self, key: str) -> float | None:
        """Resident memory of the node's process, in MB (Linux /proc); None when it is not running."""
        try:
            status = Path(f"/proc/{self.procs[key].pid}/status").read_text()
        except OSError:
            return None
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return None

    def start_all(self) -> None:
        # Downstream first, upstream last: the source starts only when the path to Nd exists.
        keys = (ND, N, N2) if self.with_standby else (ND, N)
        for key in keys:
            self.start(key)
        for key in keys:
            self.wait_ready(key)
        self.start(NU)
        self.wait_ready(NU)
        if self.supervise and self._supervisor is None:
            self._supervisor = threading.Thread(target=self._supervise, name="supervisor", daemon=True)
            self._supervisor.start()

    def status(self, key: str, timeout: float = 2.0) -> dict:
        """A node's status over a channel of its own, closed after the call: right around faults and
        restarts, at about 2.6 ms of CPU a call (harness and node). A measurement that polls all along
        uses `poller()`."""
        peer = GrpcPeer(self.addrs[key], tls=self.tls)
        try:
            return peer.status(timeout).snapshot
        except PeerError as e:
            p = self.procs.get(key)
            if p is None or p.poll() is None:
                raise
            # The node is gone: say how it ended, which the refused connection alone does not.
            raise PeerError(e.status, f"{e.message}; {self.NAMES[key]} exited {p.returncode}: "
                                      f"{self.last_words(key)} [log: {self.workdir / (key + '.log')}]",
                            refused=e.refused) from None
        finally:
            peer.close()

    def poller(self) -> StatusPoller:
        return StatusPoller(self.addrs, self.tls)

    def wait_ready(self, key: str, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.procs[key].poll() is not None:
                raise NodeStartError(f"{self.NAMES[key]} did not start (exit {self.procs[key].returncode}): "
                                     f"{self.last_words(key)} [log: {self.workdir / (key + '.log')}]")
            try:
                self.status(key, 0.5)
                return
            except PeerError:
                time.sleep(0.05)
        raise TimeoutError(f"{key} not ready after {timeout}s; see {self.workdir}/{key}.log")

    def signal(self, key: str, sig: int) -> None:
        """`sig` to the node and everything it started (its Spark JVM)."""
        _killpg(self.procs[key], sig)

    def stop(self) -> None:
        self._stopping.set()
        if self._supervisor is not None:
            self._supervisor.join()
        for relay in self.relays.values():
            relay.close()
        for p in self.procs.values():
            if p.poll() is None:
                _killpg(p, signal.SIGCONT)  # a paused group must run to hear the TERM
                p.terminate()  # the node alone: it stops its own Spark session and queries cleanly
        # A primary's first TERM starts a handover (handover_on_stop), which waits for a standby that is
        # stopping too; the second stops it at once. The whole pipeline stops here: nothing to hand over to.
        wait_until(lambda: all(p.poll() is not None for p in self.procs.values()), 0.2, step=0.02)
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            _killpg(p, signal.SIGKILL)  # whatever of the group outlived its node (a JVM)
            p.wait()
        if self.net is not None:
            self.net.down()

    def __enter__(self) -> Topology:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _killpg(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)  # the group outlives its leader while any member lives
    except ProcessLookupError:
        pass


class _KafkaLoad(threading.Thread):
    """The generator writing the source topics during a trial, with an optional parameter change."""

    def __init__(self, bootstrap: str, prefix: str, total: int, rate: float, seed: int, malformed_every: int,
                 param_change_at: tuple[int, str] | None, partitions: int = 1,
                 bad_records: list[bytes | None] | None = None, keys: int = 0) -> None:
        super().__init__(daemon=True)
        self.keys = keys
        self.args = (bootstrap, prefix, total, rate, seed, malformed_every, param_change_at)
        self.partitions = partitions
        self.bad_records = bad_records
        self.error: BaseException | None = None  # why the load stopped short (the trial then fails)

    def run(self) -> None:
        try:
            self._write()
        except BaseException as e:
            self.error = e
            raise

    def _write(self) -> None:
        from ..sources.kafka_generator import generate, set_predicate
        from ..sources.kafka_source import Topics

        bootstrap, prefix, total, rate, seed, bad, change = self.args
        topics = Topics(prefix)
        kw = {"rate": rate, "seed": seed, "topics": topics, "malformed_every": bad, "partitions": self.partitions,
              "bad_records": self.bad_records, "span": total, "keys": self.keys}
        if change is None:
            generate(bootstrap, ["I1", "I2"], total, **kw)
            return
        at, predicate = change
        generate(bootstrap, ["I1", "I2"], at, **kw)
        set_predicate(bootstrap, predicate, topics)
        generate(bootstrap, ["I1", "I2"], total, start=at, **kw)


def run_trial(spec: TrialSpec | None = None, /, *, progress: Callable[[str], None] | None = None,
              **fields: Any) -> dict:
    """One trial (`spec`, or a TrialSpec of `fields`, or `spec` with `fields` replaced); returns the check
    result, recovery figures and node counters. `progress` hears what the trial is doing, every few
    seconds while it waits. A pipeline of several stages runs stage by stage (harness/stages.py).

    Its phases (_Trial): the settings and the truth known before the run; the nodes started and the load
    on; the fault; the truth read from Kafka once the load is in; the pipeline settled; the verdict."""
    spec = TrialSpec(**fields) if spec is None else replace(spec, **fields)
    if stages.count(spec.pipeline) > 1:
        spec.check_staged()
        return _staged_trial(spec, progress)
    f = spec.single_fault()
    trial = _Trial(spec, f, say=progress or (lambda _: None))
    with Topology(trial.settings, trial.workdir, per_node=dict(spec.per_node or {}),
                  tls_dir=trial.workdir / "tls" if spec.tls else None, cuttable=cuttable(f),
                  supervise=bool(trial.settings.get("exit_when_fenced")), link=spec.link) as topo:
        trial.result["link"] = topo.net.describe() if topo.net is not None else None
        try:
            trial.start(topo)
            trial.reach_the_fault(topo)
            trial.inject(topo)
            trial.read_the_truth(topo)
            trial.settle(topo)
            trial.judge(topo)
        finally:
            trial.result["ok"] = trial.ok
    if trial.ok and not spec.keep:
        shutil.rmtree(trial.workdir, ignore_errors=True)
    return trial.result


def _staged_trial(spec: TrialSpec, progress: Callable[[str], None] | None) -> dict:
    """run_trial for a pipeline of several stages (harness/stages.py): per stage a _Trial and a Topology
    whose nodes are given the whole file, its tables' topics under the run's prefix, and their stage, as
    `lazystandby run` and the compose stack give them: each stage's views and engine topics lie where
    Topics.of_pipeline names them, and its metrics carry `pipeline_stage`."""
    home = Path(tempfile.mkdtemp(prefix="lazystandby-stages-", dir=run_dir()))
    base, say = f"t{random.getrandbits(40):x}.", progress or (lambda _: None)
    from ..formats.pipeline import file_text

    whole = home / Path(spec.pipeline).name
    whole.write_text(file_text(config.pipeline_stages(spec.pipeline), base))
    each = replace(spec, pipeline=str(whole), extra={**(spec.extra or {}), "topic_prefix": base})

    def trial(k: int, _stage, f: Fault) -> _Trial:
        return _Trial(each, f, say=lambda m: say(f"stage {k}: {m}"), stage=k)

    def topology(t: _Trial) -> Topology:
        return Topology(t.settings, t.workdir, tls_dir=t.workdir / "tls" if spec.tls else None,
                        cuttable=cuttable(t.f), supervise=bool(t.settings.get("exit_when_fenced")))

    return stages.run_stages(config.pipeline_stages(spec.pipeline), spec.fault, trial=trial, topology=topology,
                             operator=spec.operator, timeout=spec.timeout, home=home, keep=spec.keep)


class _Trial:
    """One run_trial, phase by phase; each phase reads what the ones before it left here."""

    def __init__(self, spec: TrialSpec, f: Fault, *, say: Callable[[str], None], stage: int = 0) -> None:
        """`stage`: 0, a pipeline whose topics the trial puts under its prefix and whose load it writes;
        else the stage of that number of a pipeline of several (harness/stages.py), whose tables' topics
        are already the run's own, which its nodes run from the whole file, and whose load only the first
        stage writes (each later one reads a view an earlier stage writes)."""
        self.asked, self.f, self.say = spec, f, say  # `spec` below is the pipeline's
        self.bsize, self.fed = parse_bsize(spec.bsize), stage > 1
        self.total, self.rate, self.seed, self.timeout = spec.total, spec.rate, spec.seed, spec.timeout
        self.predicate = spec.predicate
        extra, pipeline, kafka = spec.extra or {}, spec.pipeline, spec.kafka
        self.kafka = kafka
        self.workdir = Path(tempfile.mkdtemp(prefix="lazystandby-", dir=run_dir()))
        self.settings = {"bsize": self.bsize, "codec": spec.codec, "total": spec.total, "rate": spec.rate,
                         "predicate": spec.predicate, "seed": spec.seed, "heartbeat_interval": 0.1,
                         "heartbeat_misses": 3, **extra}
        self.spec = None
        if pipeline:
            if not kafka:
                raise ValueError("a pipeline trial runs through Kafka (kafka=...)")
            from ..formats.pipeline import read_pipeline

            self.spec = read_pipeline(pipeline, stage)
            self.settings.pop("query", None)
        self.query = config.NodeConfig(**{k: self.settings[k] for k in ("predicate", "query", "watermark_every")
                                          if k in self.settings}).parsed_query
        self.stateful = self.spec.plan.stateful if self.spec is not None else self.query.stateful
        self.gen: threading.Thread | None = None
        self.admitted = True  # a window query's truth table through Kafka was read once Nu had read every record
        self.expected: list = []
        self.late: list = []
        self.malformed: list = []
        if kafka:
            self.settings.update({"kafka_bootstrap": kafka, "topic_prefix": f"t{random.getrandbits(40):x}."})
            self.settings.update({k: v for k, v in extra.items() if k == "topic_prefix"})  # a test's own
            if self.spec is not None and not stage:  # the pipeline's own topics, under the trial's prefix
                copy = self.workdir / Path(pipeline).name
                copy.write_text(self.spec.text(self.settings["topic_prefix"]))
                self.spec = read_pipeline(copy)
                self.settings["pipeline"] = str(copy)
            elif self.spec is not None:
                self.settings.update(pipeline=pipeline, stage=stage)
        else:
            self._truth_in_process()
        self.result: dict = {"fault": f.name, "bsize": format_bsize(self.bsize), "codec": spec.codec,
                             "workdir": str(self.workdir), "topic_prefix": self.settings.get("topic_prefix", "")}
        self.ok = False

    def _truth_in_process(self) -> None:
        """The expected outputs of the built-in generator's load, known before the run."""
        settings, keys = self.settings, int(self.settings.get("keys", 0))
        if self.query.stateful:
            ticks = list(interleave(["I1", "I2"], self.total, self.seed, keys=keys))
            self.expected, self.late = window_expected(
                [p for _, _, p in ticks], self.query, every=_every(settings),
                streams=[st for st, _, _ in ticks] if _per_stream(settings) else None, idle=_idle(settings))
        else:
            self.expected = expected_outputs(["I1", "I2"], seed=self.seed, total=self.total,
                                             predicate=self.predicate,
                                             poison=str(settings.get("chaos_poison", "")).encode(), keys=keys)

    def start(self, topo: Topology) -> None:
        """The nodes started, then the load into Kafka (none: Nu's own generator)."""
        op, settings, asked = self.settings.get("operator", "python"), self.settings, self.asked
        self.say(f"starting Nu, N, N', Nd ({op} operator{': a Spark session takes 20-60 s' if op == 'spark' else ''})"
                 f" in {self.workdir}")
        topo.start_all()
        self.t_start = time.monotonic()
        partitions = int(settings.get("partitions", 1))
        if self.spec is not None and not self.fed:
            self.gen = _PipelineLoad(self.kafka, self.spec, settings["topic_prefix"], self.total, self.rate,
                                     self.seed, partitions, asked.bad_records)
        elif self.kafka and self.spec is None:  # a later stage's load is the view an earlier stage writes
            self.gen = _KafkaLoad(self.kafka, settings["topic_prefix"], self.total, self.rate, self.seed,
                                  asked.malformed_every, asked.param_change_at, partitions, asked.bad_records,
                                  keys=int(settings.get("keys", 0)))
        if self.gen is not None:
            self.gen.start()

    def reach_the_fault(self, topo: Topology) -> None:
        quiesce, kill_after = self.asked.quiesce, self.asked.kill_after
        self.say(f"nodes ready; load on; {self.f.name} in {kill_after:.1f} s")
        if quiesce:
            # Let the source finish and the backup drain: the figures then count the mechanism alone.
            wait_until(lambda: topo.status(NU)["source_exhausted"] and
                       topo.status(NU)["oqu_unbatched"] < (self.bsize or 10**12), self.timeout)
            time.sleep(0.3)
        else:
            time.sleep(max(0.0, kill_after - (time.monotonic() - self.t_start)))
        # Faults hit a running pipeline: a standby that has not heard from its primary yet takes it for
        # one that is only starting (heartbeat_grace), and a pause shorter than the grace then causes
        # no takeover; on a busy machine N' may register only a moment before the fault.
        wait_until(lambda: topo.status(N2).get("primary_heard") is not False, self.timeout, step=0.01)

    def inject(self, topo: Topology) -> None:
        self.before = {k: _status_or_none(topo, k) for k in (NU, N, N2, ND)}
        self.t_fault = time.time()
        events = inject(topo, self.f, self.timeout)
        self.say(f"{self.f.name} injected: " + ", ".join(f"{e['action']} {e['target']}" for e in events))
        if not (topo.alive(N) or topo.alive(N2)):
            # Both operators gone (faults composed at random): a new standby in N's place takes over.
            events.append({"at": time.time(), "target": "primary", "action": "start (repair)",
                           **_start(topo, N, Step("primary", Action.START))})
        self.result["fault_at"] = self.t_fault
        self.result["events"] = self.events = events

    def read_the_truth(self, topo: Topology) -> None:
        """Through Kafka, the truth from the source topics once the load is in (a window query's follows
        Nu's link log: read once Nu has admitted every source record; a Nu that never reads on leaves the
        run short of its load, stalled, whatever Nd holds)."""
        if not self.kafka:
            return
        assert self.gen is not None or self.fed
        if self.gen is not None:
            self.gen.join()
            if self.gen.error is not None:
                raise RuntimeError(f"the load generator stopped short: {self.gen.error!r}") from self.gen.error
        settings, kafka = self.settings, self.kafka
        sizes = dict(max_tuple_bytes=int(settings.get("max_tuple_bytes", 65536)),
                     partitions=int(settings.get("partitions", 1)))
        if self.stateful:
            self.admitted = wait_until(lambda: _admitted_all(topo), self.timeout, step=0.3)
        if self.spec is not None:
            from ..sources.kafka_source import Topics
            from . import pipeline_check

            truth = pipeline_check.expected(kafka, self.spec, Topics.of_pipeline(settings["topic_prefix"], self.spec),
                                            every=_every(settings), idle=_idle(settings),
                                            per_stream=_per_stream(settings), **sizes)
            self.expected, self.late, self.malformed = truth["results"], truth["late"], truth["malformed"]
        elif self.query.stateful:
            self.expected, self.late, self.malformed = kafka_window_expected(
                kafka, ["I1", "I2"], self.query, every=_every(settings), idle=_idle(settings),
                per_stream=_per_stream(settings), prefix=settings["topic_prefix"], **sizes)
        else:
            self.expected, self.malformed = kafka_expected(
                kafka, ["I1", "I2"], self.predicate, prefix=settings["topic_prefix"],
                poison=str(settings.get("chaos_poison", "")).encode(), **sizes)
        self.result["malformed"] = len(self.malformed)

    def settle(self, topo: Topology) -> None:
        """Every output delivered, the fault over, and (through Kafka) the dead letters and late data."""
        for e in self.events:
            if "started" in e:
                topo.wait_ready(e["started"])
        self.delivered = self.admitted and wait_until(
            _reporting(lambda: topo.status(ND)["delivered_through"], len(self.expected), self.say), self.timeout)
        self.took_over, self.settled = _fault_over(topo, self.f, self.timeout)
        if self.kafka:
            # Every record the truth table refuses is a dead letter, once (by key: a restarted Nu may
            # write one again), and nothing else is.
            prefix = self._topics().prefix
            letters = set(dead_letter_keys(self.kafka, prefix))
            self.result["dead_letters"] = len(letters)
            self.result["dead_letters_exact"] = letters == set(self.malformed)
            if self.stateful:  # the late ticks, in the late-data topic one for one (by key)
                self.result["late_letters_exact"] = set(dead_letter_keys(self.kafka, prefix, late=True)) == \
                    set(self.late)
        time.sleep(0.3)  # anything late (a fenced primary's frame) would show up now

    def judge(self, topo: Topology) -> None:
        """The results against the truth, the nodes' ends, and the failover's figures."""
        result, done = self.result, self.delivered and self.took_over and self.settled
        after = {k: topo.status(k) for k in topo.procs if topo.alive(k)}
        # Nodes that ended before the trial did, and how: -9 killed, 70 a node that failed (NodeBase.fail).
        result["exited"] = {k: p.returncode for k, p in topo.procs.items() if p.poll() is not None}
        result["restarted"] = list(topo.supervisor_restarts)  # ended itself, started again (supervise)
        result["settled"] = self.settled
        check_ok = self._check(self._rows(topo), after)
        result["completed"] = done
        result["delivered_all"] = self.delivered
        result["took_over"] = self.took_over
        result.update(_failover_figures(topo, self.before, after, self.t_fault))
        self.ok = (done and check_ok and _forged_refused(result, self.f, self.events) and _loops_failed(self.events)
                   and result.get("dead_letters_exact", True))

    def _topics(self):
        """The Kafka topics the nodes use (sources.kafka_source.Topics): a stage's under its part of the prefix."""
        from ..sources.kafka_source import Topics

        prefix = self.settings["topic_prefix"]
        return Topics.of_pipeline(prefix, self.spec) if self.spec is not None else Topics(prefix)

    def _rows(self, topo: Topology) -> list:
        if self.kafka:
            return read_results(self.kafka, self._topics().results)
        return read_output_file(topo.sink)

    def _check(self, rows: list, after: dict) -> bool:
        if self.spec is None and not self.query.stateful:
            check = compare(self.expected, [(o, s, q) for o, s, q, _ in rows], per_stream_only=bool(self.kafka))
            self.result.update(check.as_dict())
            return check.ok
        if self.spec is not None:
            from . import pipeline_check

            verdict = pipeline_check.compare(self.spec, {"results": self.expected}, rows)
        else:
            # Window results are named by window and keys.
            verdict = compare_results(self.expected, [(o, p) for o, _, _, p in rows],
                                      aggregates=len(self.query.aggregates))
        # Nu's late inputs are counted against the truth's (late: its count, or the late (stream, seq) it
        # expects from Kafka); a selection has none. Nu counts what it dropped; a Nu started again counts
        # again from its restored position.
        nu_after = after.get(NU, {}).get("counters", {})
        verdict["late"] = len(self.late)
        nu_restarted = any(e.get("target") == "upstream" for e in self.events)
        verdict["late_exact"] = self.result.get("late_letters_exact", True) and (
            nu_restarted or not self.stateful or nu_after.get("late_tuples", 0) == len(self.late))
        self.result.update(verdict)
        return verdict["ok"] and verdict["late_exact"]


class _PipelineLoad(threading.Thread):
    """A pipeline's load written into its source topics during a trial (sources/pipeline_load.py)."""

    def __init__(self, bootstrap: str, spec, prefix: str, total: int, rate: float, seed: int, partitions: int,
                 bad_records: list[bytes | None] | None) -> None:
        super().__init__(daemon=True)
        self.args = (bootstrap, spec, prefix, total, rate, seed, partitions, bad_records)
        self.error: BaseException | None = None

    def run(self) -> None:
        from ..sources.kafka_source import Topics
        from ..sources.pipeline_load import write_load

        bootstrap, spec, prefix, total, rate, seed, partitions, bad = self.args
        topics = Topics.of_pipeline(prefix, spec)
        try:
            write_load(bootstrap, spec, total, rate=rate, seed=seed, topics=topics, partitions=partitions,
                       bad_records=bad)
        except BaseException as e:
            self.error = e
            raise


# Records no table's format admits, whatever its columns (a pipeline run's --bad-records): not UTF-8,
# empty, cut short, over max_tuple_bytes, and a null value (a tombstone).
PIPELINE_BAD_RECORDS = (b"\xff\xfe not utf-8", b"", b'{"cut short', b"x" * 70_000, None)


def pipeline_load_defaults(stages: tuple, operator: str = "python") -> dict[str, Any]:
    """A pipeline run's default load (`stages`: formats/pipeline.read_stages): enough records for its
    windows to close. The Nexmark generator spaces its events 0.1 ms apart in event time (10,000 a
    second), drawn records and ticks about 2.5 ms, so a window query gets records for three windows and
    its delay (at least 40,000); a pipeline of several stages for three of each window stage's in turn,
    since each stage's windows close only as the event time reaches it through the stages before. A
    large load runs at 40,000 records a second on the Python operator, 20,000 on Spark's (what its
    micro-batches keep up with on two cores beside the other nodes: a takeover then finds no backlog of
    seconds), divided by the stages (each runs four nodes of its own on the same cores). Of a view read by
    several stages, the longest path of windows from the first stage counts, not their sum."""
    from ..sources.pipeline_load import is_nexmark

    per_ms = 10.0 if any(is_nexmark(t) for t in stages[0].sources) else 0.4
    span: dict[str, int] = {}  # a view's event-time span to close its windows and those before it
    longest = 0
    for p in stages:
        w = p.plan.spec
        ms = span.get(p.sources[0].table, 0) + (w.size_ms + w.lateness_ms if w is not None else 0)
        span[p.sink_name] = ms
        longest = max(longest, ms)
    total = max(40_000, int(3 * longest * per_ms))
    rate = 40_000.0 if total > 100_000 and operator == "python" else 20_000.0
    return {"total": total, "rate": rate / len(stages)}


def _admitted_all(topo: Topology) -> bool:
    """Nu's consumer stands at the end of every source topic and its link order has stopped growing (the
    lag is measured apart from the admission: the last poll may still be on its way into the link log)."""
    def look() -> tuple[bool, int]:
        try:
            s = topo.status(NU)
        except Exception:  # noqa: BLE001 - a Nu being restarted answers nothing yet
            return False, -1
        return nu_read_all(s), int(s.get("head", -1))

    caught_up, head = look()
    if not caught_up:
        return False
    time.sleep(0.3)
    again, head_after = look()
    return again and head_after == head


def _every(settings: dict) -> int:
    return int(settings.get("watermark_every", config.NodeConfig.watermark_every))


def _idle(settings: dict) -> int:
    return int(settings.get("watermark_idle", config.NodeConfig.watermark_idle))


def _per_stream(settings: dict) -> bool:
    return config.NodeConfig(operator=settings.get("operator", "python")).watermark_per_stream


def _fault_over(topo: Topology, f: Fault, timeout: float) -> tuple[bool, bool]:
    """Whether the fault has run its course: (the takeover it must cause is live, the supervisor's part is
    done). A takeover is over when the new primary says it is live (a pause shorter than the detector's
    timeout would deliver everything with no takeover: not the fault asked for). Under a supervisor, a node
    the fault fenced has exited, been started again and rejoined, so the summary says whether the pipeline
    has a standby again."""
    took_over = wait_until(lambda: _live_primary(topo) is not None, timeout) if f.takes_over else True
    settled = wait_until(lambda: _settled(topo), timeout) if topo.supervise else True
    return took_over, settled


def _failover_figures(topo: Topology, before: dict, after: dict, t_fault: float) -> dict:
    """What a trial's summary says of its failover, from the nodes' status before the fault and after."""
    live = _live_primary(topo, after)
    rec = (after[live].get("recovery") or {}) if live else {}
    nd = after.get(ND, {})
    out = {"before": {k: _brief(v) for k, v in before.items()}, "after": {k: _brief(v) for k, v in after.items()},
           "recovery": rec, "failovers": len(nd.get("takeovers") or []),
           # Takeovers Nd declined (its primary still delivered): none after a crash, unless Nd handled a
           # frame the dead primary sent within takeover_lease of the standby's suspicion.
           "takeovers_declined": sum(v.get("counters", {}).get("takeovers_declined", 0)
                                     for k, v in after.items() if k not in (NU, ND)),
           # What a working primary's lease must outlast (a standby cut off from it is declined while it holds).
           "primary_longest_silence_ms": nd.get("primary_longest_silence_ms", 0.0),
           "takeover_lease_ms": nd.get("takeover_lease_ms", 0.0)}
    if rec.get("live_at"):
        out["recovery_ms"] = (rec["live_at"] - t_fault) * 1000
    out["standby_cpu_ratio"] = standby_cpu_ratio(before.get(N) or {}, before.get(N2) or {})
    # What the standby predicted just before the fault (core.recovery_model), to weigh against the above.
    predicted = (before.get(N2) or {}).get("predicted_recovery") or {}
    out["predicted_recovery"] = predicted
    if predicted.get("seconds") is not None:
        out["predicted_recovery_ms"] = predicted["seconds"] * 1000
    return out


def standby_cpu_ratio(primary: dict, standby: dict) -> float | None:
    """The standby's CPU over the primary's, each since its first input arrived (their status at the same
    moment; None when either has not had one)."""
    def spent(s: dict) -> float | None:
        at = s.get("cpu_seconds_at_first_input")
        return None if at is None or s.get("cpu_seconds") is None else s["cpu_seconds"] - at
    p, s = spent(primary), spent(standby)
    return round(s / p, 4) if p and s is not None else None


def _forged_refused(result: dict, f: Fault, events: list[dict]) -> bool:
    """A call from a client that is no node must change nothing: refused, and, when the fault is forged
    calls alone, no failover follows (composed with a real fault they still must be refused). Sets
    `forged_refused` in `result`."""
    forged = [e for e in events if e["action"] in FORGED]
    result["forged_refused"] = all(e["answer"] not in ("OK", "APPLIED") for e in forged)
    only_forged = len(forged) == len(f.steps)
    return not forged or (result["forged_refused"] and (result["failovers"] == 0 or not only_forged))


def _loops_failed(events: list[dict]) -> bool:
    """A node whose loop died exited EXIT_FAILED, as its supervisor expects (not 1, not still running)."""
    return all(e["exit_code"] == EXIT_FAILED for e in events if e["action"] == Action.LOOP_DIES)


def _reporting(held: Callable[[], int], want: int, say: Callable[[str], None], every: float = 5.0):
    """A wait condition (Nd holds `want` outputs) that reports progress every `every` seconds."""
    last = [time.monotonic()]

    def cond() -> bool:
        got = held()
        if time.monotonic() - last[0] >= every:
            last[0] = time.monotonic()
            say(f"Nd holds {got:,} of {want:,} expected outputs")
        return got >= want

    return cond


def _live_primary(topo: Topology, statuses: dict[str, dict] | None = None) -> str | None:
    """The operator place whose node took over most recently and is live, if any."""
    best, at = None, 0.0
    for key in OPERATORS:
        if not topo.alive(key):
            continue
        s = statuses[key] if statuses is not None else topo.status(key)
        live_at = (s.get("recovery") or {}).get("live_at") or 0.0
        if s.get("role") == "primary" and live_at > at:
            best, at = key, live_at
    return best


def _settled(topo: Topology) -> bool:
    """No operator node is fenced, behind Nd's epoch, or waiting to be started again; and once the supervisor
    started one again, Nu backs up to a standby in sync (the pipeline has its standby back), unless the
    primary is the only operator node left: a node the supervisor started again after a takeover the load
    caused (a saturated machine's) may be the one that takes over when the fault then kills the other, and
    nothing starts a killed node again. A node that does not answer (starting again, or still paused) raises
    PeerError: wait_until's "not yet"."""
    epoch = topo.status(ND)["epoch"]
    alive = [key for key in OPERATORS if topo.alive(key)]
    for key in OPERATORS:
        if topo.waiting_restart(key):
            return False
    for key in alive:
        s = topo.status(key)
        if s.get("role") == "fenced" or s.get("epoch", 0) < epoch:
            return False
    return not topo.supervisor_restarts or len(alive) < 2 or standby_back(topo.status(NU))


def _status_or_none(topo: Topology, key: str, exit_wait_s: float = EXIT_WAIT_S) -> dict:
    """A node's status, or {} while its supervisor starts it again (a node a stage's load fenced, while
    the fault hits another stage; harness/stages.py). A supervised node that is alive and does not answer
    may be on its way out: a fenced node stops serving before its process ends (a Spark session's stop
    takes seconds), and the supervisor sees only the end. It is asked again until it answers or has
    ended, within `exit_wait_s`; a node still silent then, or one no supervisor starts again, raises
    PeerError."""
    deadline = time.monotonic() + exit_wait_s
    while True:
        try:
            return topo.status(key)
        except PeerError:
            if topo.supervise and (topo.waiting_restart(key) or key in topo.supervisor_restarts):
                return {}
            if not topo.supervise or not topo.alive(key) or time.monotonic() >= deadline:
                raise
        time.sleep(0.1)


def _brief(s: dict) -> dict:
    keys = ("role", "pipeline_stage", "epoch", "head", "trimmed_through", "oqu_depth", "oqu_unbatched",
            "received_through", "processed", "level0", "level1", "oq_depth", "delivered_through", "overhead",
            "compression_ratio", "counters", "errors", "operator_switches", "peers", "standby", "standby_in_sync",
            "primary_longest_silence_ms", "takeover_lease_ms", "takeovers", "state_keys", "state_bytes",
            "state_lag_tuples", "predicted_recovery", "snapshot", "cpu_seconds", "cpu_seconds_at_first_input",
            "bsize", "recovery_target", "push_cost", "standby_link_cost")
    out = {k: s[k] for k in keys if k in s}
    if "quarantined" in s:
        out["quarantined"] = [q["pos"] for q in s["quarantined"]]
    return out


def _quarantined(r: dict) -> dict[str, list[int]]:
    """Per operator place, the input positions its node quarantined (its latest status: after the trial,
    else at the fault)."""
    out = {}
    for key in OPERATORS:
        s = r.get("after", {}).get(key) or r.get("before", {}).get(key) or {}
        if s.get("quarantined"):
            out[key] = s["quarantined"]
    return out


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


# The node settings `launch` and `failover-check` take, as flags or LS_* env vars, and pass on to every node.
NODE_SETTINGS = ("bsize", "codec", "operator", "predicate", "query", "pipeline", "watermark_every", "keys", "seed",
                 "total",
                 "rate",
                 "heartbeat_interval", "heartbeat_misses", "operator_stall_max", "exit_when_fenced",
                 "handover_on_stop", "chaos_poison", "recovery_target_ms", "standby_replay_max_ms", "standby_state",
                 "snapshot_interval")


class NodeStartError(RuntimeError):
    """A node process exited while starting; the message is the last line it wrote (its error)."""


def kafka_reachable(bootstrap: str, timeout: float = 5.0) -> None:
    """Raise SettingError unless some broker of `bootstrap` (host:port,...) accepts a connection."""
    errors = []
    for server in filter(None, bootstrap.split(",")):
        host, _, port = server.strip().rpartition(":")
        try:
            socket.create_connection((host or "localhost", int(port)), timeout=timeout).close()
            return
        except (OSError, ValueError) as e:
            errors.append(f"{server}: {e}")
    raise config.SettingError(f"kafka_bootstrap (KAFKA_BOOTSTRAP, LS_KAFKA_BOOTSTRAP): no broker reachable within "
                              f"{timeout:g} s ({'; '.join(errors) or 'empty'})")


def _args(cmd: str, argv: list[str]) -> tuple[argparse.Namespace, dict[str, Any]]:
    """Flags and env vars, each honoured or refused (SettingError): (the command's own options, typed node
    settings). Precedence: flag, then LS_* env var, then this command's default."""
    args = _parser(cmd).parse_args(argv)
    if cmd == "run":
        args.pipeline = args.pipeline_file
    if args.pipeline:
        args.kafka = True  # a pipeline's tables are Kafka topics
    _check_options(cmd, args)
    given = [f"--{n.replace('_', '-')}={getattr(args, n)}" for n in NODE_SETTINGS if getattr(args, n) is not None]
    staged = stages.count(args.pipeline)
    # Every value validated, flags and env alike, as the first stage's node takes them.
    cfg = config.load(given + stages.first_stage_args(args.pipeline), env=os.environ)
    explicit = {n for n in NODE_SETTINGS if getattr(args, n) is not None or f"LS_{n.upper()}" in os.environ}
    settings = {n: getattr(cfg, n) for n in NODE_SETTINGS}
    # These commands supervise their nodes (Topology.supervise), as the compose stack does: a fenced node
    # exits, is started again, and rejoins as the standby.
    defaults = {"total": 40_000, "rate": 20_000.0, "exit_when_fenced": True}
    if cfg.pipeline_spec is not None:
        defaults.update(pipeline_load_defaults(config.pipeline_stages(args.pipeline), cfg.operator))
    if cfg.operator == "spark":
        defaults.update(SPARK_DETECTOR)
    settings.update({k: v for k, v in defaults.items() if k not in explicit})
    fault = stages.staged(args.fault, staged)[0] if args.fault and staged > 1 else FAULTS.get(args.fault)
    if args.fault and "@" in args.fault and staged < 2:
        raise config.SettingError(f"fault (--fault): {args.fault!r}: @STAGE names a stage of a pipeline of several "
                                  f"(CREATE VIEW ...)")
    if fault is not None and (why := fault.unfit_for(settings["operator"])):
        raise config.SettingError(f"fault (--fault): {why} (--operator spark or LS_OPERATOR=spark)")
    if settings["rate"] <= 0 or settings["total"] <= 0:
        raise config.SettingError(f"total and rate (--total, --rate): expected numbers > 0 for a run with a fault, "
                                  f"got {settings['total']} and {settings['rate']}")
    return args, settings


def _parser(cmd: str) -> argparse.ArgumentParser:
    ap = config.OneLineParser(prog=f"lazystandby {cmd}", description="the pipeline on loopback processes, "
                              "with a fault injected; JSON summary as the last line")
    for name in NODE_SETTINGS:
        ap.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None,
                        help=f"node setting {name} (env LS_{name.upper()})")
    if cmd == "run":
        ap.add_argument("pipeline_file", metavar="PIPELINE.sql", help="the pipeline file (examples/*.sql)")
    ap.add_argument("--fault", default="" if cmd == "run" else "kill-primary",
                    help=f"one of {', '.join(sorted(FAULTS))}; of a pipeline of several stages NAME@K, or NAME@K+L "
                         f"for stages hit at once (NAME alone: stage 1)" +
                         ("; given, the run checks itself as launch does (a local broker unless KAFKA_BOOTSTRAP is "
                          "set)" if cmd == "run" else ""))
    ap.add_argument("--kafka", action="store_true",
                    help="source and results through Kafka (KAFKA_BOOTSTRAP, or a local broker started here)")
    ap.add_argument("--insecure", action="store_true",
                    help="run the nodes plaintext: any local client can then call them (each node warns); by "
                         "default they run mutual TLS with a CA made for this run alone")
    ap.add_argument("--bad-records", choices=("none", "some", "all"), default="some",
                    help="with --kafka, bad source records among the ticks: some (one every 997 ticks, five kinds), "
                         "all (one of each kind real producers send by mistake, a 5 MB record and an int64 "
                         "overflow among them), none")
    ap.add_argument("--link", default="", help="run each node in a network namespace of its own behind a shaped "
                    "link: 1gbit, 100mbit, 10mbit or RATE[:DELAY_MS] (root and iproute2; the generator's pipeline)")
    if cmd == "failover-check":
        ap.add_argument("--kills", type=int, default=20, help="trials, each with its own kill (default 20)")
    return ap


def _check_options(cmd: str, args: argparse.Namespace) -> None:
    """The command's own options, each honoured or refused (SettingError), before any node setting."""
    if args.fault and args.fault.partition("@")[0] not in FAULTS:
        raise config.SettingError(f"fault (--fault): expected one of {', '.join(sorted(FAULTS))}, got {args.fault!r}")
    if args.bad_records == "all" and not args.kafka:
        raise config.SettingError("bad records (--bad-records all): needs --kafka (bad records come through the "
                                  "source topics)")
    if args.link:
        parse_link(args.link)  # refused here, with the forms it takes, before any node starts
        if args.kafka:
            raise config.SettingError("link (--link): shaped links run the generator's pipeline, not --kafka or "
                                      "--pipeline")
    if cmd == "failover-check" and args.kills < 1:
        raise config.SettingError(f"kills (--kills): expected a whole number >= 1, got {args.kills}")


def main(argv: list[str]) -> int:
    """`launch` and `failover-check`. SIGTERM stops the whole topology, as Ctrl-C does: the context managers
    stop every node, and no process the command started outlives it."""
    with no_process_left():
        return _main(argv)


def _main(argv: list[str]) -> int:
    cmd = argv[0]
    broker = None
    try:
        args, settings = _args(cmd, argv[1:])
        bootstrap = ""
        if args.kafka:
            bootstrap = config.kafka_bootstrap_from_env()
            if bootstrap:
                kafka_reachable(bootstrap)
            elif cmd == "run" and not args.fault:
                raise config.SettingError("kafka_bootstrap (KAFKA_BOOTSTRAP, LS_KAFKA_BOOTSTRAP): the cluster to run "
                                          "against; or --fault NAME for a run that checks itself on a local broker")
            else:
                from .kafka_broker import LocalKafka

                print("starting a local Kafka broker ...", file=sys.stderr, flush=True)
                broker = LocalKafka(run_dir() / "demo-kafka").start()
                bootstrap = broker.bootstrap
        if cmd == "run" and not args.fault:
            return _run_until_stopped(args, settings, bootstrap)
        return (_failover_check if cmd == "failover-check" else _launch)(args, settings, bootstrap)
    except config.SettingError as e:
        print(f"lazystandby {cmd}: {e}", file=sys.stderr)
        return 2
    except NodeStartError as e:
        print(f"lazystandby {cmd}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"lazystandby {cmd}: stopped; every node of the topology was stopped", file=sys.stderr)
        return 130
    finally:
        if broker is not None:
            broker.stop()


def _trial_spec(settings: dict[str, Any]) -> TrialSpec:
    """The trial typed node settings describe (what runs and its load; the fault is the caller's)."""
    return TrialSpec(bsize=settings["bsize"], codec=str(settings["codec"]), total=settings["total"],
                     rate=settings["rate"], predicate=settings["predicate"], seed=settings["seed"],
                     pipeline=settings.get("pipeline", ""),
                     extra={k: settings[k] for k in ("operator", "heartbeat_interval", "heartbeat_misses",
                                                     "operator_stall_max", "exit_when_fenced", "handover_on_stop",
                                                     "chaos_poison", "query", "watermark_every", "keys",
                                                     "recovery_target_ms", "standby_replay_max_ms", "standby_state",
                                                     "snapshot_interval")
                            if k not in ("chaos_poison", "query", "recovery_target_ms", "standby_replay_max_ms")
                            or settings.get(k)})


def _standby_target(r: dict) -> dict:
    """The standby's recovery_target status at the fault ({} without one)."""
    return (r.get("before", {}).get(N2) or {}).get("recovery_target") or {}


def _what_ran(args, settings: dict[str, Any], bootstrap: str) -> dict[str, Any]:
    from ..formats.pipeline import query_text

    return {"bsize": format_bsize(settings["bsize"]), "codec": str(settings["codec"]),
            "operator": settings["operator"], "kafka": bool(bootstrap), "predicate": settings["predicate"],
            "query": (query_text(config.pipeline_stages(settings["pipeline"]))
                      if settings.get("pipeline") else
                      config.NodeConfig(query=settings.get("query", ""),
                                        predicate=settings["predicate"]).parsed_query.text()),
            "pipeline": settings.get("pipeline") or None,
            "seed": settings["seed"], "keys": settings["keys"], "heartbeat_interval": settings["heartbeat_interval"],
            "heartbeat_misses": settings["heartbeat_misses"], "exit_when_fenced": settings["exit_when_fenced"],
            "handover_on_stop": settings["handover_on_stop"], "standby_state": settings["standby_state"],
            "fault": args.fault, "tls": not args.insecure,
            "link": None}


def _launch(args, settings: dict[str, Any], bootstrap: str) -> int:
    """The main job: one trial with the fault injected halfway through the load (the clock starts once
    every node, Spark included, is ready); its JSON summary is the last line printed."""
    print(f"launch: {args.fault} halfway through {settings['total']} tuples at {settings['rate']:g}/s "
          f"({settings['operator']} operator{', Kafka' if bootstrap else ''}) ...", file=sys.stderr, flush=True)
    bad = None
    if settings.get("pipeline") and args.bad_records != "none":
        bad = list(PIPELINE_BAD_RECORDS)  # what any table's format refuses
    elif args.bad_records == "all":
        bad = list(BAD_RECORDS.values())
    r = run_trial(_trial_spec(settings), fault=args.fault, kill_after=settings["total"] / settings["rate"] / 2,
                  kafka=bootstrap, bad_records=bad,
                  malformed_every=997 if bootstrap and args.bad_records == "some" and not settings.get("pipeline")
                  else 0, timeout=300.0, progress=_stderr_progress(), tls=not args.insecure, link=args.link)
    nu = r.get("after", {}).get(NU, {})
    summary = {
        "source_tuples": settings["total"], "expected_output": r["expected"], "output_tuples": r["got"],
        "lost": r["lost"], "duplicated": r["duplicated"], "out_of_order": r.get("out_of_order", 0),
        "wrong": r.get("wrong", 0), "late": r.get("late", 0),
        "failovers": r["failovers"], "takeovers_declined": r.get("takeovers_declined", 0),
        "primary_longest_silence_ms": r.get("primary_longest_silence_ms", 0.0),
        "takeover_lease_ms": r.get("takeover_lease_ms", 0.0),
        "failover_ms": round(r.get("recovery_ms", 0.0), 1),
        "standby_cpu_ratio": r.get("standby_cpu_ratio"),
        "predicted_recovery_ms": round(r["predicted_recovery_ms"], 1) if "predicted_recovery_ms" in r else None,
        # With recovery_target_ms: the Bsize Nu chose for it (in force at the fault: it is Nu's choice until
        # the standby takes over) and whether its prediction met the target.
        "recovery_target_ms": settings.get("recovery_target_ms") or None,
        "bsize_chosen": ((r.get("before", {}).get(NU) or {}).get("recovery_target") or {}).get("bsize"),
        "target_met": ((r.get("before", {}).get(NU) or {}).get("recovery_target") or {}).get("met"),
        "standby_replay_max_ms": settings.get("standby_replay_max_ms") or None,  # and Nu's waits for it:
        "source_waited_for_replay": (nu.get("counters") or {}).get("source_waited_for_replay", 0),
        # ... and what the standby chose for it: its standby_defer (warm) or its primary's snapshot_interval.
        "standby_defer_chosen": _standby_target(r).get("standby_defer"),
        "snapshot_interval_chosen": _standby_target(r).get("snapshot_interval"),
        # What made the standby take over: "detector" (missed heartbeats), "handover" (the primary, asked
        # to stop, said it was leaving), "" (no takeover).
        "failover_cause": r["recovery"].get("cause", ""),
        "detection_ms": round(r["recovery"].get("detection_ms", 0.0), 1),
        "reconnection_ms": round(r["recovery"].get("reconnection_ms", 0.0), 1),
        "data_recovery_ms": round(r["recovery"].get("data_recovery_ms", 0.0), 1),
        "replayed_from_oq": r["recovery"].get("replayed_from_oq", 0),
        "resent_by_nu": r["recovery"].get("resent_by_nu", 0),
        "backlog_at_takeover": r["recovery"].get("backlog_at_takeover", 0),
        "catch_up_ms": round(r["recovery"].get("catch_up_ms", 0.0), 1),
        "overhead": round(nu.get("overhead", 0.0), 4), "dead_letters": r.get("dead_letters", r.get("malformed", 0)),
        "bad_records": r.get("malformed", 0), "dead_letters_exact": r.get("dead_letters_exact", True),
        # Nodes that ended themselves (fenced, or their operator failed) and were started again; whether Nu
        # backs up to a standby at the end (nothing starts a killed node again: after kill-primary the
        # pipeline runs on without one).
        "restarted": r.get("restarted", []), "standby_at_end": standby_back(nu),
        "quarantined": _quarantined(r),
        **_what_ran(args, settings, bootstrap), "link": r.get("link"),
        # A pipeline of several stages: each stage's output, faults and failovers (harness/stages.py).
        "stages": r.get("stages"), "ok": r["ok"],
    }
    if not r["ok"]:
        print(f"trial failed; logs in {r['workdir']}; diff: {r.get('diff')}", file=sys.stderr)
    print(results.dumps("launch", summary))
    return 0 if r["ok"] else 1


def _run_until_stopped(args, settings: dict[str, Any], bootstrap: str) -> int:
    """`lazystandby run PIPELINE.sql` without a fault: Nu, N, N' and Nd on this machine against the cluster
    at `bootstrap`, reading the pipeline's source topics and writing its sink, until SIGINT or SIGTERM; a
    node that ends itself is started again (the supervisor), as the compose stack does."""
    specs = config.pipeline_stages(settings["pipeline"])
    node = {k: v for k, v in settings.items() if k not in ("total", "rate", "predicate", "query", "seed", "keys")}
    node["kafka_bootstrap"] = bootstrap
    workdir = Path(tempfile.mkdtemp(prefix="lazystandby-run-", dir=run_dir()))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with contextlib.ExitStack() as stack:
        topos = []
        for spec in specs:  # a stage each: its own Nu, N, N' and Nd, reading the view an earlier one writes
            here = workdir / f"stage{spec.stage}" if len(specs) > 1 else workdir
            here.mkdir(exist_ok=True)
            topo = stack.enter_context(Topology({**node, "stage": spec.stage if len(specs) > 1 else 0}, here,
                                                tls_dir=here / "tls" if not args.insecure else None, supervise=True))
            topo.start_all()
            topos.append(topo)
            print(f"run: stage {spec.stage}/{spec.stages}: {spec.path} on {bootstrap}: "
                  f"{', '.join(t.topic for t in spec.sources)} -> "
                  f"{spec.sink_topic or settings.get('topic_prefix', 'ls.') + 'results'} ({settings['operator']} "
                  f"operator, Bsize {format_bsize(settings['bsize'])}); logs in {here}", file=sys.stderr, flush=True)
            # Where Prometheus scrapes this stage's nodes (each series labelled pipeline_stage with several).
            print(f"run: stage {spec.stage} metrics: " + ", ".join(
                f"{NAME[k]} 127.0.0.1:{port}" for k, port in topo.metrics_ports.items()), file=sys.stderr, flush=True)
        print("run: Ctrl-C stops", file=sys.stderr, flush=True)
        wait_for(stop, every_s=RUN_REPORT_S, tick=lambda: _report_stages(specs, topos))
    print("run: stopped; every node was stopped", file=sys.stderr)
    return 0


def _report_stages(specs, topos: list[Topology]) -> None:
    for spec, topo in zip(specs, topos, strict=True):
        nu, nd = topo.status(NU), topo.status(ND)
        admitted = nu.get("counters", {}).get("admitted_tuples", nu.get("head", 0))
        print(f"run: stage {spec.stage}: admitted {admitted}, delivered {nd.get('delivered_through', 0)}, "
              f"dead letters {nu.get('counters', {}).get('dead_letters', 0)}", file=sys.stderr, flush=True)


def _stderr_progress() -> Callable[[str], None]:
    t0 = time.monotonic()
    return lambda msg: print(f"[{time.monotonic() - t0:5.1f} s] {msg}", file=sys.stderr, flush=True)


def _failover_check(args, settings: dict[str, Any], bootstrap: str) -> int:
    rng = random.Random(settings["seed"])
    trials, rec, lost, dup, failed, logs = [], [], 0, 0, 0, []
    duration = settings["total"] / settings["rate"]
    staged = stages.count(settings.get("pipeline"))
    for i in range(args.kills):
        kill_after = rng.uniform(0.2 * duration, 0.8 * duration)
        # A pipeline of several stages: each trial's fault hits a stage drawn at random, unless it names one.
        fault = f"{args.fault}@{rng.randint(1, staged)}" if staged > 1 and "@" not in args.fault else args.fault
        r = run_trial(_trial_spec(settings), fault=fault, kill_after=kill_after, kafka=bootstrap, timeout=120.0,
                      tls=not args.insecure, link=args.link, seed=settings["seed"] + i)
        lost += r["lost"]
        dup += r["duplicated"]
        if "recovery_ms" in r:
            rec.append(r["recovery_ms"])
        if not r["ok"]:
            failed += 1
            logs.extend(r.get("workdirs") or [r["workdir"]])  # a pipeline of several stages: each stage's
        trials.append(r)
        rc = r.get("recovery") or {}
        print(f"trial {i + 1}/{args.kills}: {fault} at {kill_after:.2f}s lost={r['lost']} dup={r['duplicated']} "
              f"recovery_ms={r.get('recovery_ms', float('nan')):.0f} (detection {rc.get('detection_ms', 0):.0f}, "
              f"data {rc.get('data_recovery_ms', 0):.0f}, catch-up {rc.get('catch_up_ms', 0):.0f}; "
              f"backlog {rc.get('backlog_at_takeover', 0)}, resent {rc.get('resent_by_nu', 0)}) ok={r['ok']}",
              file=sys.stderr, flush=True)
    summary = {
        "trials": args.kills, "lost": lost, "duplicated": dup, "failed_trials": failed,
        "wrong": sum(t.get("wrong", 0) for t in trials),
        "recovery_ms_p50": round(_pct(rec, 50), 1), "recovery_ms_p95": round(_pct(rec, 95), 1),
        "recovery_ms_max": round(max(rec), 1) if rec else 0.0,
        "detection_ms_p50": round(_pct([t["recovery"].get("detection_ms", 0) for t in trials], 50), 1),
        "takeovers_declined": sum(t.get("takeovers_declined", 0) for t in trials),
        "handovers": sum((t.get("recovery") or {}).get("cause") == "handover" for t in trials),
        # Trials whose standby heard the leaving primary's notice (Handover) and beat at once.
        "handover_notices": sum(any(s.get("counters", {}).get("handover_notices") for s in t.get("after", {}).values())
                                for t in trials),
        **_what_ran(args, settings, bootstrap), "link": trials[-1].get("link") if trials else None,
        "failed_workdirs": logs,
    }
    print(results.dumps("failover-check", summary))
    return 0 if not failed and lost == 0 and dup == 0 else 1
