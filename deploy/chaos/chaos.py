"""Chaos against the compose stack, with the docker SDK. Faults are data, from the one catalog the process
launcher reads too (services/lazystandby/harness/faults.py): each names its target role, what is done to
it, and the behaviour expected. After each fault the generator is let finish, the pipeline drains,
and the truth-table check runs inside the stack's network. One JSON line per fault:
{"fault", "lost", "duplicated", "recovery_ms", ...}. When a fault's run fails, the logs of every container
are kept in run/chaos-logs/<fault>/<service>.log.

    python deploy/chaos/chaos.py kill-primary        (make chaos FAULT=kill-primary; FAULT=all for every one)
    python deploy/chaos/chaos.py shape 10mbit        (make shape LINK=10mbit: the running stack's node links)

LS_LINK (a preset of harness/links.py, or RATE[:DELAY_MS]) shapes the nodes' links for each fault, as
`lazystandby launch --link` does for processes.

A pipeline of several stages (LS_PIPELINE=examples/nexmark-q5.sql) runs each stage on nodes of its own
(harness/compose_stages.py: stage K's services are sK-nu, sK-n, ...). Faults are then named by stage, as
`launch` names them: `kill-primary@2`, `kill-primary@1+2` (every step at both stages at once); a name
without `@` hits stage 1. After the fault each stage is checked in order against the truth of what it
read (the stage before it's view), and the fault is exact when every stage is. `all` runs the catalog's
faults at the stages in turn (the first at stage 1, the next at stage 2, ...) and then kill-primary at
every stage at once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import docker

from lazystandby.config import NodeConfig
from lazystandby.core.errors import LinkError, SettingError
from lazystandby.harness import compose_stages, results
from lazystandby.harness.compose_stages import service
from lazystandby.harness.faults import Action, Fault, Runner, Step, for_runner, standby_back
from lazystandby.harness.links import parse_link, shape_device
from lazystandby.harness.operator_procs import hang, kill_all, no_process_left
from lazystandby.harness.stages import staged

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "lazystandby"
LOGS = ROOT / "run" / "chaos-logs"


# The spare standbys a stage's service pair is followed by, in the order they are started (START, and
# kill-primary-repeatedly after each takeover).
SPARES = ("n-standby-2", "n-standby-3")

FAULTS = for_runner(Runner.CONTAINERS)
# The service the stack starts in each role; a fault's roles are the nodes in them when it begins (`casts_at`).
SERVICE_OF_ROLE = {"upstream": "nu", "primary": "n", "standby": "n-standby", "downstream": "nd"}
PORT = 50051  # every node's, in its own container: its address is <service>:PORT

NETWORK = "pipeline"  # docker-compose.yml's network; compose names it <project>_pipeline
# How long a node's start may take: the stack's own start (`compose up --wait`) is allowed as long, and a
# node of the Spark operator spends most of it starting its Spark session and query.
START_TIMEOUT_S = 300
OPERATOR_SERVICES = ("n", "n-standby", "n-standby-2", "n-standby-3")
RATE = "4000"

# Set for every compose call of the fault under way: a shared stack gives each fault topics of its own.
FAULT_ENV: dict[str, str] = {}


def stages() -> int:
    """How many stages the stack's pipeline runs (1: the tick example or a pipeline of one)."""
    return compose_stages.stage_count({**os.environ, **FAULT_ENV})


@lru_cache
def files(count: int) -> tuple[str, ...]:
    """The compose -f flags of a stack of `count` stages (its override written once per run)."""
    return tuple(compose_stages.write(count))


def services() -> list[str]:
    """What a fault starts before its load: the broker, every stage's nodes, Prometheus."""
    return ["kafka", *compose_stages.services(stages()), "prometheus"]


def node_services() -> tuple[str, ...]:
    """What a fault on a shared stack starts afresh (every stage's nodes, spares included, and the
    generator); the broker, Prometheus, the Spark cluster and the TLS material stay up from one fault to
    the next."""
    return (*compose_stages.services(stages(), compose_stages.NODES), "generator")


def operator_services() -> list[str]:
    return compose_stages.services(stages(), OPERATOR_SERVICES)


def load(fault: Fault) -> tuple[int, float]:
    """The records a fault's generator writes and their rate a second: the fault's load at RATE; for a
    pipeline of several stages the load `lazystandby run` gives it (enough event time for each window
    stage's windows to close in turn, at a rate split over the stages' nodes). LS_GEN_TOTAL and
    LS_GEN_RATE override both."""
    if stages() < 2:
        return fault.load, float(RATE)
    from lazystandby.config import pipeline_stages
    from lazystandby.harness.launcher import pipeline_load_defaults

    d = pipeline_load_defaults(pipeline_stages(str(compose_stages.host_pipeline({**os.environ, **FAULT_ENV}))),
                               os.environ.get("LS_OPERATOR", "spark"))
    return max(fault.load, d["total"]), d["rate"]


def compose(*args: str, check: bool = True, total: int = 40_000, rate: float = float(RATE)
            ) -> subprocess.CompletedProcess:
    # A finite load for each fault (the compose default is a long one); the environment may override it.
    # The operator is the stack's own (compose's LS_OPERATOR, spark by default), unless the caller sets it.
    env = {"LS_GEN_TOTAL": str(total), "LS_GEN_RATE": f"{rate:g}",
           "COMPOSE_PROFILES": "spares", **os.environ, **FAULT_ENV}
    out = subprocess.run(["docker", "compose", "-p", PROJECT, *files(stages()), *args], check=False,
                         capture_output=True, text=True, env=env)
    if check and out.returncode != 0:
        # Compose says why on stderr (a container unhealthy, a port taken, an image missing): the fault's
        # result carries its last lines, not just the exit status.
        raise RuntimeError(f"docker compose {' '.join(args[:2])} exited {out.returncode}: "
                           f"{out.stderr.strip()[-400:]}")
    return out


def topic_prefix() -> str:
    return FAULT_ENV.get("LS_TOPIC_PREFIX") or os.environ.get("LS_TOPIC_PREFIX", "ls.")


def container(client: docker.DockerClient, service: str):
    found = client.containers.list(all=True, filters={"label": [f"com.docker.compose.project={PROJECT}",
                                                                 f"com.docker.compose.service={service}"]})
    if not found:
        raise RuntimeError(f"no container for service {service}; is the stack up (make up)?")
    return found[0]


NODE_NAMES = {"N": "n", "N'": "n-standby", "N2": "n-standby-2", "N3": "n-standby-3", "Nd": "nd", "Nu": "nu"}


def stack_check(k: int = 1) -> dict:
    """Stage `k`'s truth-table check (the stack's only one for 1 without a pipeline of several) and its
    nodes' status, named N, N', N2, N3, Nd and Nu."""
    nodes = ",".join(f"{name}={service(s, k)}:{PORT}" for name, s in NODE_NAMES.items())
    stage = ["-e", f"LS_STAGE={k}"] if stages() > 1 else []
    out = compose("run", "--rm", "--no-deps", *stage, "--entrypoint", "python", "generator", "-m", "lazystandby.cli",
                  "stack-check", "--prefix", topic_prefix(), "--status", nodes, check=False)
    if out.returncode != 0:
        # A check can fail while the stack is still settling (a broker busy, a node restarting): try again.
        return {"got": 0, "expected": 0, "check_error": out.stderr.strip().splitlines()[-3:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def statuses(*names: str) -> dict[str, dict]:
    """The status of each node service of `names`, read from inside the network (through Nd, which no fault
    here kills) in one call: each read is a `compose exec` of 1-3 s."""
    out = compose("exec", "-T", "nd", "python", "-m", "lazystandby.cli", "stack-check", "--status-only",
                  "--status", ",".join(f"{n}={n}:{PORT}" for n in names), check=False)
    if out.returncode != 0:
        return {n: {"error": out.stderr.strip()[-300:]} for n in names}
    return json.loads(out.stdout.strip().splitlines()[-1])["nodes"]


def node_status(service: str) -> dict:
    """Status of one node (`statuses`)."""
    return statuses(service)[service]


def wait_for(what: str, cond, timeout: float = 90.0, every: float = 0.5) -> dict:
    deadline = time.monotonic() + timeout
    last: dict = {}
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(every)
    raise TimeoutError(f"timed out waiting for {what}")


def live_primary(s: dict) -> bool:
    """A node's status says it took over and went live."""
    return s.get("role") == "primary" and bool((s.get("recovery") or {}).get("live_at"))


def took_over(service: str) -> dict:
    s = node_status(service)
    return s if live_primary(s) else {}


def seeded(spare: str, k: int = 1) -> dict:
    if node_status(service("nu", k)).get("standby") != f"{spare}:{PORT}":
        return {}
    s = node_status(spare)
    return s if s.get("role") == "standby" and s.get("received_through", 0) > 0 else {}


class Cast(NamedTuple):
    """Who is in each role of a stage as a fault begins (role -> service), and the epoch then in force."""
    services: dict[str, str]
    epoch: int = 1


def static_cast(k: int = 1) -> Cast:
    """Stage `k`'s roles as the stack starts them."""
    return Cast({role: service(s, k) for role, s in SERVICE_OF_ROLE.items()})


def host(address: str) -> str:
    return address.rsplit(":", 1)[0]


def settled(k: int) -> dict:
    """Stage `k`'s Nu status once it pushes to a primary and backs up to a standby in sync, and the two
    nodes say so themselves, in Nu's epoch, the primary's operator answering; {} before. Nu hears of a
    takeover only once the new primary announces it: a standby promoting, or a primary its standby is
    about to depose, reads as settled to Nu alone."""
    # One read of Nu and the stage's pair (before a fault only these serve): a pass costs one exec, and a
    # short load is still on when the fault comes.
    got = statuses(*(service(s, k) for s in ("nu", "n", "n-standby")))
    nu = got[service("nu", k)]
    if not (nu.get("primary") and standby_back(nu)):
        return {}
    p, sb = got.get(host(nu["primary"]), {}), got.get(host(nu["standby"]), {})
    ok = (p.get("role") == "primary" and not p.get("operator_stalled") and sb.get("role") == "standby"
          and p.get("epoch") == sb.get("epoch") == nu.get("epoch"))
    return nu if ok else {}


def casts_at(at: tuple[int, ...], timeout: float = START_TIMEOUT_S) -> dict[int, Cast]:
    """The cast of each stage of `at` as its Nu has it, once every one of them has a primary and a standby
    in sync, read in one pass (a stage read settled while another is waited for may fail over meanwhile).

    A fault's role names the node in that role when the fault begins, not the service the stack started in
    it: a primary starved of CPU before the fault may have failed over, and its node, started again by
    compose, rejoin as the standby. The wait lets such a node finish rejoining (a start's bound: a Spark
    node spends most of it starting its session), so every fault begins from a primary and a standby."""
    def every_stage() -> dict[int, Cast]:
        casts = {}
        for k in at:
            nu = settled(k)
            if not nu:
                return {}
            casts[k] = Cast({**static_cast(k).services, "primary": host(nu["primary"]),
                             "standby": host(nu["standby"])}, int(nu.get("epoch", 1)))
        return casts

    where = "Nu" if at == (1,) else " and ".join(f"stage {k}'s Nu" for k in at)
    return wait_for(f"{where} to push to a primary and back up to a standby", every_stage, timeout, 1.0)


def kill_repeatedly(client: docker.DockerClient, t_first: float, k: int = 1, cast: Cast | None = None) -> list[dict]:
    """Kill the primary, let the standby take over, start the next spare standby, wait until Nu backs up
    to it; again, until the spares are spent (one round more than there are spares). Returns per round:
    the epoch reached and kill -> new primary live."""
    cast = cast or static_cast(k)
    victim, successor = cast.services["primary"], cast.services["standby"]
    rounds: list[dict] = []
    for spare in (*(service(s, k) for s in SPARES), None):
        t0 = time.time() if rounds else t_first
        container(client, victim).kill()
        s = wait_for(f"{successor} to take over from {victim}", lambda succ=successor: took_over(succ))
        rounds.append({"killed": victim, "primary": successor, "epoch": s.get("epoch"),
                       "recovery_ms": round((s["recovery"]["live_at"] - t0) * 1000, 1)})
        if spare:
            compose("up", "-d", "--wait", "--wait-timeout", "120", "--no-deps", spare)
            # Seeded: Nu backs up to it and it holds tuples past the trim point (it started empty).
            wait_for(f"Nu to back up to {spare}", lambda sp=spare: seeded(sp, k))
            victim, successor = successor, spare
    return rounds


def collect_logs(client: docker.DockerClient, fault: str) -> Path:
    where = LOGS / fault
    where.mkdir(parents=True, exist_ok=True)
    for c in client.containers.list(all=True, filters={"label": f"com.docker.compose.project={PROJECT}"}):
        service = c.labels.get("com.docker.compose.service", c.name)
        try:
            (where / f"{service}.log").write_bytes(c.logs(timestamps=True))
        except docker.errors.APIError as e:
            (where / f"{service}.log").write_text(f"logs unavailable: {e}\n")
    return where


STARTED = time.monotonic()


def say(msg: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.1f} s] {msg}", file=sys.stderr, flush=True)


def start_spare(client: docker.DockerClient, k: int = 1) -> str:
    """A new, empty standby in a place whose node was killed: the first spare not running yet. It registers
    with Nu and learns the primary from it, as the process runner's START does."""
    for spare in (service(s, k) for s in SPARES):
        try:
            running = container(client, spare).status == "running"
        except RuntimeError:
            running = False
        if not running:
            compose("up", "-d", "--no-deps", spare)
            return spare
    raise RuntimeError("every spare standby is running already")


def lasting(step: Step) -> float:
    """How long a pause, a partition or a hang lasts: its duration, or 5 s (a duration of 0), well past the
    detector's timeout; a hang, past the stack's operator_stall_max (LS_OPERATOR_STALL_MAX) as well."""
    if step.duration:
        return step.duration
    return 5.0 + (float(os.environ.get("LS_OPERATOR_STALL_MAX", NodeConfig.operator_stall_max))
                  if step.action is Action.HANG else 0.0)


class LinkCutUnavailable(RuntimeError):
    """A single link cannot be cut on this Docker host."""


# The peer address each cut's rules name, by (container, peer): a heal deletes exactly the rules its cut
# inserted, though the peer may be gone by then (killed during the cut: no address of its own any more).
_CUT_ADDRESS: dict[tuple[str, str], str] = {}


def _firewall(c, peer, cut: bool) -> None:
    """Drop (or stop dropping) every packet between containers `c` and `peer`, both ways, with iptables
    run in `c`'s network namespace from the host: the node image carries no firewall, and needs none.
    TCP retransmits what was dropped, so at the heal what was sent meanwhile arrives late, as through the
    process runner's relay."""
    missing = [t for t in ("nsenter", "iptables") if shutil.which(t) is None]
    if missing or os.geteuid() != 0:
        raise LinkCutUnavailable(
            f"cutting one link between containers needs root and nsenter and iptables on the Docker host "
            f"(Linux; Debian's docker.io brings iptables){': missing ' + ', '.join(missing) if missing else ''}; "
            f"isolate-primary and isolate-standby need neither")
    for x in (c, peer):
        x.reload()
    now = (peer.attrs["NetworkSettings"]["Networks"].get(f"{PROJECT}_{NETWORK}") or {}).get("IPAddress", "")
    if cut:
        ip = _CUT_ADDRESS[(c.name, peer.name)] = now
    else:
        ip = _CUT_ADDRESS.pop((c.name, peer.name), now)
    ns = ["nsenter", "-t", str(c.attrs["State"]["Pid"]), "-n", "iptables", "-w", "-I" if cut else "-D"]
    for rule in (["INPUT", "-s", ip, "-j", "DROP"], ["OUTPUT", "-d", ip, "-j", "DROP"]):
        done = subprocess.run(ns + rule, capture_output=True, text=True)
        if done.returncode != 0:
            raise LinkCutUnavailable(f"iptables in {c.name}'s network namespace failed: {done.stderr.strip()}")


SHAPED_SERVICES = ("nu", *OPERATOR_SERVICES, "nd")  # a stage's nodes: their links carry what a failover moves


def shape(client: docker.DockerClient, spec: str) -> dict:
    """Shape the egress of every running node container to the link `spec` (a preset or RATE[:DELAY_MS]),
    with tc run in the container's network namespace from the host (the node image has no tc and no
    NET_ADMIN, and needs neither). Each link between two nodes then carries the rate both ways, as
    `launch --link` shapes each node's own interface. A container started later (a restart, a spare) is
    not shaped. Returns what was shaped."""
    preset = parse_link(spec)
    missing = [t for t in ("nsenter", "tc") if shutil.which(t) is None]
    if missing or os.geteuid() != 0:
        raise LinkError(f"shaping the stack's links needs root and nsenter and tc on the Docker host "
                        f"(iproute2){': missing ' + ', '.join(missing) if missing else ''}")
    shaped, delay = [], []
    for svc in compose_stages.services(stages(), SHAPED_SERVICES):
        try:
            c = container(client, svc)
        except RuntimeError:
            continue  # a spare not started
        c.reload()
        if c.status != "running":
            continue
        tc = ["nsenter", "-t", str(c.attrs["State"]["Pid"]), "-n", "tc"]
        delay.append(shape_device(tc, "eth0", preset))
        shown = subprocess.run([*tc, "qdisc", "show", "dev", "eth0"], capture_output=True, text=True).stdout
        if "tbf" not in shown:
            raise LinkError(f"{svc}: eth0 shows no rate after shaping: {shown.strip()!r}")
        shaped.append(svc)
    if not shaped:
        raise LinkError("no node container is running to shape (make up first)")
    return {"preset": preset.name, "rate_bps": preset.rate_bps, "delay_ms": preset.delay_ms,
            "delay_applied": all(delay), "services": shaped}


def cut(step: Step, client: docker.DockerClient, c, cast: Cast, heal: bool = False) -> None:
    """Cut (or heal) the links of `step`: every link of the target ("*": off the network and back under
    its service name, as a real host goes away), or the one link to `step.peer` (a firewall rule)."""
    if step.peer == "*":
        net = client.networks.get(f"{PROJECT}_{NETWORK}")
        if heal:
            net.connect(c, aliases=[cast.services[step.target]])
        else:
            net.disconnect(c)
    else:
        _firewall(c, container(client, cast.services[step.peer]), cut=not heal)


FREEZE_TRIES = 5


def pause(c) -> None:
    """docker pause, tried again when the cgroup freezer gives up (runc's "unable to freeze": a task of the
    container does not stop in time, as a busy JVM's can on two loaded cores); any other error, or the
    last try's, is raised."""
    for attempt in range(FREEZE_TRIES):
        try:
            c.pause()
            return
        except docker.errors.APIError as e:
            if "unable to freeze" not in str(e) or attempt == FREEZE_TRIES - 1:
                raise
            time.sleep(0.2)


def apply(step: Step, client: docker.DockerClient, t_first: float, k: int = 1, cast: Cast | None = None) -> dict:
    """One step of a fault on its container at stage `k`, whose roles are `cast`'s (the stack's own when
    None); what it did, for the fault's report."""
    cast = cast or static_cast(k)
    if step.action is Action.KILL_REPEATEDLY:
        return {"rounds": kill_repeatedly(client, t_first, k, cast)}
    if step.action is Action.START:
        return {"started": start_spare(client, k)}
    c = container(client, cast.services[step.target])
    if step.action is Action.KILL:
        c.kill()
    elif step.action is Action.STOP:
        t0 = time.monotonic()
        c.stop(timeout=30)  # SIGTERM, then SIGKILL past 30 s: a primary hands over first
        c.reload()
        return {"exit_code": c.attrs["State"]["ExitCode"], "stopped_ms": round((time.monotonic() - t0) * 1000, 1)}
    elif step.action is Action.PAUSE:
        pause(c)
        time.sleep(lasting(step))
        c.unpause()
    elif step.action is Action.PARTITION:
        cut(step, client, c, cast)
        time.sleep(lasting(step))
        cut(step, client, c, cast, heal=True)
    elif step.action in (Action.CUT, Action.HEAL):
        cut(step, client, c, cast, heal=step.action is Action.HEAL)
    elif step.action is Action.HANG:
        # The node's own processes (its Spark driver JVM and workers), by their host PIDs: root on the host.
        c.reload()
        return {"stopped": hang(c.attrs["State"]["Pid"], lasting(step))}
    elif step.action is Action.KILL_OPERATOR:
        c.reload()
        return {"killed": kill_all(c.attrs["State"]["Pid"])}
    else:
        assert step.action is Action.RESTART, step.action
        c.reload()
        if c.status == "running":  # a node killed by an earlier step is only started again
            c.kill()
        time.sleep(1)
        c.start()
        return {"healthy_after_s": healthy_again(c)}
    return {}


def healthy_again(c, timeout: float = START_TIMEOUT_S, every: float = 0.5) -> float:
    """Seconds from now until container `c`, just started, passes its health check (its node serves on its
    port). A restarted node's start is the stack's start for one node, and gets its bound: a Spark node
    on two loaded cores takes longer than a step's wait for Nu allows, and that wait then starts only
    once the node serves. TimeoutError past `timeout`; a container without a health check is not
    waited for."""
    t0 = time.monotonic()
    while True:
        c.reload()
        health = (c.attrs.get("State") or {}).get("Health")
        if health is None or health.get("Status") == "healthy":
            return round(time.monotonic() - t0, 1)
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"timed out waiting for {c.name} to pass its health check again "
                               f"({health.get('Status')} after {timeout:g} s)")
        time.sleep(every)


def inject(fault: Fault, client: docker.DockerClient, timeout: float = 90.0, k: int = 1,
           cast: Cast | None = None) -> tuple[float, list[dict]]:
    """`fault`'s steps in order at stage `k`, its roles `cast`'s (the stack's own when None), with their
    timings (as the process runner's `inject`): the time of the first step and one event per step."""
    cast = cast or static_cast(k)
    t_first, events = 0.0, []
    nu = service("nu", k)
    for step in fault.steps:
        if step.after == "takeover":
            wait_for("Nu to accept a takeover", lambda: bool(node_status(nu).get("takeovers")), timeout, 0.05)
        elif step.after == "standby":
            wait_for("Nu to back up to a standby again", lambda: standby_back(node_status(nu)), timeout, 0.1)
        if step.delay:
            time.sleep(step.delay)
        at = time.time()
        t_first = t_first or at
        out = apply(step, client, t_first, k, cast)
        events.append({"at": at, "target": step.target, "action": str(step.action), **({"stage": k} if k > 1 else {}),
                       **out})
        say(f"{fault.name}: {step.action} {cast.services[step.target]} done")
    return t_first, events


def inject_at(fault: Fault, client: docker.DockerClient, at: tuple[int, ...],
              casts: dict[int, Cast] | None = None) -> tuple[float, list[dict]]:
    """`fault` at each stage of `at` at once (a thread per stage: a pause or a partition lasts, and the
    stages' must overlap), each stage's roles its cast in `casts` (the stack's own where none): the first
    step's time and every stage's events in the order they happened."""
    casts = casts or {}
    if at == (1,):
        return inject(fault, client, cast=casts.get(1))
    with ThreadPoolExecutor(len(at)) as pool:
        done = list(pool.map(lambda k: inject(fault, client, k=k, cast=casts.get(k)), at))
    return min(t for t, _ in done), sorted((e for _, ev in done for e in ev), key=lambda e: e["at"])


def took_over_last(nodes: dict, t0: float) -> tuple[str | None, float | None]:
    """The node that took over last since the first step (by epoch; stack-check's name) and the time from
    the first step to its going live, or (None, None) when nobody did. A primary that went live before the
    fault began took over from a failure of its own, not the fault's."""
    live = [(s.get("epoch", 0), s["recovery"]["live_at"], name) for name, s in nodes.items()
            if isinstance(s, dict) and live_primary(s) and s["recovery"]["live_at"] >= t0]
    if not live:
        return None, None
    _, at, name = max(live)
    return name, round((at - t0) * 1000, 1)


def exact(result: dict) -> bool:
    """A stage's check found its results topic equal to its truth."""
    return (result.get("lost") == 0 and result.get("duplicated") == 0 and result.get("expected", 0) > 0
            and not result.get("wrong") and not result.get("unexpected") and result.get("admitted_all", True))


def check_stages(name: str, deadline: float) -> dict[int, dict]:
    """Each stage's check, in order, once its results topic holds what its truth expects (or at
    `deadline`): a stage's truth is what the stage before it delivered, complete only once that one is."""
    count, checks = stages(), {}
    for k in range(1, count + 1):
        where = f"stage {k}'s " if count > 1 else ""
        result: dict = {}
        while time.monotonic() < deadline:
            result = stack_check(k)
            say(f"{name}: {where}results topic holds {result['got']:,} of {result['expected']:,} expected outputs")
            if result["got"] >= result["expected"] > 0 and result.get("admitted_all", True):
                break
            time.sleep(3)
        checks[k] = result
    return checks


def load_done(gen, deadline: float, timeout: float, every: float = 2.0) -> None:
    """Wait until the generator `gen` has written its load and exited; TimeoutError at `deadline` (`timeout`
    after the last step or the load's planned end, whichever is later), naming the bound: a generator
    that cannot write its load at its rate leaves the stages' checks nothing complete to compare."""
    while True:
        gen.reload()
        if gen.status == "exited":
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"the generator was still writing its load {timeout:g} s after the fault's last "
                               f"step and the load's planned end (LS_GEN_TOTAL over LS_GEN_RATE)")
        time.sleep(every)


def _summed(checks: dict[int, dict], key: str):
    values = [r.get(key) for r in checks.values()]
    return None if any(v is None for v in values) else sum(values)


def run(fault: Fault, client: docker.DockerClient, timeout: float = 300.0, at: tuple[int, ...] = (1,),
        name: str = "") -> dict:
    """`fault` at the stages `at` (1: the stack's only one without a pipeline of several) under a load of
    its own; the stack's checks after it and the failover's figures (of the stage whose takeover came last)."""
    name = name or fault.name
    say(f"{name}: starting the stack (operator {os.environ.get('LS_OPERATOR', 'the compose default')})")
    total, rate = load(fault)
    compose("up", "-d", "--wait", "--wait-timeout", str(START_TIMEOUT_S), *services(), total=total, rate=rate)
    link = shape(client, os.environ["LS_LINK"]) if os.environ.get("LS_LINK") else None
    if link:
        say(f"{name}: links of {', '.join(link['services'])} shaped to {link['preset']}")
    compose("up", "-d", "generator", total=total, rate=rate)
    total, rate = int(os.environ.get("LS_GEN_TOTAL", total)), float(os.environ.get("LS_GEN_RATE", rate))
    load_end = time.monotonic() + total / rate  # when the generator has written its load, at its rate
    say(f"{name}: stack healthy; load of {total:,} records on")
    time.sleep(4)  # load on
    for k in at:
        if k > 1:  # a later stage's input starts when the stage before it delivers (a window's, when one closes)
            wait_for(f"stage {k}'s Nu to admit a record", lambda k=k: node_status(service("nu", k)).get("head", 0) > 0,
                     timeout=120.0)
            say(f"{name}: stage {k} at work")
    casts = casts_at(at)
    restarts_before = {svc: restarts(client, svc) for svc in operator_services()}
    say(f"{name}: " + "; ".join(f"{'stage ' + str(k) + ': ' if k > 1 else ''}primary {c.services['primary']}, "
                                f"standby {c.services['standby']}, epoch {c.epoch}" for k, c in casts.items()))
    t0, events = inject_at(fault, client, at, casts)
    rounds: list[dict] = [r for e in events if "rounds" in e for r in e["rounds"]]
    say(f"{name}: every step done; waiting for the load to finish")
    # `timeout` past the last step, or past the load's own end when that comes later (a fault that waited
    # for its cast to settle may come early in a long load).
    deadline = max(time.monotonic(), load_end) + timeout
    load_done(container(client, "generator"), deadline, timeout)
    checks = check_stages(name, deadline)
    took_at = {k: took_over_last(checks[k].get("nodes", {}), t0) for k in at}
    hit = max(at, key=lambda k: -1.0 if took_at[k][1] is None else took_at[k][1])
    result, last = checks[hit], checks[max(checks)]
    nu = result.get("nodes", {}).get("Nu", {}) or {}
    nodes = result.get("nodes", {})
    new_primary, took = took_at[hit]
    live = (nodes.get(new_primary) or {}) if new_primary else {}
    if rounds:
        took = max(r["recovery_ms"] for r in rounds)
    several = len(checks) > 1
    out = {"fault": name, "expect": fault.expect, "pipeline": os.environ.get("LS_PIPELINE") or None,
           # Summed over the stages; the outputs expected and got are the last stage's (the pipeline's).
           "lost": _summed(checks, "lost"), "duplicated": _summed(checks, "duplicated"),
           "expected": last.get("expected"), "got": last.get("got"),
           "recovery_ms": took, "new_primary": f"{new_primary}@{hit}" if several and new_primary else new_primary,
           "check_error": next((r["check_error"] for r in checks.values() if r.get("check_error")), None),
           # What made the last takeover: "detector" or "handover" (the launcher's key of the same name).
           "failover_cause": (live.get("recovery") or {}).get("cause", ""),
           # Handovers Nd took (a primary's last frame ended its lease): one per stopped primary.
           "leases_released": ((nodes.get("Nd") or {}).get("counters") or {}).get("lease_released", 0),
           # Notices a leaving primary sent that a standby heard and beat at once on (summed over the nodes).
           "handover_notices": sum((s.get("counters") or {}).get("handover_notices", 0)
                                   for s in nodes.values() if isinstance(s, dict)),
           # Nu's view of its standby: how often it fell out of sync (backup_stall_max), and whether it is now.
           "standby_out_of_sync": nu.get("counters", {}).get("standby_out_of_sync", 0),
           "standby_in_sync": nu.get("standby_in_sync"),
           "codec_backend": nu.get("codec_backend"),  # what compressed Nu's backup in its container
           # Each node's role at the end (a demoted primary that ran on, isolated, ends fenced).
           "roles": {node: s.get("role") for node, s in nodes.items() if isinstance(s, dict)},
           # Takeovers Nd declined while the primary still delivered (the launcher's key of the same name).
           "takeovers_declined": sum((s.get("counters") or {}).get("takeovers_declined", 0)
                                     for s in nodes.values() if isinstance(s, dict)),
           # How close a working primary came to losing its lease at Nd (the launcher's key of the same name).
           "primary_longest_silence_ms": (nodes.get("Nd") or {}).get("primary_longest_silence_ms"),
           "wrong": _summed(checks, "wrong") or 0,
           "link": link,
           "ok": all(exact(r) for r in checks.values())}
    if several:
        out["stages"] = [{"stage": k, **{key: r.get(key) for key in ("expected", "got", "lost", "duplicated", "wrong")},
                          "recovery_ms": took_at[k][1] if k in took_at else None} for k, r in checks.items()]
    if fault.takes_over:  # a pause shorter than the detector's timeout would pass without the fault asked for
        out["ok"] = out["ok"] and all(took_at[k][1] is not None for k in at)
    out["cast"] = [{"stage": k, "primary": c.services["primary"], "standby": c.services["standby"], "epoch": c.epoch}
                   for k, c in casts.items()]
    out["steps"] = [{"target": e["target"], "action": e["action"], "at_s": round(e["at"] - t0, 2),
                     **{k: e[k] for k in ("stage", "started", "stopped", "killed", "exit_code", "stopped_ms",
                                          "healthy_after_s") if k in e}}
                    for e in events]
    if rounds:
        out["rounds"] = rounds
        # Each round's takeover moves the epoch on by one from the one in force when the fault began.
        out["ok"] = out["ok"] and all(
            [r["epoch"] for r in e["rounds"]] == [casts[e.get("stage", 1)].epoch + i for i in range(1, len(SPARES) + 2)]
            for e in events if "rounds" in e)
    out.update(restarted_check(client, casts, restarts_before, deadline))
    out["ok"] = out["ok"] and all(r["rejoined"] for r in out.get("restarted", {}).values())
    return out


def restarted_check(client: docker.DockerClient, casts: dict[int, Cast], before: dict[str, int],
                    deadline: float) -> dict:
    """`restarted`: each operator node that ended on its own (exit 70: its operator failed; 75: fenced) and
    that compose started again (restart: on-failure), with whether it `rejoined`: as the standby Nu backs
    up to, or as the primary Nu pushes to when it took over since; not down, not fenced. One restarted
    before the fault and in its cast rejoined then (`settled` read it in its role), and is not waited for
    again: the fault may have killed it since, and a killed container stays down. {} when none was."""
    cast = {s for c in casts.values() for role, s in c.services.items() if role in ("primary", "standby")}
    out: dict[str, dict] = {}
    for svc in operator_services():
        n = restarts(client, svc)
        if not n:
            continue
        if n == before.get(svc) and svc in cast:
            out[svc] = {"restarts": n, "rejoined": True, "before_fault": True}
            continue
        seen = rejoined(svc, deadline)
        # Counted once it has rejoined: a node started again meanwhile shows as one more restart.
        out[svc] = {"restarts": restarts(client, svc), **seen}
    return {"restarted": out} if out else {}


def restarts(client: docker.DockerClient, svc: str) -> int:
    """How often docker started `svc`'s container again by its restart policy (0: never, or no such
    container: a spare not started)."""
    try:
        c = container(client, svc)
    except RuntimeError:
        return 0
    c.reload()
    return int(c.attrs.get("RestartCount", 0))


def rejoined(svc: str, deadline: float) -> dict:
    """Wait (until `deadline`) for a restarted operator node to be a standby Nu backs up to, in sync, or the
    primary Nu pushes to (it took over since), in the epoch in force (Nu's); its role, its epoch, whether
    Nu backs up to it and whether it `rejoined` so, as they are then.

    Each read is a `compose exec` of 1-3 s. Nu is read first, so the node, read second, has registered if
    Nu names it; and the two must agree on the epoch. Read the other way round, with no such check, a node
    still in the epoch it was started in (1) passes for rejoined while Nu backs up to it in epoch 2: the
    node was read before its registration reached Nu (with the load over, Nu has a new standby in sync at
    once), or a node started once more next to the registration of the one before."""
    def back() -> tuple[dict, bool]:
        nu = node_status(service("nu", compose_stages.stage_of(svc)))
        s = node_status(svc)
        seen = {"role": s.get("role"), "epoch": s.get("epoch"),
                "backed_up": standby_back(nu) and nu["standby"] == f"{svc}:{PORT}"}
        pushed_to = nu.get("primary") == f"{svc}:{PORT}"
        seen["rejoined"] = seen["epoch"] == nu.get("epoch") and (
            (seen["role"] == "standby" and seen["backed_up"]) or (seen["role"] == "primary" and pushed_to))
        return seen, seen["rejoined"]

    seen, done = back()
    while not done and time.monotonic() < deadline:
        time.sleep(2)
        seen, done = back()
    return seen


def _run_logged(name: str, client: docker.DockerClient) -> dict:
    """One fault on the stack as it is (`name`: of the catalog, at stages as `staged` reads them); every
    container's logs kept if it failed."""
    try:
        fault, at = staged(name, stages(), FAULTS)
        r = run(fault, client, at=at, name=name)
    except Exception as e:
        r = {"fault": name, "error": str(e)[:500], "ok": False}
    if not r["ok"]:
        r["logs"] = str(collect_logs(client, name))
    return results.declared("chaos", r)


def run_clean(name: str, client: docker.DockerClient) -> dict:
    """One fault on a fresh stack; always taken down, with every container's logs kept if it failed."""
    compose("down", "-v", "--remove-orphans", check=False)
    try:
        return _run_logged(name, client)
    finally:
        compose("down", "-v", "--remove-orphans", check=False)


def own_pipeline(prefix: str) -> Path | None:
    """A directory holding the stack's pipeline with every topic it names under `prefix` (the fault's own,
    as the engine's topics are), to be mounted as the containers' examples/; None for the tick example."""
    path = compose_stages.host_pipeline()
    if path is None:
        return None
    from lazystandby.formats.pipeline import file_text, read_stages

    out = ROOT / "run" / "chaos-pipelines" / prefix.rstrip(".")
    out.mkdir(parents=True, exist_ok=True)
    (out / path.name).write_text(file_text(read_stages(path), prefix))
    return out


def remove_other_stages(client: docker.DockerClient) -> None:
    """Remove the node containers of stages the stack's pipeline does not run (a fault before this one ran a
    pipeline of more stages on the shared stack)."""
    keep = set(node_services())
    for c in client.containers.list(all=True, filters={"label": f"com.docker.compose.project={PROJECT}"}):
        svc = c.labels.get("com.docker.compose.service", "")
        if compose_stages.stage_of(svc) > 1 and svc not in keep:
            c.remove(force=True)


def run_shared(name: str, client: docker.DockerClient, prefix: str) -> dict:
    """One fault on a stack shared with the faults before it: the broker, Prometheus, the Spark cluster and
    the TLS material are kept; every node and the generator are started afresh, over topics (and so a
    consumer group and a results topic) under `prefix`, which no fault before used. A fault that failed
    takes the whole stack down, so that the next one starts from nothing."""
    compose("kill", *node_services(), check=False)
    compose("rm", "-f", "-v", *node_services(), check=False)
    remove_other_stages(client)
    FAULT_ENV["LS_TOPIC_PREFIX"] = prefix
    if (own := own_pipeline(prefix)) is not None:  # a pipeline's source topics are its file's, not prefixed
        FAULT_ENV["LS_PIPELINE_DIR"] = str(own)
    try:
        r = _run_logged(name, client)
    finally:
        FAULT_ENV.pop("LS_TOPIC_PREFIX", None)
        FAULT_ENV.pop("LS_PIPELINE_DIR", None)
        compose("kill", *node_services(), check=False)
    if not r["ok"]:
        compose("down", "-v", "--remove-orphans", check=False)
    return r


def everything(count: int) -> list[str]:
    """FAULT=all: the catalog, at the stages in turn for a pipeline of `count` stages, then kill-primary at
    every stage at once."""
    if count <= 1:
        return list(FAULTS)
    return ([f"{n}@{i % count + 1}" for i, n in enumerate(FAULTS)]
            + [f"kill-primary@{'+'.join(str(k) for k in range(1, count + 1))}"])


def main(argv: list[str]) -> int:
    if argv and argv[0] == "shape":
        if len(argv) != 2:
            print("usage: chaos.py shape LINK (a preset: 1gbit, 100mbit, 10mbit; or RATE[:DELAY_MS])", file=sys.stderr)
            return 2
        try:
            print(json.dumps(shape(docker.from_env(), argv[1])))
        except (LinkError, SettingError, docker.errors.DockerException) as e:
            print(f"chaos shape: {e}", file=sys.stderr)
            return 3
        return 0
    try:
        count = stages()
        names = everything(count) if not argv or argv[0] == "all" else argv
        for n in names:
            staged(n, count, FAULTS)
    except SettingError as e:
        print(f"chaos: {e}", file=sys.stderr)
        return 2
    operator = os.environ.get("LS_OPERATOR", "spark")  # the compose file's default
    needs_spark = {n: why for n in names if (why := staged(n, count, FAULTS)[0].unfit_for(operator))}
    if needs_spark:
        if argv and argv[0] != "all":
            for why in needs_spark.values():
                print(f"{why} (LS_OPERATOR)", file=sys.stderr)
            return 2
        say(f"skipped with LS_OPERATOR={operator}: {', '.join(needs_spark)} (they need the Spark operator)")
        names = [n for n in names if n not in needs_spark]
    try:
        client = docker.from_env()
    except docker.errors.DockerException as e:
        print(f"chaos: no Docker engine answers ({e}); `make chaos` starts one (deploy/docker/engine.sh)",
              file=sys.stderr)
        return 3
    ok = True
    for name in names:
        r = run_clean(name, client)
        ok = ok and r["ok"]
        print(json.dumps(r), flush=True)  # run_clean checked its keys
    return 0 if ok else 1


if __name__ == "__main__":
    # SIGTERM or Ctrl-C: the fault under way takes its stack down on the way out (run_clean's finally).
    with no_process_left():
        try:
            sys.exit(main(sys.argv[1:]))
        except KeyboardInterrupt:
            print("chaos: stopped; the stack was taken down", file=sys.stderr)
            sys.exit(130)
