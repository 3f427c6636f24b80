"""Shaped links between the nodes of one topology: each place in a network namespace of its own, joined to a
bridge in the host's namespace by a veth pair, with the place's outgoing traffic held to the link's rate.

    host namespace:   bridge lsb<id> 10.R.S.254/24  (the harness reaches every node through it)
                        |            |            |            |
    namespaces:       nu .1        n .2         n2 .3        nd .4     each: veth "eth0" + lo, tbf at egress

Every byte a node sends leaves through its own shaped interface, so each link (Nu -> N', Nu -> N, N -> Nd)
is shaped at its sender, as a NIC or an uplink would be: the backup Nu ships to N', and what Nu resends at
a takeover, cross the link at its rate. A preset also names a one-way delay (netem); a kernel without the
netem qdisc (this machine's: `tc qdisc add ... netem` answers "Specified qdisc kind is unknown") gets the
rate alone, and `ShapedNetwork.delay_applied` says so.

Needs root (CAP_NET_ADMIN) and iproute2. The harness makes the network before it starts the nodes and
removes it after; one left by a harness killed with -9 is removed by the next one (`sweep`), since its
names carry the owner's pid.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from ..core.errors import LinkError, SettingError


@dataclass(frozen=True, slots=True)
class LinkPreset:
    """A link's rate (bits/s) and one-way delay (ms), as the paper's testbed links."""

    name: str
    rate_bps: int
    delay_ms: float

    @property
    def tc_rate(self) -> str:
        return f"{self.rate_bps // 1000}kbit"


PRESETS = {
    "1gbit": LinkPreset("1gbit", 1_000_000_000, 0.5),
    "100mbit": LinkPreset("100mbit", 100_000_000, 1.0),
    "10mbit": LinkPreset("10mbit", 10_000_000, 5.0),
}

_RATE = re.compile(r"^(\d+(?:\.\d+)?)(k|m|g)bit$")


def parse_link(spec: str) -> LinkPreset:
    """A preset's name, or RATE[:DELAY_MS] with RATE as tc writes it (`50mbit`, `800kbit:2`)."""
    if spec in PRESETS:
        return PRESETS[spec]
    rate, _, delay = spec.partition(":")
    m = _RATE.match(rate)
    try:
        delay_ms = float(delay) if delay else 0.0
    except ValueError:
        delay_ms = -1.0
    if m is None or delay_ms < 0:
        raise SettingError(f"link {spec!r}: expected one of {', '.join(PRESETS)} or RATE[:DELAY_MS] "
                          f"(e.g. 50mbit, 800kbit:2)")
    bps = int(float(m.group(1)) * {"k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)])
    if bps < 8_000:
        raise SettingError(f"link {spec!r}: a rate below 8kbit cannot carry a heartbeat in time")
    return LinkPreset(spec, bps, delay_ms)


def tbf_args(preset: LinkPreset, mtu: int = 1500) -> list[str]:
    """tc's token bucket for the link's rate: a bucket of at least a millisecond's bytes (and of two
    full frames, or tbf drops them), a queue of 50 ms at the rate before it drops."""
    burst = max(2 * mtu + 100, preset.rate_bps // 8 // 1000)
    limit = max(3 * burst, preset.rate_bps // 8 // 20)
    return ["tbf", "rate", preset.tc_rate, "burst", str(burst), "limit", str(limit)]


def netem_args(preset: LinkPreset) -> list[str]:
    return ["netem", "delay", f"{preset.delay_ms}ms"]


def shape_device(tc: list[str], dev: str, preset: LinkPreset) -> bool:
    """Shape `dev`'s egress to `preset`, with `tc` the command that reaches its namespace (`tc -n NS`,
    `nsenter -t PID -n tc`): the rate (tbf), under a delay (netem) where the kernel has netem. Replaces
    what `dev` had. Returns whether the delay was applied; raises LinkError when the rate cannot be."""
    _run(*tc, "qdisc", "del", "dev", dev, "root", check=False)  # none there yet: tc says so, and that is fine
    if preset.delay_ms > 0:
        netem = _run(*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", *netem_args(preset), check=False)
        if netem.returncode == 0:
            _run(*tc, "qdisc", "add", "dev", dev, "parent", "1:", "handle", "2:", *tbf_args(preset))
            return True
    _run(*tc, "qdisc", "add", "dev", dev, "root", *tbf_args(preset))
    return False


def available() -> str:
    """Why shaped links cannot be made here ("" when they can): root and iproute2 are needed."""
    if os.geteuid() != 0:
        return "shaped links need root (network namespaces, veth pairs and tc)"
    missing = [t for t in ("ip", "tc") if shutil.which(t) is None]
    return f"shaped links need iproute2 ({', '.join(missing)} not found)" if missing else ""


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(list(argv), capture_output=True, text=True)
    if check and out.returncode != 0:
        raise LinkError(f"{' '.join(argv)}: {out.stderr.strip() or out.stdout.strip()}")
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


NS_PREFIX = "lsl-"  # namespaces: lsl-<owner pid>-<id>-<place>


def sweep() -> list[str]:
    """Remove the namespaces and bridges of shaped networks whose owner process is gone; returns what went."""
    gone = []
    listed = _run("ip", "netns", "list", check=False).stdout.split("\n")
    ids = set()
    for line in listed:
        name = line.split(" ")[0]
        m = re.match(rf"^{NS_PREFIX}(\d+)-([0-9a-f]+)-", name)
        if m and not _alive(int(m.group(1))):
            _run("ip", "netns", "del", name, check=False)
            gone.append(name)
            ids.add(m.group(2))
    for i in ids:
        if shutil.which("iptables"):
            _run("iptables", "-D", "FORWARD", "-i", f"lsb{i}", "-o", f"lsb{i}", "-j", "ACCEPT", check=False)
        if _run("ip", "link", "del", f"lsb{i}", check=False).returncode == 0:
            gone.append(f"lsb{i}")
    return gone


@dataclass
class ShapedNetwork:
    """One topology's places behind shaped links (see the module's docstring). `up()` makes it, `down()`
    removes it (idempotent); as a context manager both."""

    places: tuple[str, ...]
    link: LinkPreset
    ident: str = field(default_factory=lambda: f"{random.SystemRandom().getrandbits(24):06x}")
    subnet: int = field(default_factory=lambda: random.SystemRandom().randrange(1, 255))  # 10.211.<subnet>.0/24
    delay_applied: bool = False
    made: list[str] = field(default_factory=list)

    def ns(self, place: str) -> str:
        return f"{NS_PREFIX}{os.getpid()}-{self.ident}-{place}"

    @property
    def bridge(self) -> str:
        return f"lsb{self.ident}"

    @property
    def gateway(self) -> str:
        return f"10.211.{self.subnet}.254"

    def address(self, place: str) -> str:
        """The place's IP address, which every other place and the harness reach it at."""
        return f"10.211.{self.subnet}.{self.places.index(place) + 1}"

    def wrap(self, place: str, argv: list[str]) -> list[str]:
        """A command line run inside the place's namespace (ip execs it: the pid is the command's)."""
        return ["ip", "netns", "exec", self.ns(place), *argv]

    def up(self) -> ShapedNetwork:
        why = available()
        if why:
            raise LinkError(why)
        sweep()
        taken = _run("ip", "-4", "-o", "addr", "show", check=False).stdout
        while f"10.211.{self.subnet}." in taken:  # another topology's network on this host
            self.subnet = random.SystemRandom().randrange(1, 255)
        try:
            self._make()
        except Exception:
            self.down()
            raise
        return self

    def _make(self) -> None:
        br = self.bridge
        _run("ip", "link", "add", br, "type", "bridge")
        self.made.append(br)
        # With br_netfilter loaded, frames bridged between places pass the host's FORWARD chain, whose policy
        # Docker sets to DROP (and the bridge's own nf_call_iptables 0 does not override the host's 1):
        # accepted there, as Docker accepts its own bridge's, and the rule goes with the bridge.
        if shutil.which("iptables"):
            _run("iptables", "-I", "FORWARD", "1", *self._forward_rule())
            self.made.append("iptables")
        _run("ip", "addr", "add", f"{self.gateway}/24", "dev", br)
        _run("ip", "link", "set", br, "up")
        for k, place in enumerate(self.places):
            ns, host_end = self.ns(place), f"lsv{self.ident}{k}"
            _run("ip", "netns", "add", ns)
            self.made.append(ns)
            _run("ip", "link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _run("ip", "link", "set", host_end, "master", br, "up")
            _run("ip", "-n", ns, "addr", "add", f"{self.address(place)}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            self._shape(ns)

    def _forward_rule(self) -> list[str]:
        return ["-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT"]

    def _shape(self, ns: str) -> None:
        """The rate at the place's egress; the delay under it where the kernel has netem."""
        self.delay_applied = shape_device(["tc", "-n", ns], "eth0", self.link)

    def down(self) -> None:
        """Remove every namespace (its veth goes with it) and the bridge."""
        for name in reversed(self.made):
            if name == "iptables":
                _run("iptables", "-D", "FORWARD", *self._forward_rule(), check=False)
            elif name == self.bridge:
                _run("ip", "link", "del", name, check=False)
            else:
                _run("ip", "netns", "del", name, check=False)
        self.made.clear()

    def describe(self) -> dict:
        """What a run's JSON says about its links."""
        return {"link": self.link.name, "rate_bps": self.link.rate_bps, "delay_ms": self.link.delay_ms,
                "delay_applied": self.delay_applied}

    def __enter__(self) -> ShapedNetwork:
        return self.up()

    def __exit__(self, *exc) -> None:
        with contextlib.suppress(Exception):
            self.down()
