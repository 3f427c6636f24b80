"""All configuration in one typed place. Each field maps to an env var LS_<FIELD> and a CLI flag
--<field-with-dashes>; the CLI wins over the environment, the environment over the defaults, which run."""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
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


def setting(default: Any, help: str, *, low: float | None = None, high: float | None = None,
            above: float | None = None, choices: tuple = (), accepts: str = "", parse: Any = None,
            format: Any = None, repeat: bool = False) -> Any:
    """One setting, declared once: its default; `help`, what it means and what it trades (the flag's help
    and its row in docs/settings.md); what it accepts, checked by NodeConfig: `low` and `high` inclusive
    bounds, `above` an exclusive lower bound, `choices` its only values. `parse` and `format` read and
    write its text where the type's own constructor and str() do not; `repeat`: the flag may be given more
    than once. `accepts` says in words what a value that fails `parse` should have been."""
    if not help:
        raise ValueError("a setting says what it means")
    kind = "a whole number" if isinstance(default, int) and not isinstance(default, bool) else "a number"
    if choices:  # "a or b"; "one of a, b, c" past two
        said = f"{choices[0]} or {choices[1]}" if len(choices) == 2 else "one of " + ", ".join(map(str, choices))
    elif low is not None and high is not None:
        said = f"{kind} {low:,}-{high:,}"
    elif low is not None:
        said = f"{kind} >= {low}"
    elif above is not None:
        said = f"{kind} > {above}"
    else:
        said = accepts
    meta = {"help": help, "low": low, "high": high, "above": above, "choices": tuple(choices),
            "accepts": accepts or said, "checked": said, "parse": parse, "format": format, "repeat": repeat}
    return field(default=default, metadata=meta)


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
    """One node's settings. `role` is upstream | primary | standby | downstream. Each field is declared by
    `setting`: its meaning and trade-off, what it accepts; the flag, the env var, the check in
    `__post_init__` and docs/settings.md's table all come from that one declaration."""

    role: str = setting("primary", "upstream (Nu), primary (N), standby (N') or downstream (Nd)",
                        choices=("upstream", "primary", "standby", "downstream"))
    name: str = setting("", "the node's name in logs, metrics and messages (default: Nu, N, N', Nd by role)")
    listen: str = setting("127.0.0.1:50051", "host:port the node's gRPC server binds")
    advertise: str = setting("", "host:port peers use to reach this node (default: listen)")
    upstream: str = setting("", "N, N': Nu's address")
    downstream: str = setting("", "N, N': Nd's address")
    primary: str = setting("", "Nu: the primary's address; N': the first primary it watches (empty, or past epoch "
                           "1: Nu's)")
    standby: str = setting("", "Nu: the standby's address (a standby may also register itself)")
    # Lazy Standby knobs
    bsize: int | None = setting(
        10, "tuples per backup batch: 1 = Active Standby (every tuple at N' at once, the most backup traffic) ... "
        "inf = Upstream Backup (nothing shipped until a takeover, which then replays all of it)",
        parse=parse_bsize, format=format_bsize, accepts="a whole number >= 1, or inf")
    codec: CodecName = setting(CodecName.ZSTD_STREAM_DICT, "backup codec: none, zlib, zstd, zstd-dict, zstd-stream, "
                               "zstd-stream-dict (streaming: a session's history compresses each batch against "
                               "the ones before)", choices=tuple(CodecName), parse=CodecName)
    codec_level: int = setting(0, "zstd level; 0 = by codec and Bsize (streaming codecs: 9 at Bsize 1-2, where it "
                               "is cheap, else 1; per-batch frames 3)", low=0)
    dict_samples: int = setting(DICT_SAMPLES, "single tuples sampled before a dictionary codec trains its "
                                "dictionary", low=1)
    dict_size: int = setting(DICT_SIZE, "bytes of the trained zstd dictionary", low=1)
    max_batches_per_rpc: int = setting(
        4096, "backup batches that may share one call (each still compressed on its own). One call is in flight at "
        "a time, so a call's fixed cost caps the backup: more per call moves more tuples, and with backup_lag_max "
        "lets a run end with more tuples not yet at N' (docs/benchmarks.md, Tuning)", low=1)
    backup_linger_ms: float = setting(
        20.0, "ms the backup link gathers due batches into one call unless a full run is due first: fewer calls "
        "(each carries about 50 bytes of framing besides its batches), a standby that lags by up to this much "
        "more, which Nu resends at a takeover; 0 = send at once", low=0)
    passive_backup_linger_ms: float = setting(
        100.0, "backup_linger_ms for a Passive Standby (standby_state snapshot), which reads its backup only at a "
        "takeover: fewer calls for the standby's CPU, that much more for Nu to resend at a takeover", low=0)
    backup_lag_max: int = setting(
        262_144, "most tuples Nu admits ahead of a responsive standby's acks (backpressure), so that the source "
        "never outruns the backup and trims batches never sent; larger: fewer stalls of the source behind a slow "
        "backup call, more to resend at a takeover (docs/benchmarks.md, Tuning); 0 = no bound", low=0)
    standby_replay_max_ms: float = setting(
        0.0, "ms of operator work a takeover may find waiting at the standby: what it holds unprocessed and what "
        "Nu would resend it, at the operator's measured cost per call and per tuple (the standby's view, with each "
        "backup answer); Nu admits no more while above it. A standby slower than its primary then sets the "
        "pipeline's pace: throughput traded for a bounded takeover. Above standby_defer's worth of input, or the "
        "source waits for the defer; 0 = no bound", low=0)
    backup_stall_max: float = setting(
        0.5, "seconds a backup call may go unanswered before Nu stops holding the source for the standby: it is "
        "then out of sync, as a follower that stops fetching leaves Kafka's ISR, and catches up by a checkpoint "
        "when it answers; far above a call's time under load; 0 = wait for rpc_timeout (a paused standby then "
        "stops the pipeline for most of every rpc_timeout)", low=0)
    standby_wait: float = setting(
        1.0, "seconds a freshly started Nu holds its source until its standby registers, so that its first run "
        "does not outpace the registration and stall at backup_lag_max again for a resync; a restarted Nu never "
        "waits; 0 = admit at once", low=0)
    primary_lag_max: int = setting(
        200_000, "most tuples Nu admits ahead of what the primary has taken (backpressure): without it a source "
        "faster than N fills OQu, and the standby's inputs outwait standby_defer and are processed there too; "
        "0 = no bound (OQu's capacity still is one)", low=0)
    standby_defer: float = setting(
        1.0, "seconds a standby lets each backup input wait for Nd's acks to cover it (covered: skipped, never "
        "processed); 0 = process on arrival, as seed 000's standby does, on a second operator's CPU; a window "
        "standby on Spark skips none and takes them on arrival", low=0)
    standby_state: str = setting(
        "warm", "warm (the standby applies every input: a second operator's CPU, a takeover from a state already "
        "there) or snapshot (Passive Standby, seed 001: no operator work; the primary ships its state every "
        "snapshot_interval, and a takeover restores the newest and replays only what follows; window queries on "
        "the Python operator)", choices=("warm", "snapshot"))
    snapshot_interval: float = setting(
        1.0, "seconds between a Passive Standby primary's snapshots (longer: less shipped, more to replay at a "
        "takeover)", above=0)
    # failure detection
    heartbeat_interval: float = setting(0.1, "seconds between the standby's heartbeats to the primary", above=0)
    heartbeat_misses: int = setting(3, "missed heartbeats after which the standby takes over (a refusing port: one "
                                    "interval)", low=1)
    heartbeat_grace: float = setting(
        2.0, "seconds a standby gives a primary it has not heard from yet (a starting one) before missed "
        "heartbeats count; a refusing port or a name that resolves to nothing is suspected after one interval; "
        "0 = none", low=0)
    takeover_lease: float | None = setting(
        None, "seconds Nd declines a takeover after the primary in force last delivered to it "
        "(core.recovery.PrimaryLease): a standby cut off from a primary that still delivers does not depose it. "
        "Above ack_poll_ms (an idle primary renews it that often), below heartbeat_interval (a crashed primary's "
        "lease must run out before a declined standby suspects it again); auto = three quarters of "
        "heartbeat_interval, so that a slower detector's primary, whose deliveries come less evenly, keeps it; "
        "0 = no lease", parse=parse_lease, format=format_lease, low=0,
        accepts="auto or a number of seconds >= 0, below heartbeat_interval")
    operator_stall_max: float = setting(
        10.0, "seconds the primary's operator may leave a call unanswered before the primary stops vouching for "
        "itself (core.recovery.OperatorWatch): its standby takes over, its lease at Nd lapses. Far above a call's "
        "time, a cold JVM's first call included (docs/benchmarks.md, Tuning); shorter replaces a hung operator "
        "sooner and takes a slow call for a hang more easily; 0 = never (an operator that failed is still said "
        "at once)", low=0)
    exit_when_fenced: bool = setting(
        False, "a fenced node (a primary deposed while it ran) exits (code 75) so that a supervisor starts it "
        "again and it rejoins as the standby (RoleState.rejoin; the compose stack, launch and failover-check turn "
        "it on); off: it stays up, fenced, and says so in its status and metrics")
    handover_on_stop: bool = setting(
        True, "a primary asked to stop (SIGTERM, SIGINT: docker stop, a rolling upgrade) first hands over: it "
        "takes no more input, ends its lease at Nd, and tells its standby, which takes over at once instead of "
        "after the detector's timeout; a second signal stops it at once; off: it just stops")
    rpc_timeout: float = setting(2.0, "seconds a call to a peer may take", above=0)
    # framing and queues
    frame_max: int = setting(
        32_768, "most tuples per frame on every link. A link has one call in flight, so its rate is a frame per "
        "round trip: larger frames move more tuples per round trip and steady the seconds, at more memory per "
        "node (docs/benchmarks.md, Tuning); a frame fills only while a link is behind", low=1)
    linger_ms: float = setting(
        5.0, "ms a link waits to fill a frame before it sends, and Nu before it polls a source that had less than "
        "a frame: below capacity each frame costs about the same, so longer means less CPU and more latency per "
        "tuple (docs/benchmarks.md, Tuning; Kafka's producer linger.ms is 5 too)", above=0)
    ack_poll_ms: float = setting(50.0, "ms between an idle link's polls for acks (and a primary's word from Nu)",
                                 above=0)
    oq_capacity: int = setting(2_000_000, "most tuples an output queue holds (Nu's OQu, N's OQ); beyond it, "
                               "backpressure", low=1)
    iq_capacity: int = setting(200_000, f"most tuples an input queue holds (a standby's IQ': {STANDBY_IQ_FACTOR} "
                               "times this); beyond it, RESOURCE_EXHAUSTED to the sender", low=1)
    max_tuple_bytes: int = setting(65536, "larger source records go to the dead letters; larger tuples are refused",
                                   low=1)
    max_message_bytes: int = setting(64 << 20, "largest gRPC message, and largest decoded backup batch", low=1)
    malloc_keep_mb: int = setting(
        64, "MB of freed memory each node's malloc keeps for reuse (allocator.keep_freed_memory), so that a "
        "frame's buffers come from memory already mapped: fewer page faults, a higher peak RSS "
        "(docs/benchmarks.md, Tuning); 0 = glibc's own thresholds", low=0, high=KEEP_MB_MAX)
    # operator
    operator: str = setting("python", "python or spark", choices=("python", "spark"))
    predicate: str = setting("price > 100", "the selection: a Spark-SQL boolean expression over symbol, price, "
                             "volume, ts, venue")
    query: str = setting(
        "", "what N and N' compute: empty = the selection by predicate; else SQL over the tick table (SELECT * "
        "FROM ticks [WHERE ...], or keys and aggregates GROUP BY window(ts, '<size>'[, '<slide>']), <keys>), or an "
        "example's name (select, window). A window query is stateful: every node of the pipeline (Nu too: it "
        "places the watermarks) runs the same text")
    lateness_ms: int = setting(
        0, "a tick window query's lateness in ms (the tick table's WATERMARK delay): longer drops fewer ticks as "
        "late and holds every result back as long; a pipeline's tables declare their own", low=0)
    pipeline: str = setting(
        "", "a pipeline file (examples/*.sql, docs/sql.md): its tables (each a source stream, its topic and "
        "format), SQL query, sink and SET settings (below any flag or env var); replaces query, predicate and "
        "streams")
    stage: int = setting(
        0, "which stage of a pipeline file of several (one per CREATE VIEW and per other query, in the file's "
        "order) this node runs, from 1; 0 = the file's only one. Each stage has its own nodes and topics "
        "(under topic_prefix)", low=0)
    watermark_every: int = setting(
        1024, "a window query's watermark period in link positions: Nu places a watermark record at every "
        "multiple, and windows close only there; more positions cost fewer merges of the open state and hold a "
        "final window's results longer (at 100,000 tuples/s, 1,024 is 10 ms)", low=2)
    watermark_idle: int = setting(
        0, "Python operator: positions without a tick after which a stream stops holding the watermark back "
        "(0: never, as Flink without idleness; lower: windows close despite a quiet stream, whose later ticks may "
        "then be late). With Spark the watermark is the largest event time on any stream", low=0)
    chaos_poison: str = setting(
        "", "chaos tests only: the Python operator fails on every input holding this text, as on a value it "
        "cannot compute with, and the node quarantines those inputs (no admitted tick fails the built-in "
        "operators); empty: never")
    operator_batch: int = setting(
        0, "most tuples per operator call; 0 = by operator: 32,768 (python), 131,072 (spark: a micro-batch costs "
        "nearly the same for four times the tuples, so bigger calls mean more throughput at saturation)", low=0)
    spark_master: str = setting("local[2]", "Spark master URL for the Spark operator")
    spark_driver_memory: str = setting("1g", "spark.driver.memory of the node's Spark session")
    spark_trigger: str = setting("0 seconds", "the query's processing-time trigger")
    spark_max_rows: int = setting(200_000, "most feed rows per micro-batch", low=1)
    spark_partitions: int = setting(2, "input partitions per micro-batch", low=1)
    spark_standby_hold: float = setting(
        0.0, "seconds a standby's query lets backup tuples wait (or until spark_max_rows wait) to run them in one "
        "micro-batch: fewer micro-batches for its JVM, and a takeover that starts with up to this much work "
        "left; 0 = the standby runs as the primary does", low=0)
    spark_checkpoint_dir: str = setting("", "where the query's checkpoints go (default: a fresh directory in "
                                        "TMPDIR, where the Spark driver's scratch goes too)")
    spark_state_store: str = setting(
        "hdfs", "where a window query's Spark state lives: hdfs (Spark's default: in the JVM's heap, each version "
        "written to the checkpoint) or rocksdb (off heap, on local disk: state larger than the heap, at a cost "
        "per key read)", choices=("hdfs", "rocksdb"))
    spark_conf: tuple[str, ...] = setting(
        (), "any Spark setting, key=value, passed to the node's session after ours (yours win): repeat the flag, "
        "';' between them in the env var", parse=lambda t: parse_spark_conf(t), format=lambda v: ";".join(v),
        repeat=True, accepts="spark.key=value items")
    spark_feed_bind: str = setting("127.0.0.1:0", "host:port the node serves its feed to Spark's workers on (port 0: "
                                   "any free one); on a cluster, an interface the workers reach")
    spark_feed_advertise: str = setting("", "host[:port] Spark's workers reach the feed at (default: the bound "
                                        "address); on a cluster, this host's name")
    # source (Nu): the deterministic generator
    streams: str = setting("I1,I2", "source stream names, comma-separated")
    seed: int = setting(7, "the generator's seed (same seed, same tuples)")
    keys: int = setting(0, "distinct symbols the generator draws from (K0, K1, ...): a window query's state grows "
                        "with it; 0 = the ten named symbols", low=0, high=1_000_000)
    total: int = setting(0, "tuples the generator makes; 0 = forever", low=0)
    rate: float = setting(0.0, "tuples/s the generator makes; 0 = as fast as the pipeline takes them", low=0)
    # Kafka
    kafka_bootstrap: str = setting("", "Kafka bootstrap servers (also KAFKA_BOOTSTRAP): Nu consumes the source "
                                   "topics and Nd writes the results topic; empty = the generator and a file sink")
    topic_prefix: str = setting("ls.", "prefix of every topic the pipeline uses")
    partitions: int = setting(1, "partitions of each source topic, each one a stream of its own in the link order "
                              "(seq = offset + 1); a source topic that exists with another count is refused; "
                              "other topics have one", low=1)
    replication_factor: int = setting(1, "replication factor of the topics the pipeline creates", low=1)
    # sink (Nd)
    sink: str = setting("", "Nd without Kafka: a file of delivered outputs; empty = keep counts only")
    # mutual TLS between nodes (deploy/tls/make-certs.sh)
    tls_ca: str = setting("", "mutual TLS: the CA certificate (all three empty = plaintext, for loopback)")
    tls_cert: str = setting("", "mutual TLS: this node's certificate (its role in the common name, ROLE:NAME)")
    tls_key: str = setting("", "mutual TLS: this node's private key")
    # observability
    metrics_port: int = setting(0, "port of the Prometheus /metrics endpoint; 0 = off", low=0)
    overhead_budget: float = setting(0.5, "backup/primary bytes above which BandwidthOverheadAboveBudget fires")
    recovery_target_ms: float = setting(
        0.0, "ms the predicted recovery (core.recovery_model) may take; RecoveryTargetAtRisk fires while it is "
        "above; 0 = none", low=0)
    log_level: str = setting("INFO", "DEBUG, INFO, WARNING or ERROR")
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Every value checked here, once, with an error that names the setting (SettingError): first what
        each setting declares it accepts, then what one setting asks of another."""
        for name in ("codec", "bsize", "takeover_lease"):  # given as their text or as their value
            try:
                setattr(self, name, _FIELDS[name].metadata["parse"](getattr(self, name)))
            except (TypeError, ValueError):
                raise refuse(name, _accepts(name), getattr(self, name)) from None
        for f in fields(self):
            _check_declared(f, getattr(self, f.name))
        if self.chaos_poison and self.operator != "python":
            raise refuse("chaos_poison", "empty with the Spark operator (a failed micro-batch ends its query: it "
                         "quarantines nothing)", self.chaos_poison)
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
        if q is not None and q.stateful and self.operator == "spark" and q.slide_ms != q.size_ms:
            # A tick of sliding windows may lie in some already final at its position: the Python operator
            # leaves those out, while Spark's query, whose watermark moves only between micro-batches,
            # would count it in them.
            raise refuse("query", "tumbling windows with the Spark operator (no slide)", self.query)
        if stateful and self.chaos_poison:
            raise refuse("chaos_poison", "empty with a window query (a stateful call cannot be retried on part of "
                         "its inputs, so nothing is quarantined)", self.chaos_poison)
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
        """The bounds one number takes from another."""
        if self.takeover_lease is not None and not self.takeover_lease < self.heartbeat_interval:
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
        lapse: a busy primary's frames come late by more than the gap between ack_poll_ms and a short lease
        (the Spark operator's 75 ms against 50 ms), and a lapsed lease lets a standby depose it."""
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


def _check_declared(f, value: Any) -> None:
    """What setting `f` declares it accepts (`setting`), or a SettingError that names it."""
    m = f.metadata
    if not m:
        return
    if m["choices"] and value not in m["choices"]:
        raise refuse(f.name, m["checked"], value)
    low, high, above = m["low"], m["high"], m["above"]
    if value is None or (low is None and high is None and above is None):
        return
    if (low is not None and value < low) or (high is not None and value > high) or \
            (above is not None and not value > above):
        raise refuse(f.name, m["checked"], value)


def settings_markdown() -> str:
    """The settings table of docs/settings.md, from each setting's declaration."""
    rows = ["| setting | flag | env | default | accepts | meaning |", "|---|---|---|---|---|---|"]
    for f in fields(NodeConfig):
        if f.name == "extra":
            continue
        default = to_text(f.name, f.default) if f.default is not MISSING else ""
        shown = f"`{default}`" if default else "(empty)"
        rows.append(f"| `{f.name}` | `--{f.name.replace('_', '-')}` | `LS_{f.name.upper()}` | {shown} | "
                    f"{_accepts(f.name)} | {f.metadata['help']} |")
    return "\n".join(rows) + "\n"


_FIELDS = {f.name: f for f in fields(NodeConfig)}
_HINTS = get_type_hints(NodeConfig)  # each setting's type, the annotations read once


def parse_spark_conf(text: str) -> tuple[str, ...]:
    """`key=value` items separated by ';' or new lines; a key is a Spark setting (spark.*)."""
    items = tuple(i.strip() for i in text.replace("\n", ";").split(";") if i.strip())
    for item in items:
        key, eq, _ = item.partition("=")
        if not eq or not key.strip().startswith("spark."):
            raise ValueError(item)
    return items


_BOOLS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}
_ACCEPTS = {int: "a whole number", float: "a number", str: "text", bool: "true or false (also 1/0, yes/no, on/off)"}


def _accepts(name: str) -> str:
    """What setting `name` accepts, in words: its declared bounds or choices, else its type's."""
    m = _FIELDS[name].metadata
    return m["accepts"] or _ACCEPTS.get(_HINTS[name], "text")


def _convert(name: str, typ: Any, text: str) -> Any:
    parse = _FIELDS[name].metadata.get("parse")
    try:
        if parse is not None:
            return parse(text)
        if typ is bool:
            return _BOOLS[text.strip().lower()]
        return typ(text)
    except (TypeError, ValueError, KeyError):
        raise refuse(name, _accepts(name), text) from None


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
    parser = OneLineParser(prog="lazystandby node", description=NodeConfig.__doc__)
    values: dict[str, Any] = {}
    for f in fields(NodeConfig):
        if f.name == "extra":
            continue
        typ = _HINTS[f.name]
        envname = f"LS_{f.name.upper()}"
        if envname in env:
            values[f.name] = _convert(f.name, typ, env[envname])
        default = f.default if f.default is not MISSING else None
        parser.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, default=None,
                            action="append" if f.metadata.get("repeat") else "store",
                            help=f"{f.metadata['help'].replace('%', '%%')} (accepts {_accepts(f.name)}; env {envname}, "
                                 f"default {to_text(f.name, default) if default is not None else 'auto'!r})")
    args = parser.parse_args(argv)
    for f in fields(NodeConfig):
        given = getattr(args, f.name, None) if f.name != "extra" else None
        if given is not None:
            values[f.name] = _convert(f.name, _HINTS[f.name], ";".join(given) if f.metadata.get("repeat") else given)
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

    return choose(pipeline_stages(path), stage, path)


@functools.lru_cache(maxsize=8)
def pipeline_stages(path: str):
    """A pipeline file's stages (formats/pipeline.read_stages), read once per process: every node of a
    pipeline, and the harness that runs it, read the same file again and again."""
    from .formats.pipeline import read_stages

    return read_stages(path)


def pipeline_settings(path: str) -> dict[str, Any]:
    """The settings a pipeline file SETs, typed (below any flag or env var); a name that is no setting, or
    a value it does not accept, is a SettingError that names the file."""
    try:
        sets = pipeline_stages(path)[0].settings  # the file's, the same in every stage
    except ValueError as e:
        raise SettingError(f"{_setting('pipeline')}: {e}") from None
    out = {}
    for name, text in sets:
        if name not in _FIELDS or name in ("extra", "pipeline", "stage"):
            raise SettingError(f"{path}: SET {name}: no such setting (lazystandby node --help)")
        out[name] = _convert(name, _HINTS[name], text)
    return out


if __name__ == "__main__":
    print(settings_markdown(), end="")
