"""`python -m lazystandby.cli node ...` runs one node; `... launch ...` runs a local topology."""

from __future__ import annotations

import faulthandler
import logging
import signal
import sys
import threading
from collections.abc import Callable
from functools import partial

from . import config
from .allocator import keep_freed_memory
from .core.seq import StreamRegistry
from .halting import wait_for
from .node.downstream import DownstreamNode
from .node.operator_node import OperatorNode
from .node.upstream import UpstreamNode
from .operators.base import Operator
from .sinks.base import FileSink, MemorySink
from .sources.base import GeneratorSource
from .transport.grpc_transport import GrpcPeer, Listener
from .transport.tls import TlsFiles


def make_operator(cfg: config.NodeConfig) -> Operator:
    if cfg.pipeline_spec is not None:
        from .operators.sql import SqlSelect, SqlWindow

        plan = cfg.pipeline_spec.plan
        if cfg.operator == "spark":
            from .operators.spark_sql import SparkSqlSelect, SparkSqlWindow  # imported lazily: Spark is heavy

            return SparkSqlWindow(plan, cfg) if plan.stateful else SparkSqlSelect(plan, cfg)
        return SqlWindow(plan) if plan.stateful else SqlSelect(plan)
    query = cfg.parsed_query
    if query.stateful and cfg.operator == "spark":
        from .operators.spark_window import SparkWindow  # imported lazily: Spark is heavy

        return SparkWindow(query, cfg)
    if query.stateful:
        from .operators.window import WindowAggregate

        return WindowAggregate(query)
    if cfg.operator == "python":
        from .operators.selection import Selection

        return Selection(query.where or "true", poison=cfg.chaos_poison.encode())
    if cfg.operator == "spark":
        from .operators.spark import SparkSelection  # imported lazily: Spark is heavy

        return SparkSelection(query.where or "true", cfg)
    raise ValueError(f"unknown operator {cfg.operator!r}; expected python or spark")


def build_node(cfg: config.NodeConfig, peers=GrpcPeer):
    kafka = cfg.kafka_bootstrap
    if kafka:
        from .sources.kafka_source import Topics

        topics = Topics.of(cfg)
    if cfg.role == "upstream":
        if kafka:
            from .sources.kafka_source import KafkaDeadLetters, KafkaSource

            source = KafkaSource(kafka, cfg.source_streams, topics=topics, partitions=cfg.partitions,
                                 replication_factor=cfg.replication_factor)
            return UpstreamNode(cfg, source, peers,
                                dead_letters=KafkaDeadLetters(kafka, topics, origin=source.origin),
                                late_data=KafkaDeadLetters(kafka, topics, origin=source.origin, topic=topics.late))
        source = GeneratorSource(cfg.stream_names, seed=cfg.seed, total=cfg.total, rate=cfg.rate, keys=cfg.keys)
        return UpstreamNode(cfg, source, peers)
    if cfg.role == "downstream":
        registry = StreamRegistry(cfg.stream_names)
        if kafka:
            from .sinks.kafka_sink import KafkaSink

            spec = cfg.pipeline_spec
            # A window result is keyed by its group where its columns name one, else by its position.
            group = spec.plan.key_names if spec is not None and spec.plan.names_groups else ()
            return DownstreamNode(cfg, KafkaSink(kafka, registry, topics, replication_factor=cfg.replication_factor,
                                                 group_keys=group))
        return DownstreamNode(cfg, FileSink(cfg.sink, registry) if cfg.sink else MemorySink())
    if kafka:  # quarantined inputs (node/quarantine.py) go to the pipeline's dead-letter topic
        from .sources.kafka_source import KafkaDeadLetters

        return OperatorNode(cfg, make_operator(cfg), peers, dead_letters=KafkaDeadLetters(kafka, topics))
    return OperatorNode(cfg, make_operator(cfg), peers)


def keep_memory(cfg: config.NodeConfig, log: logging.Logger) -> bool:
    """Apply malloc_keep_mb to this process; a C library that does not take it is logged, not fatal."""
    if not cfg.malloc_keep_mb:
        return False
    if keep_freed_memory(cfg.malloc_keep_mb):
        return True
    log.info("%s: the C library did not take malloc_keep_mb=%d (no mallopt, or it refused): its own "
             "thresholds apply", cfg.name, cfg.malloc_keep_mb)
    return False


def run_node(argv: list[str]) -> int:
    try:
        cfg = config.load(argv)
        TlsFiles.from_config(cfg)
    except ValueError as e:  # SettingError, or TLS files that are not there: one line, exit 2
        print(f"lazystandby node: {e}", file=sys.stderr, flush=True)
        return 2
    logging.basicConfig(level=cfg.log_level, format=f"%(asctime)s {cfg.name} %(levelname)s %(message)s")
    # SIGQUIT: every thread's stack to the process's stderr (the node's log), and the node runs on, as a JVM's
    # thread dump. Written from the signal handler in C, so it answers even when no Python thread can run.
    # To file descriptor 2 itself: sys.stderr may be a stream without one (a test's capture).
    faulthandler.register(signal.SIGQUIT, file=sys.__stderr__, all_threads=True)
    tls = TlsFiles.from_config(cfg)
    log = logging.getLogger("lazystandby")
    keep_memory(cfg, log)
    if tls is None:
        log.warning("%s: TLS is off: any client that can reach %s can call this node; run plaintext only on "
                    "loopback or in tests (set tls_ca, tls_cert, tls_key; make certs)", cfg.name, cfg.listen)
    try:
        # The port first: building the node may start a Spark session, whose sockets would be free to take it.
        listener = Listener(cfg.listen, max_message=cfg.max_message_bytes, tls=tls)
    except OSError as e:
        print(f"lazystandby node: {e}", file=sys.stderr, flush=True)
        return 1  # not a setting's fault: the port may be free when the node is started again
    try:
        node = build_node(cfg, partial(GrpcPeer, max_message=cfg.max_message_bytes, tls=tls))
    except ValueError as e:  # what the deployment cannot be run with (a topic of another partition count)
        listener.close()
        print(f"lazystandby node: {e}", file=sys.stderr, flush=True)
        return 2
    server = listener.serve(node)
    if cfg.metrics_port:
        from .metrics import serve_metrics

        serve_metrics(node, cfg.metrics_port)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _on_stop(node, log) if cfg.handover_on_stop else lambda *_: node.halt.set())
    # SIGUSR1: the node's main loop raises, as a bug in it would (the chaos test of a loop's death: the node
    # must then exit EXIT_FAILED and be replaced, never answer on with a dead loop).
    signal.signal(signal.SIGUSR1, lambda *_: node.die_in_loop())
    node.start()  # after the server listens: a standby registers with Nu, which then calls back
    log.info("%s (%s) listening on %s%s", cfg.name, cfg.role, cfg.listen, " (mutual TLS)" if tls else "")
    wait_for(node.halt)
    if node.fatal:
        log.error("%s: exits with code %d so that it is replaced: %s", cfg.name, node.exit_code, node.fatal)
    server.stop(grace=0 if node.fatal else 0.5)  # the port closes: peers see a dead node at once
    node.stop(join_timeout=0.5 if node.fatal else 5.0)  # a failed node exits at once: its replacement waits
    return node.exit_code if node.fatal else 0  # node.common: EXIT_FAILED (70), EXIT_FENCED (75)


def _on_stop(node: DownstreamNode | OperatorNode | UpstreamNode, log: logging.Logger) -> Callable[..., None]:
    """The handler of SIGTERM and SIGINT: a primary hands over first (handover_on_stop), in a thread of its
    own (it waits for its standby's next heartbeat); any other node, or a second signal, stops at once."""
    asked = threading.Event()

    def hand_over() -> None:
        how = node.hand_over()
        log.info("%s: stopping (handover: %s)", node.name, how)
        node.halt.set()

    def handler(*_) -> None:
        if asked.is_set() or not isinstance(node, OperatorNode):
            node.halt.set()
            return
        asked.set()
        threading.Thread(target=hand_over, name=f"{node.name}:handover", daemon=True).start()

    return handler


COMMANDS = {
    "node": "run one node (Nu, N, N' or Nd) from its settings: flags or LS_* env vars",
    "run": "a pipeline file (examples/*.sql) against KAFKA_BOOTSTRAP until stopped; with --fault NAME, checked "
           "against DuckDB's truth on a bounded load, JSON summary last",
    "launch": "the pipeline on loopback processes, one fault injected mid-run; JSON summary last",
    "failover-check": "K trials of a fault (SIGKILL of N by default) at random moments; JSON summary last",
    "chaos-campaign": "faults drawn at random from the catalog, singles and pairs, against a Kafka load",
    "explain": "what a pipeline file runs, stage by stage (tables, windows, views, topics), without running it",
    "stack-check": "the truth-table check of a running compose stack, from inside its network",
    "dashboards-check": "every dashboard panel query against a real Prometheus after a failover",
}
USAGE = "usage: lazystandby COMMAND [options]  (lazystandby COMMAND --help: that command's options)\n\ncommands:\n" + \
    "".join(f"  {c:<18}{d}\n" for c, d in COMMANDS.items())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd not in COMMANDS:
        print(f"lazystandby: unknown command {cmd!r}; expected one of {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    if cmd == "node":
        return run_node(rest)
    if cmd == "explain":
        from .explain import main as explain_main

        return explain_main(rest)
    if cmd == "stack-check":
        from .harness.stack_check import main as stack_main

        return stack_main(rest)
    if cmd == "dashboards-check":
        from .harness.dashboards_check import main as dash_main

        return dash_main(rest)
    if cmd == "chaos-campaign":
        from .harness.campaign import main as campaign_main

        return campaign_main(rest)
    from .harness.launcher import main as launch_main

    return launch_main([cmd, *rest])


if __name__ == "__main__":
    sys.exit(main())
