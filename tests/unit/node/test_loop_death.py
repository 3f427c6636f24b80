"""A loop that ends by an exception fails its node: NOT_SERVING at once, and the process asked to exit
EXIT_FAILED (cli.run_node waits on `halt`). The real processes: tests/integration/test_loop_death.py."""

from __future__ import annotations

import threading

from lazystandby.config import NodeConfig
from lazystandby.core.errors import LoopTold
from lazystandby.harness.wait import wait_until
from lazystandby.node.common import EXIT_FAILED
from lazystandby.node.downstream import DownstreamNode
from lazystandby.sinks.base import MemorySink
from lazystandby.transport.grpc_transport import RoleHealth


def node() -> DownstreamNode:
    return DownstreamNode(NodeConfig(role="downstream", listen="nd"), MemorySink())


def test_a_loop_that_raises_fails_its_node_and_its_health_says_not_serving():
    from grpc_health.v1 import health_pb2

    d = node()
    turns = []

    def loop():
        turns.append(1)
        if len(turns) == 3:
            raise OSError("disk gone")
        d.sleep(0.01)

    health = RoleHealth(d)
    request = health_pb2.HealthCheckRequest(service="")
    assert health.Check(request, None).status == health_pb2.HealthCheckResponse.SERVING
    d.spawn("flush", loop)
    assert wait_until(d.halt.is_set, 2)
    assert d.exit_code == EXIT_FAILED and d.fatal.startswith("loop flush died (OSError: disk gone)")
    assert d.counters["loop_crashes"] == 1 and not d.serving()
    assert health.Check(request, None).status == health_pb2.HealthCheckResponse.NOT_SERVING
    d.stop()


def test_a_loop_told_to_die_raises_at_its_next_turn_and_a_stopping_node_does_not_fail():
    d = node()
    d.MAIN_LOOP = "main"
    d.spawn("main", lambda: d.sleep(0.01))
    d.die_in_loop()  # what SIGUSR1 does
    assert wait_until(d.halt.is_set, 2) and "LoopTold" in d.fatal

    quiet = node()
    started = threading.Event()

    def until_stop():
        started.set()
        quiet.sleep(0.01)
        if quiet.stopped:
            raise LoopTold("a resource closed under the loop as the node stops")

    quiet.spawn("work", until_stop)
    started.wait(2)
    quiet.stop()
    assert not quiet.halt.is_set() and not quiet.fatal  # a loop ending with the node is no failure
