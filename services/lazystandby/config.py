"""All configuration in one typed place. Each field maps to an env var LS_<FIELD> and a CLI flag
--<field-with-dashes>; the CLI wins over the environment, the environment over the defaults, which run."""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from enum import Enum
from typing import Any, get_type_hints

from .allocator import KEEP_MB_MAX
from .core.batching import DICT_SAMPLES, DICT_SIZE, format_bsize, parse_bsize
from .core.codec import CodecName
from .core.errors import SettingError
from .core.seq import partition_streams


def _setting(name: str) -> str:
    return f"{name} (--{name.replace('_', '-')}, env LS_{name.upper()})"


def refuse(name: str, accepts: str, got: Any) -> SettingError:
    return SettingError(f"{_setting(name)}: expected {accepts}, got {got!r}")


def kafka_bootstrap_from_env(env: Mapping[str, str] | None = None) -> str:
    """The Kafka bootstrap a user set: LS_KAFKA_BOOTSTRAP, else the common KAFKA_BOOTSTRAP ("" = none)."""
    env = os.environ if env is None else env
    return env.get("LS_KAFKA_BOOTSTRAP") or env.get("KAFKA_BOOTSTRAP", "")


# A standby's IQ' holds this many times iq_capacity. Under full load the backup runs ahead of what the primary
# has processed by up to the primary's whole IQ, and covering takes a further fraction of a second of inputs:
# an IQ' no larger than IQ runs out of room, and the standby then processes what it would have skipped, on
# the CPU the primary needs (docs/benchmarks.md, "Tuning": standby_iq_factor).
STANDBY_IQ_FACTOR = 4

# The primary's lease at Nd, as a share of heartbeat_interval, unless takeover_lease is set (NodeConfig).
LEASE_SHARE = 0.75


def parse_lease(text: str | float | None) -> float | None:
    """'auto' (or None, or empty) means LEASE_SHARE of heartbeat_interval; otherwise seconds."""
    if text is None or (isinstance(text, str) and text.strip().lower() in ("auto", "")):
        return None
    return float(text)


def format_lease(lease: float | None) -> str:
    """The text `parse_lease` reads back."""
    return "auto" if lease is None else str(lease)


@dataclass
class NodeConfig:
    """One node's settings. `role` is upstream | primary | standby | downstream."""

    role: str = "primary"
    name: str = ""
    listen: str = "127.0.0.1:50051"
    advertise: str = ""  # the address peers use to reach this node (default: listen)
    upstream: str = ""  # N, N': Nu's address
    downstream: str = ""  # N, N': Nd's address
    primary: str = ""  # Nu: N's address; N': the primary it watches
    standby: str = ""  # Nu: N''s address
    # Lazy Standby knobs
    # 1 = Active Standby ... None (text "inf") = Upstream Backup; parsed once, here, by parse_bsize
    bsize: int | None = field(default=10, metadata={"parse": parse_bsize, "format": format_bsize})
    codec: CodecName = CodecName.ZSTD_STREAM_DICT
    # zstd level; 0 = by codec and Bsize (core/codec.default_level: 9 for a streaming codec at Bsize 1-2,
    # where it is cheap; 1 on small tables for a streaming codec past that, 3 for per-batch frames).
    codec_level: int = 0
    dict_samples: int = DICT_SAMPLES
    dict_size: int = DICT_SIZE
    # A run takes what is due, up to this many batches: only a backup behind the source sends big ones. One
    # call is in flight at a time, so every call's fixed cost caps the backup, and through backup_lag_max the
    # source. Larger runs move more tuples per call; with backup_lag_max they also let a run end with more
    # tuples not yet at N' (docs/benchmarks.md, "Tuning": max_batches_per_rpc).
    max_batches_per_rpc: int = 4096
    # Milliseconds the backup link gathers due batches into one call, unless a full run is due first. Each
    # call carries about 50 bytes besides its batches (the checkpoint, the codec session, the run's header):
    # at Bsize 10 and 10,000 tuples/s the link made 190 calls a second, and that framing was 6 % of the
    # backup's bytes. At full speed a call is due every few ms anyway; the standby lags by up to this much
    # more, which Nu resends at a takeover. 0 = send whatever is due at once.
    backup_linger_ms: float = 20.0
    # backup_linger_ms when standby_state is snapshot. A Passive Standby reads its backup only at a takeover,
    # after restoring a snapshot up to snapshot_interval old, so a longer gather costs that takeover only
    # the transfer of what Nu then resends (100 ms of input at 20,000 tuples/s is about 40 KB), while each
    # call it saves is CPU the standby otherwise spends on a gRPC call: with 1,000,000 keys at 20,000
    # tuples/s and Bsize 100, 20 ms of gathering left the standby 0.105 of the primary's CPU, 100 ms 0.052.
    passive_backup_linger_ms: float = 100.0
    # Most tuples Nu admits past what a responsive standby has acknowledged. Without a bound the source
    # and the primary outrun the backup whenever CPU is short, and Nu trims past batches never sent: the
    # run then looks as cheap as no standby while the standby holds nothing. It leaves room for the call in
    # flight and the one being cut, and for a few of the primary's frames (frame_max). Larger: fewer stalls
    # of the source behind a slow backup call (a steadier `worst_second_ratio`), more for Nu to resend at a
    # takeover (docs/benchmarks.md, "Tuning": backup_lag_max). 0 = no bound.
    backup_lag_max: int = 262_144
    # Seconds a backup call may go unanswered before Nu stops holding the source (backup_lag_max) and OQu's
    # trim back for the standby: it is then out of sync, as a follower that stops fetching leaves Kafka's
    # ISR, and catches up by a checkpoint when it answers. Waiting for rpc_timeout instead, a paused standby
    # (SIGSTOP, docker pause, a black-holed link) would stop the pipeline for most of every rpc_timeout at
    # full speed. Far above a call's time under load (tens of ms). 0 = wait for rpc_timeout.
    backup_stall_max: float = 0.5
    # Seconds a freshly started Nu holds its source for its standby to register. Admitting at once, Nu
    # admits a large first run before the registration arrives (the standby's retries and gRPC's reconnect
    # backoff), and the resync it then asks for stops the source at backup_lag_max a second time. A
    # restarted Nu never waits (its standby registered with the one before). 0 = admit at once.
    standby_wait: float = 1.0
    # Most tuples Nu admits past what the primary has taken. Without a bound, a source faster than N filled
    # OQu (1,000,000 tuples ten seconds into a run at full speed); the backup shipped them all to N', whose
    # inputs then waited longer than standby_defer for Nd's acks, and N' processed every one of them.
    # 0 = no bound (OQu's capacity still is one).
    primary_lag_max: int = 200_000
    # Seconds a standby lets each backup input wait before it runs the operator on it: Nd's acks cover most
    # inputs within that time, and a covered input is skipped, never processed. 0 = process on arrival, as
    # seed 000's standby does (and pay for a second operator on the same machine).
    standby_defer: float = 1.0
    # How a window query's standby keeps its state. warm: it applies every input as the primary does (a
    # second operator's CPU; a takeover starts from a state already there). snapshot (Passive Standby, seed
    # 001): it does no operator work; the primary ships its state every snapshot_interval and the standby
    # holds the newest with the backup after it, restores it at a takeover and replays only what follows.
    standby_state: str = "warm"
    # Seconds between a Passive Standby primary's snapshots: longer ships less state and leaves more
    # backup to replay at a takeover.
    snapshot_interval: float = 1.0
    # failure detection
    heartbeat_interval: float = 0.1
    heartbeat_misses: int = 3
    # Seconds a standby gives a primary it has not heard from yet before late heartbeats count against it.
    heartbeat_grace: float = 2.0
    # Seconds Nd declines a takeover after the primary in force last delivered to it (core.recovery.PrimaryLease):
    # a standby cut off from a primary that still delivers does not depose it. Above ack_poll_ms (an idle
    # primary renews it with an empty frame that often), below heartbeat_interval (a standby declined at
    # a crashed primary's first suspicion suspects it again within that, and the lease must have run out
    # by then). None (text "auto") = LEASE_SHARE of heartbeat_interval: a primary's deliveries come less
    # evenly where the detector is set slower (the Spark operator's 0.2 s: 75 ms let a busy Spark primary's
    # lease lapse between two frames, and N' took over from it). 0 = no lease. Read it as `lease_s`.
    takeover_lease: float | None = field(default=None, metadata={"parse": parse_lease, "format": format_lease})
    # Seconds the primary's operator may leave a call unanswered before the primary stops vouching for
    # itself (core.recovery.OperatorWatch): its heartbeats then say so, the standby counts each as a miss,
    # and no empty frame renews its lease at Nd. Far above a call's time, a cold JVM's first call included
    # (`operator_slowest_call_s` in a node's status; docs/benchmarks.md, "Tuning": operator_stall_max).
    # Shorter: a hung operator is replaced sooner, and a slow call is taken for a hang more easily. 0 = never
    # (an operator whose calls fail, its JVM gone, ends its node whatever this is).
    operator_stall_max: float = 10.0
    # A fenced node (a primary deposed while it ran: paused, cut off, its operator stalled) ends its process
    # (exit 75) instead of staying up, fenced, holding a place: under a supervisor that starts it again (the
    # compose stack's restart: on-failure, or launch's Topology.supervise) it comes back as a fresh node, is
    # shown the newer epoch before it has worked, and rejoins as the standby (RoleState.rejoin). Off by
    # default: with nothing to start it again, a fenced node that stays up still says what happened in its
    # status and metrics.
    exit_when_fenced: bool = False
    # A primary asked to stop (SIGTERM or SIGINT: `docker stop`, a rolling upgrade, Ctrl-C) hands over
    # first (OperatorNode.hand_over): it tells its standby, which takes over at once, not after the
    # detector's timeout and the lease. A second signal stops it at once.
    handover_on_stop: bool = True
    rpc_timeout: float = 2.0
    # framing and queues
    # Each link has one call in flight, so a link's rate is a frame per round trip, and at full speed a round
    # trip waits mostly for the GIL of a busy sender and receiver, not for work. Larger frames: more tuples
    # per round trip and steadier seconds, more memory per node (docs/benchmarks.md, "Tuning": frame_max).
    # A frame fills only while a link is behind: below capacity, linger_ms sends what is there.
    frame_max: int = 32_768
    # Below capacity every frame costs about the same whatever it holds (a gRPC call), so linger_ms sets the
    # CPU a moderate rate takes: longer, less CPU and more latency per tuple (docs/benchmarks.md, "Tuning":
    # linger_ms). 5 ms is also Kafka's producer default (linger.ms).
    linger_ms: float = 5.0
    ack_poll_ms: float = 50.0
    oq_capacity: int = 2_000_000
    iq_capacity: int = 200_000
    max_tuple_bytes: int = 65536
    max_message_bytes: int = 64 << 20
    # MB of freed memory each node's malloc keeps for reuse (allocator.keep_freed_memory): a frame's
    # buffers then come from memory already mapped, not fresh pages faulted in one by one. More: fewer page
    # faults (`minor_faults_per_s_by_node`), a higher peak RSS (`max_rss_mb`; docs/benchmarks.md, "Tuning":
    # malloc_keep_mb). 0 = glibc's own thresholds.
    malloc_keep_mb: int = 64
    # operator
    operator: str = "python"  # python | spark
    predicate: str = "price > 100"
    # What N and N' compute (formats/query.py): empty = the selection by `predicate`; else SQL over the
    # tick table or the name of an example (`select`, `window`). A window query is stateful: its standby
    # applies every input, and every node of the pipeline (Nu too: it places the watermarks) must run the
    # same text.
    query: str = ""
    # A tick window query's lateness in ms (the tick table's WATERMARK delay): a window stays open that long
    # past its end. Longer drops fewer ticks as late and holds every result back as long. A pipeline's
    # tables declare their own (WATERMARK FOR ... AS ... - INTERVAL ...).
    lateness_ms: int = 0
    # A pipeline file (examples/*.sql, docs/sql.md): the tables the pipeline reads (each a source stream,
    # its topic and format), the SQL query N and N' run, the sink's topic and settings (SET name = value,
    # below any flag or env var). Set, it replaces `query`, `predicate` and `streams`.
    pipeline: str = ""
    # Which stage of a pipeline file of several (one per CREATE VIEW, then the last query; from 1) this
    # node runs; 0 names a file's only one. Each stage has its own nodes and topics (under topic_prefix).
    stage: int = 0
    # A window query's watermark period, in link positions: Nu places a watermark record at every multiple.
    # Windows close (results are emitted) only there: more positions between records cost fewer merges of
    # the open state, and a final window waits longer for its results (at 100,000 tuples/s, 1,024 is 10 ms).
    watermark_every: int = 1024
    # Positions without a tick after which a stream stops holding a window query's watermark back (0:
    # never, as Flink without idleness). A stream that goes quiet then no longer stalls every window; its
    # ticks that come after it count as late once the others have moved the watermark past them. The
    # Python operator's rule only (`watermark_per_stream`).
    watermark_idle: int = 0
    # Chaos tests of quarantine (node/quarantine.py): no admitted tick fails the built-in operators, so a
    # poison input is made by name. Never set in production.
    chaos_poison: str = ""
    # Most tuples per operator call; 0 = by operator: 32,768 (python), 131,072 (spark: a micro-batch costs
    # nearly the same for four times the tuples, so at saturation bigger calls mean more throughput).
    operator_batch: int = 0
    spark_master: str = "local[2]"
    spark_driver_memory: str = "1g"
    spark_trigger: str = "0 seconds"
    spark_max_rows: int = 200_000
    spark_partitions: int = 2
    # A standby's query may let backup tuples wait up to this long (or until spark_max_rows wait) and run
    # them in one micro-batch: fewer micro-batches for its JVM (one query alone at 5,000 tuples/s: 1.18 ->
    # 0.45 cores with 1 s). The takeover pays for it: it starts with up to this much work left (make demo:
    # failover 915 ms at 0, 1,268 ms at 0.5 s). 0 = the standby runs as the primary does.
    spark_standby_hold: float = 0.0
    spark_checkpoint_dir: str = ""  # where the query's checkpoints go (default: a fresh dir in TMPDIR per start)
    # Where a window query's Spark state lives: `hdfs` (Spark's default: in the JVM's heap, each version
    # written to the checkpoint) or `rocksdb` (off heap, on local disk: state larger than the heap, at a
    # cost per key read).
    spark_state_store: str = "hdfs"
    # Any Spark setting, passed through to the node's session (after ours: yours win). Repeat the flag, or
    # separate them with ';' in LS_SPARK_CONF.
    spark_conf: tuple[str, ...] = field(default=(), metadata={"parse": lambda t: parse_spark_conf(t),
                                                              "format": lambda v: ";".join(v), "repeat": True})
    # Where the node serves its feed to Spark's Python workers, and the address they are told: on a cluster
    # the workers run on other hosts, so bind a reachable interface and advertise this host's name.
    spark_feed_bind: str = "127.0.0.1:0"
    spark_feed_advertise: str = ""
    # source (Nu): the deterministic generator
    streams: str = "I1,I2"
    seed: int = 7
    # Distinct symbols the generator draws from (K0, K1, ...; up to 1,000,000), so that a window query's
    # state can be large; 0 = the ten named symbols.
    keys: int = 0
    total: int = 0  # tuples to generate; 0 = forever
    rate: float = 0.0  # tuples/s; 0 = as fast as the pipeline takes them
    # Kafka: when set, Nu consumes the source topics and Nd writes the results topic (else generator/file)
    kafka_bootstrap: str = ""
    topic_prefix: str = "ls."
    # Partitions of each source topic: each partition is a stream of its own in the link order (its own
    # stream id, seq = offset + 1). A source topic that exists with another count is refused at start.
    partitions: int = 1
    replication_factor: int = 1
    # sink (Nd)
    sink: str = ""  # a file of delivered outputs; empty = keep nothing but counts
    # mutual TLS between nodes (deploy/tls/make-certs.sh); all three empty = plaintext (loopback only)
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    # observability
    metrics_port: int = 0
    overhead_budget: float = 0.5  # backup/primary bytes above which the BandwidthOverheadAboveBudget alert fires
    # The recovery-time objective, in ms: RecoveryTargetAtRisk fires while the predicted recovery
    # (core.recovery_model) stays above it. 0 = none.
    recovery_target_ms: float = 0.0
    log_level: str = "INFO"
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Every value checked here, once, with an error that names the setting (SettingError)."""
        if self.role not in ("upstream", "primary", "standby", "downstream"):
            raise refuse("role", "upstream, primary, standby or downstream", self.role)
        try:
            self.codec = CodecName(self.codec)
        except ValueError:
            raise refuse("codec", "one of " + ", ".join(CodecName), self.codec) from None
        try:
            self.bsize = parse_bsize(self.bsize)
        except (TypeError, ValueError):
            raise refuse("bsize", "a whole number >= 1, or inf", self.bsize) from None
        if self.operator not in ("python", "spark"):
            raise refuse("operator", "python or spark", self.operator)
        if self.chaos_poison and self.operator != "python":
            raise refuse("chaos_poison", "empty with the Spark operator (a failed micro-batch ends its query: it "
                         "quarantines nothing)", self.chaos_poison)
        if not 0 <= self.malloc_keep_mb <= KEEP_MB_MAX:
            raise refuse("malloc_keep_mb", f"a whole number 0-{KEEP_MB_MAX}", self.malloc_keep_mb)
        self._check_query()
        self._check_numbers()
        if not self.name:
            self.name = {"upstream": "Nu", "primary": "N", "standby": "N'", "downstream": "Nd"}[self.role]
        if not self.advertise:
            self.advertise = self.listen
        if not self.kafka_bootstrap:
            self.kafka_bootstrap = kafka_bootstrap_from_env()

    def _check_query(self) -> None:
        """The query settings (query, pipeline, predicate) and those that depend on the query's kind."""
        from .core.errors import PredicateError, QueryError
        from .formats.predicate import compile_predicate

        try:
            q = _parse_query(self.query, self.lateness_ms) if self.query else None
        except QueryError as e:
            raise SettingError(f"{_setting('query')}: {e}") from None
        if self.pipeline:
            if self.query:
                raise refuse("query", "empty with a pipeline (the pipeline file holds the query)", self.query)
            if self.lateness_ms:
                raise refuse("lateness_ms", "0 with a pipeline (its tables declare their WATERMARK delay)",
                             self.lateness_ms)
            try:
                spec = _read_pipeline(self.pipeline, self.stage)
            except ValueError as e:  # PipelineError, UnsupportedSql
                raise SettingError(f"{_setting('pipeline')}: {e}") from None
            self.streams = ",".join(t.table for t in spec.sources)
        elif self.stage:
            raise refuse("stage", "0 without a pipeline (a stage is one query of a pipeline file)", self.stage)
        stateful = self.stateful
        if self.spark_state_store not in ("hdfs", "rocksdb"):
            raise refuse("spark_state_store", "hdfs or rocksdb", self.spark_state_store)
        if q is not None and q.stateful and self.operator == "spark" and q.slide_ms != q.size_ms:
            # A tick of sliding windows may lie in some already final at its position: the Python operator
            # leaves those out, while Spark's query, whose watermark moves only between micro-batches,
            # would count it in them.
            raise refuse("query", "tumbling windows with the Spark operator (no slide)", self.query)
        if stateful and self.chaos_poison:
            raise refuse("chaos_poison", "empty with a window query (a stateful call cannot be retried on part of "
                         "its inputs, so nothing is quarantined)", self.chaos_poison)
        if self.standby_state not in ("warm", "snapshot"):
            raise refuse("standby_state", "warm or snapshot", self.standby_state)
        if self.standby_state == "snapshot" and not (stateful and self.operator == "python"):
            # Spark keeps a window's state in its state store, whose checkpoint is files under its own
            # directory, written at each micro-batch: no state to ship between calls.
            raise refuse("standby_state", "warm unless the query is a window query on the Python operator",
                         self.standby_state)
        try:
            compile_predicate(self.predicate)
        except PredicateError as e:
            raise SettingError(f"{_setting('predicate')}: {e}") from None

    def _check_numbers(self) -> None:
        """Each number within its bounds."""
        if not self.snapshot_interval > 0:
            raise refuse("snapshot_interval", "a number of seconds > 0", self.snapshot_interval)
        if not 0 <= self.keys <= 1_000_000:
            raise refuse("keys", "a whole number 0-1,000,000", self.keys)
        if self.watermark_idle < 0:
            raise refuse("watermark_idle", "a whole number >= 0", self.watermark_idle)
        if self.watermark_every < 2:
            raise refuse("watermark_every", "a whole number >= 2", self.watermark_every)
        for name in ("heartbeat_interval", "rpc_timeout", "linger_ms", "ack_poll_ms"):
            if not getattr(self, name) > 0:
                raise refuse(name, "a number > 0", getattr(self, name))
        for name in ("partitions", "replication_factor", "heartbeat_misses", "frame_max", "oq_capacity",
                     "iq_capacity", "max_tuple_bytes",
                     "max_message_bytes", "max_batches_per_rpc", "spark_partitions", "spark_max_rows",
                     "dict_samples", "dict_size"):
            if getattr(self, name) < 1:
                raise refuse(name, "a whole number >= 1", getattr(self, name))
        for name in ("rate", "total", "operator_batch", "codec_level", "metrics_port", "backup_lag_max",
                     "spark_standby_hold", "standby_defer", "backup_linger_ms", "passive_backup_linger_ms",
                     "primary_lag_max",
                     "backup_stall_max", "heartbeat_grace", "standby_wait", "operator_stall_max",
                     "recovery_target_ms", "lateness_ms"):
            if getattr(self, name) < 0:
                raise refuse(name, "a number >= 0", getattr(self, name))
        try:
            self.takeover_lease = parse_lease(self.takeover_lease)
        except (TypeError, ValueError):
            raise refuse("takeover_lease", "auto or a number of seconds", self.takeover_lease) from None
        if self.takeover_lease is not None and not 0 <= self.takeover_lease < self.heartbeat_interval:
            raise refuse("takeover_lease", f"auto or a number >= 0 and below heartbeat_interval "
                         f"({self.heartbeat_interval} s: a crashed primary's lease must run out before its standby "
                         "suspects it again)", self.takeover_lease)

    @property
    def heartbeat_timeout(self) -> float:
        """Seconds of silence after which a standby suspects its primary (FailureDetector.timeout): how
        long Nd weighs a standby's word, and how long a leaving primary waits for a standby to ask."""
        return self.heartbeat_interval * self.heartbeat_misses

    @property
    def pipeline_spec(self):
        """The pipeline file's declaration (formats/pipeline.Pipeline), None without one."""
        return _read_pipeline(self.pipeline, self.stage) if self.pipeline else None

    @property
    def stateful(self) -> bool:
        """Whether N and N' run a window query (the pipeline's, or `query`)."""
        if self.pipeline:
            return self.pipeline_spec.plan.stateful
        return bool(self.query) and self.parsed_query.stateful

    @property
    def window_spec(self):
        """The windows of a window query (core/windows.WindowSpec), None for a selection: Nu places its
        watermark records by them."""
        from .core.windows import WindowSpec

        if self.pipeline:
            return self.pipeline_spec.plan.spec
        q = self.parsed_query
        return WindowSpec(q.size_ms, q.slide_ms, q.lateness_ms) if q.stateful else None

    @property
    def parsed_query(self):
        """The query N and N' run (formats/query.Query): `query`, else the selection by `predicate`."""
        from .formats.query import Query

        return _parse_query(self.query, self.lateness_ms) if self.query else Query("select", where=self.predicate)

    @property
    def watermark_per_stream(self) -> bool:
        """Whether Nu's watermark is the least of each stream's largest event time (the Python operator)
        or the largest over all of them (the Spark operator). Spark's watermark is the largest event time
        its query has read, ticks included, less the lateness; it equals the link order's at every record
        only when the records carry that same largest time, so with Spark a stream read ahead of the other
        makes the other's ticks late."""
        return self.operator != "spark"

    @property
    def lease_s(self) -> float:
        """Seconds of the primary's lease at Nd: takeover_lease, or LEASE_SHARE of heartbeat_interval."""
        return LEASE_SHARE * self.heartbeat_interval if self.takeover_lease is None else self.takeover_lease

    @property
    def backup_linger_s(self) -> float:
        """Seconds the backup link gathers due batches into one call: passive_backup_linger_ms for a Passive
        Standby (standby_state snapshot), backup_linger_ms otherwise."""
        ms = self.passive_backup_linger_ms if self.standby_state == "snapshot" else self.backup_linger_ms
        return ms / 1000

    @property
    def idle_frame_s(self) -> float:
        """Seconds between an idle primary's empty frames to Nd: ack_poll_ms, or a third of the lease when
        that is shorter, so that one late frame (a busy machine) does not let a working primary's lease
        lapse. Measured with the Spark operator (a 75 ms lease, 50 ms ack_poll_ms): the primary's longest
        silence at Nd was 123-149 ms, and 2 of 4 `partition-primary-standby` runs deposed it."""
        poll = self.ack_poll_ms / 1000
        return min(poll, self.lease_s / 3) if self.lease_s > 0 else poll

    @property
    def input_queue_capacity(self) -> int:
        """What this node's input queue holds: iq_capacity, STANDBY_IQ_FACTOR times that on a standby."""
        return self.iq_capacity * (STANDBY_IQ_FACTOR if self.role == "standby" else 1)

    @property
    def source_streams(self) -> list[str]:
        """The source streams as configured (one topic each on Kafka)."""
        return [s for s in self.streams.split(",") if s]

    @property
    def stream_names(self) -> list[str]:
        """The streams of the link order: one per partition of each source stream (`I1/0`, `I1/1`, ...),
        or the source streams themselves with one partition."""
        return partition_streams(self.source_streams, self.partitions)


# What each setting does: docs/settings.md's table is generated from this (`python -m lazystandby.config`),
# and a test keeps the two equal.
HELP: dict[str, str] = {
    "role": "upstream (Nu), primary (N), standby (N') or downstream (Nd)",
    "name": "the node's name in logs, metrics and messages (default: Nu, N, N', Nd by role)",
    "listen": "host:port the node's gRPC server binds",
    "advertise": "host:port peers use to reach this node (default: listen)",
    "upstream": "N, N': Nu's address",
    "downstream": "N, N': Nd's address",
    "primary": "Nu: the primary's address; N': the first primary it watches (empty, or past epoch 1: Nu's)",
    "standby": "Nu: the standby's address (a standby may also register itself)",
    "bsize": "tuples per backup batch: 1 = Active Standby ... inf = Upstream Backup",
    "codec": "backup codec: none, zlib, zstd, zstd-dict, zstd-stream, zstd-stream-dict",
    "codec_level": "zstd level; 0 = by codec and Bsize (streaming codecs: 9 at Bsize 1-2, else 1; per-batch frames 3)",
    "dict_samples": "single tuples sampled before a dictionary codec trains its dictionary",
    "dict_size": "bytes of the trained zstd dictionary",
    "max_batches_per_rpc": "backup batches that may share one RPC (each still compressed on its own)",
    "backup_linger_ms": "how long the backup link gathers batches into one call (0: send at once)",
    "passive_backup_linger_ms": "backup_linger_ms for a Passive Standby (standby_state snapshot): fewer calls "
                                "for the standby, that much more for Nu to resend at a takeover",
    "primary_lag_max": "most tuples Nu admits ahead of what the primary has taken (backpressure); 0 = no bound",
    "backup_lag_max": "most tuples Nu admits ahead of a responsive standby's acks (backpressure); 0 = no bound",
    "backup_stall_max": "seconds a backup call may go unanswered before Nu stops waiting for the standby (out of "
                        "sync; it catches up by a checkpoint); 0 = wait for rpc_timeout",
    "standby_wait": "seconds a freshly started Nu holds its source until its standby registers (0: admit at "
                    "once)",
    "heartbeat_interval": "seconds between the standby's heartbeats to the primary",
    "standby_state": "warm (the standby applies every input) or snapshot (Passive Standby: the primary ships "
                     "its state every snapshot_interval; window queries on the Python operator)",
    "snapshot_interval": "seconds between a Passive Standby primary's snapshots (longer: less shipped, more "
                         "to replay at a takeover)",
    "standby_defer": "seconds a standby lets inputs wait for Nd's acks to cover them (covered: skipped; 0: none); "
                     "a window standby on Spark skips none and takes them on arrival",
    "heartbeat_misses": "missed heartbeats after which the standby takes over (a refusing port: one interval)",
    "takeover_lease": "seconds Nd declines a takeover after the primary's last delivery (a standby cut off from a "
                      "primary that still delivers does not depose it); below heartbeat_interval; auto = three "
                      "quarters of it; 0 = no lease",
    "heartbeat_grace": "seconds a standby gives a primary it has not heard from yet (a starting one) before "
                       "missed heartbeats count; a refusing port or a name that resolves to nothing is suspected "
                       "after one interval; 0 = none",
    "operator_stall_max": "seconds the primary's operator may leave a call unanswered before the primary says "
                          "it is stalled (its standby takes over; it stops renewing its lease at Nd); 0 = never (an "
                          "operator that failed is still said at once)",
    "exit_when_fenced": "a fenced node exits (code 75) so that a supervisor starts it again and it rejoins as the "
                        "standby (the compose stack, launch and failover-check turn it on and start it again); off: "
                        "it stays up, fenced",
    "handover_on_stop": "a primary asked to stop (SIGTERM, SIGINT) first hands over: it takes no more input, ends "
                        "its lease at Nd, and tells its standby, which takes over at once instead of after the "
                        "detector's timeout; a second signal stops it at once; off: it just stops",
    "rpc_timeout": "seconds a call to a peer may take",
    "frame_max": "most tuples per frame on every link",
    "linger_ms": "how long a link waits to fill a frame before it sends, and Nu before it polls a source that "
                 "had less than a frame",
    "ack_poll_ms": "how often an idle link polls for acks (and a primary hears from Nu)",
    "oq_capacity": "most tuples an output queue holds (Nu's OQu, N's OQ); beyond it, backpressure",
    "iq_capacity": f"most tuples an input queue holds (a standby's IQ': {STANDBY_IQ_FACTOR} times this); beyond it, "
                   "RESOURCE_EXHAUSTED to the sender",
    "max_tuple_bytes": "larger source records go to the dead letters; larger tuples are refused",
    "max_message_bytes": "largest gRPC message, and largest decoded backup batch",
    "malloc_keep_mb": "MB of freed memory malloc keeps for the next frame's buffers (fewer page faults); 0 = glibc's "
                      "own thresholds",
    "operator": "python or spark",
    "predicate": "the selection: a Spark-SQL boolean expression over symbol, price, volume, ts, venue",
    "query": "what N and N' compute: empty = the selection by predicate; else SQL over the tick table (SELECT * "
             "FROM ticks [WHERE ...], or keys and aggregates GROUP BY window(ts, '<size>'[, '<slide>']), <keys>), "
             "or an example's name (select, window)",
    "lateness_ms": "a tick window query's lateness in ms (the tick table's WATERMARK delay): longer drops fewer "
                   "ticks as late and holds every result back as long",
    "pipeline": "a pipeline file (examples/*.sql): its tables, SQL query, sink and SET settings; replaces query, "
                "predicate and streams",
    "stage": "which stage of a pipeline file of several (CREATE VIEW ...) this node runs, from 1; 0 = the file's "
             "only one",
    "keys": "distinct symbols the generator draws from (K0, K1, ...; up to 1,000,000): a window query's state "
            "grows with it; 0 = the ten named symbols",
    "watermark_every": "a window query's watermark period in link positions: windows close only at a watermark "
                       "record (fewer: lower result latency, more merges of the open state)",
    "watermark_idle": "Python operator: positions without a tick after which a stream stops holding the watermark "
                      "back (0: never; lower: windows close despite a quiet stream, whose later ticks may then be "
                      "late). With Spark the watermark is the largest event time on any stream",
    "chaos_poison": "chaos tests only: the Python operator fails on every input holding this text, as on a value it "
                    "cannot compute with, and the node quarantines those inputs; empty: never",
    "operator_batch": "most tuples per operator call; 0 = by operator (32,768 python, 131,072 spark)",
    "spark_master": "Spark master URL for the Spark operator",
    "spark_driver_memory": "spark.driver.memory of the node's Spark session",
    "spark_trigger": "the query's processing-time trigger",
    "spark_max_rows": "most feed rows per micro-batch",
    "spark_partitions": "input partitions per micro-batch",
    "spark_standby_hold": "seconds a standby's query lets backup tuples wait to run them in one micro-batch (0: none)",
    "spark_state_store": "where a window query's Spark state lives: hdfs (heap) or rocksdb (off heap, local disk)",
    "spark_checkpoint_dir": "where the query's checkpoints go (default: a fresh directory in TMPDIR, where "
                            "the Spark driver's scratch goes too)",
    "spark_conf": "any Spark setting, key=value (repeat the flag; ';' between them in the env var)",
    "spark_feed_bind": "host:port the node serves its feed to Spark's workers on (port 0: any free one)",
    "spark_feed_advertise": "host[:port] Spark's workers reach the feed at (default: the bound address)",
    "streams": "source stream names, comma-separated",
    "seed": "the generator's seed (same seed, same tuples)",
    "total": "tuples the generator makes; 0 = forever",
    "rate": "tuples/s the generator makes; 0 = as fast as the pipeline takes them",
    "kafka_bootstrap": "Kafka bootstrap servers (also KAFKA_BOOTSTRAP); empty = the generator and a file sink",
    "topic_prefix": "prefix of every topic the pipeline uses",
    "partitions": "partitions of each source topic (each one a stream of the link order); others have one",
    "replication_factor": "replication factor of the topics the pipeline creates",
    "sink": "Nd without Kafka: a file of delivered outputs; empty = keep counts only",
    "tls_ca": "mutual TLS: the CA certificate (all three empty = plaintext, for loopback)",
    "tls_cert": "mutual TLS: this node's certificate (its role in the common name, ROLE:NAME)",
    "tls_key": "mutual TLS: this node's private key",
    "metrics_port": "port of the Prometheus /metrics endpoint; 0 = off",
    "overhead_budget": "backup/primary bytes above which BandwidthOverheadAboveBudget fires",
    "recovery_target_ms": "ms the predicted recovery may take; RecoveryTargetAtRisk fires while it is above; 0 = none",
    "log_level": "DEBUG, INFO, WARNING or ERROR",
}


def settings_markdown() -> str:
    """The settings table of docs/settings.md, from NodeConfig and HELP."""
    rows = ["| setting | flag | env | default | meaning |", "|---|---|---|---|---|"]
    for f in fields(NodeConfig):
        if f.name == "extra":
            continue
        default = to_text(f.name, f.default) if f.default is not MISSING else ""
        shown = f"`{default}`" if default else "(empty)"
        rows.append(f"| `{f.name}` | `--{f.name.replace('_', '-')}` | `LS_{f.name.upper()}` | {shown} | "
                    f"{HELP[f.name]} |")
    return "\n".join(rows) + "\n"


_FIELDS = {f.name: f for f in fields(NodeConfig)}


def parse_spark_conf(text: str) -> tuple[str, ...]:
    """`key=value` items separated by ';' or new lines; a key is a Spark setting (spark.*)."""
    items = tuple(i.strip() for i in text.replace("\n", ";").split(";") if i.strip())
    for item in items:
        key, eq, _ = item.partition("=")
        if not eq or not key.strip().startswith("spark."):
            raise ValueError(item)
    return items


_ACCEPTS = {int: "a whole number", float: "a number", str: "text"}


def _convert(name: str, typ: Any, text: str) -> Any:
    parse = _FIELDS[name].metadata.get("parse")
    try:
        if parse is not None:
            return parse(text)
        if typ is bool:
            return text.lower() in ("1", "true", "yes", "on")
        return typ(text)
    except (TypeError, ValueError):
        if name == "bsize":
            accepts = "a whole number >= 1, or inf"
        elif name == "spark_conf":
            accepts = "spark.key=value items"
        elif isinstance(typ, type) and issubclass(typ, Enum):
            accepts = "one of " + ", ".join(typ)
        else:
            accepts = _ACCEPTS.get(typ, str(typ))
        raise refuse(name, accepts, text) from None


def to_text(name: str, value: Any) -> str:
    """A setting's value as its flag or env var spells it (what `load` parses back to the same value)."""
    fmt = _FIELDS[name].metadata.get("format")
    return fmt(value) if fmt is not None else str(value)


def to_args(settings: Mapping[str, Any]) -> list[str]:
    """Typed settings as `node` command-line flags. Unknown names are refused here, not by the child."""
    out: list[str] = []
    for name, value in settings.items():
        if name not in _FIELDS or name == "extra":
            raise ValueError(f"unknown setting {name!r}; expected one of {sorted(set(_FIELDS) - {'extra'})}")
        out += [f"--{name.replace('_', '-')}", to_text(name, value)]
    return out


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line (SettingError), not a usage block and a second line."""

    def error(self, message: str):  # type: ignore[override]
        raise SettingError(message)


def load(argv: list[str] | None = None, env: dict[str, str] | None = None) -> NodeConfig:
    """Defaults, then LS_* environment variables, then command-line flags."""
    env = os.environ if env is None else env
    hints = get_type_hints(NodeConfig)
    parser = OneLineParser(prog="lazystandby node", description=NodeConfig.__doc__)
    values: dict[str, Any] = {}
    for f in fields(NodeConfig):
        if f.name == "extra":
            continue
        typ = hints[f.name]
        envname = f"LS_{f.name.upper()}"
        if envname in env:
            values[f.name] = _convert(f.name, typ, env[envname])
        default = f.default if f.default is not MISSING else None
        parser.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, default=None,
                            action="append" if f.metadata.get("repeat") else "store",
                            help=f"(env {envname}, default {default!r})")
    args = parser.parse_args(argv)
    for f in fields(NodeConfig):
        given = getattr(args, f.name, None) if f.name != "extra" else None
        if given is not None:
            values[f.name] = _convert(f.name, hints[f.name], ";".join(given) if f.metadata.get("repeat") else given)
    if values.get("pipeline"):
        values = {**pipeline_settings(values["pipeline"]), **values}
    return NodeConfig(**values)


@functools.lru_cache(maxsize=32)
def _parse_query(text: str, lateness_ms: int):
    """A tick query, read once per process (the settings' checks and properties ask for it again and again;
    sqlglot and the planner take milliseconds). Query is frozen: the same value serves every caller."""
    from .formats.query import parse_query

    return parse_query(text, lateness_ms)


def _read_pipeline(path: str, stage: int = 0):
    """Stage `stage` of a pipeline file (0: its only one)."""
    from .formats.pipeline import choose

    return choose(_read_stages(path), stage, path)


@functools.lru_cache(maxsize=8)
def _read_stages(path: str):
    """A pipeline file's stages, read once per process (every node of a pipeline reads the same file)."""
    from .formats.pipeline import read_stages

    return read_stages(path)


def pipeline_settings(path: str) -> dict[str, Any]:
    """The settings a pipeline file SETs, typed (below any flag or env var); a name that is no setting, or
    a value it does not accept, is a SettingError that names the file."""
    hints = get_type_hints(NodeConfig)
    try:
        sets = _read_stages(path)[0].settings  # the file's, the same in every stage
    except ValueError as e:
        raise SettingError(f"{_setting('pipeline')}: {e}") from None
    out = {}
    for name, text in sets:
        if name not in _FIELDS or name in ("extra", "pipeline", "stage"):
            raise SettingError(f"{path}: SET {name}: no such setting (lazystandby node --help)")
        out[name] = _convert(name, hints[name], text)
    return out


if __name__ == "__main__":
    print(settings_markdown(), end="")
