"""What every node runtime shares: role state, counters, status, background loops, wrong-role refusals."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

from ..config import NodeConfig
from ..core import messages as m
from ..core.roles import RoleState
from ..core.seq import WrongRole


class NodeBase:
    """Base of the three runtimes. Handlers for RPCs a role does not serve refuse with WrongRole."""

    def __init__(self, cfg: NodeConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.clock = clock
        self.log = logging.getLogger(f"lazystandby.{cfg.name}")
        self.state = RoleState(cfg.name)
        self.lock = threading.Condition()
        self.counters: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # --- lifecycle -------------------------------------------------------------------------------------
    def spawn(self, name: str, loop: Callable[[], None]) -> None:
        def run() -> None:
            try:
                while not self._stop.is_set():
                    loop()
            except Exception:
                self.log.exception("%s: loop %s died", self.name, name)
                self.counters["loop_crashes"] += 1
                raise

        t = threading.Thread(target=run, name=f"{self.name}:{name}", daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        with self.lock:
            self.lock.notify_all()
        for t in self._threads:
            t.join(timeout=5)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)

    # --- status ----------------------------------------------------------------------------------------
    def count_error(self, counter: str) -> None:
        self.errors[counter] += 1

    def snapshot(self) -> dict:
        """Counters and gauges of this node (subclasses add theirs)."""
        return {
            "node": self.name,
            "role": str(self.state.role),
            "epoch": self.state.epoch,
            "counters": dict(self.counters),
            "errors": dict(self.errors),
        }

    def handle_status(self, msg: None) -> m.StatusReply:
        with self.lock:
            snap = self.snapshot()
        return m.StatusReply(node=self.name, role=self.state.role, epoch=self.state.epoch, snapshot=snap)

    # --- refusals --------------------------------------------------------------------------------------
    def _wrong(self, rpc: str) -> WrongRole:
        return WrongRole(f"{self.name}: {rpc} is not served by a node in role {self.state.role}")

    def handle_push(self, msg: m.Frame) -> m.FrameAck:
        raise self._wrong("Push")

    def handle_backup(self, msg: m.BackupFrame) -> m.BackupAck:
        raise self._wrong("Backup")

    def handle_deliver(self, msg: m.OutputFrame) -> m.Level0Ack:
        raise self._wrong("Deliver")

    def handle_heartbeat(self, msg: m.HeartbeatRequest) -> m.HeartbeatReply:
        return m.HeartbeatReply(node=self.name, role=self.state.role, epoch=self.state.epoch)

    def handle_takeover(self, msg: m.TakeoverRequest) -> m.TakeoverReply:
        raise self._wrong("Takeover")

    def handle_register_standby(self, msg: m.RegisterStandby) -> m.RegisterStandbyReply:
        raise self._wrong("RegisterStandby")


class Backoff:
    """Exponential retry delay, reset on success."""

    def __init__(self, first: float = 0.01, most: float = 0.5) -> None:
        self.first, self.most, self.delay = first, most, first

    def next(self) -> float:
        d = self.delay
        self.delay = min(self.most, self.delay * 2)
        return d

    def reset(self) -> None:
        self.delay = self.first
