"""Every JSON summary the project prints, declared once: each command's keys and what each means.

The summaries are built through `dumps` (which refuses a key this module does not declare, so a new key
cannot reach a user undocumented), and `docs/results.md` is generated from the same declaration
(`python -m lazystandby.harness.results > docs/results.md`; a unit test keeps it current). Keys are the
project's public interface: add keys, never rename one.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any


class UndeclaredResultKey(KeyError):
    """A summary carries a key its command's declaration lacks: declare it here (and regenerate
    docs/results.md) before printing it."""


@dataclass(frozen=True)
class Summary:
    """One command's JSON summary: the commands that print it, and its keys with their meanings, in the
    order a reader meets them."""

    title: str
    commands: str
    keys: tuple[tuple[str, str], ...]

    def names(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.keys)


_WHAT_RAN = (
    ("bsize", "the backup batch size every node ran with (`inf`: Upstream Backup)"),
    ("codec", "the backup codec"),
    ("operator", "`python` or `spark`"),
    ("kafka", "true when the source and the results were Kafka topics"),
    ("predicate", "the selection every operator ran"),
    ("query", "the query every operator ran, in its text form (formats/query.py; a selection unless `--query`; "
              "a pipeline's SQL with `--pipeline`)"),
    ("pipeline", "the pipeline file every node ran (`--pipeline`, `lazystandby run`; docs/sql.md), null without one"),
    ("seed", "the generator's seed (the same seed gives the same tuples)"),
    ("keys", "distinct symbols the generator drew from (0: the ten named symbols)"),
    ("heartbeat_interval", "seconds between the standby's heartbeats"),
    ("heartbeat_misses", "missed heartbeats before the standby takes over"),
    ("exit_when_fenced", "a fenced node exits (75) and is started again (on in launch and failover-check)"),
    ("handover_on_stop", "a primary asked to stop hands over to its standby first"),
    ("standby_state", "`warm` (the standby applies the backup to its state) or `snapshot` (Passive Standby: "
                      "it holds the primary's snapshots and the backup after them)"),
    ("fault", "the fault injected (a name from the catalog, docs/faults.md)"),
    ("tls", "the nodes ran mutual TLS with a CA made for the run (false only with `--insecure`)"),
    ("link", "`--link`: the shaped link each node sent through (`link`, `rate_bps`, `delay_ms`, and "
             "`delay_applied`: false where the kernel has no netem); null on loopback"),
)

_MACHINE = (
    ("seconds", "wall time of the whole command"),
    ("cpu", "the CPU model the run had"),
    ("cores", "cores the run had"),
    ("load_1m", "the machine's one-minute load average at the end"),
)

SUMMARIES: dict[str, Summary] = {
    "launch": Summary("One run with a fault", "`make demo`, `make demo-local`, `lazystandby launch`", (
        ("source_tuples", "ticks written to the source"),
        ("expected_output", "outputs the truth table expects"),
        ("output_tuples", "outputs Nd holds at the end"),
        ("lost", "expected outputs missing at Nd (must be 0)"),
        ("duplicated", "outputs Nd holds more than once (must be 0)"),
        ("out_of_order", "outputs out of their stream's order (must be 0)"),
        ("wrong", "a window query's results whose window and keys are expected but whose aggregates differ (must be "
                  "0)"),
        ("late", "a window query's ticks behind the watermark at their position, which Nu sent to the late data"),
        ("failovers", "takeovers Nd accepted"),
        ("takeovers_declined", "takeovers Nd declined because the primary in force still delivered (its lease)"),
        ("primary_longest_silence_ms", "the longest the primary in force went without reaching Nd"),
        ("takeover_lease_ms", "the lease a delivery gives the primary at Nd"),
        ("failover_ms", "from the fault to the new primary live (every input Nu held at takeover done)"),
        ("standby_cpu_ratio", "the standby's CPU over the primary's, each since its first input, at the fault"),
        ("predicted_recovery_ms", "the standby's predicted recovery just before the fault (detection, reconnection, "
                                  "Nu's resend at the link's measured cost, the replay at the operator's measured "
                                  "rate: core/recovery_model.py); null when it had none"),
        ("recovery_target_ms", "`--recovery-target-ms`: the recovery-time objective Nu chose Bsize for (null: none)"),
        ("bsize_chosen", "the Bsize Nu had chosen for it when the fault came (null without a target)"),
        ("target_met", "whether that Bsize's predicted recovery met the target (false: none did; Bsize 1)"),
        ("standby_replay_max_ms", "`--standby-replay-max-ms`: the operator work a takeover may find waiting at the "
                                  "standby, which Nu held its source for (null: no bound)"),
        ("source_waited_for_replay", "times Nu's source waited for the standby's backlog to fall under that bound"),
        ("standby_defer_chosen", "with a target, the standby_defer a warm standby chose for it (null otherwise)"),
        ("snapshot_interval_chosen", "with a target, the snapshot_interval a Passive Standby chose for it (null "
                                     "otherwise)"),
        ("failover_cause", "`detector` (missed heartbeats), `handover` (the primary said it was leaving) or empty"),
        ("detection_ms", "from the standby's last heartbeat answered to its suspicion (starts before the fault)"),
        ("reconnection_ms", "from the suspicion until Nd and Nu both accepted the takeover"),
        ("data_recovery_ms", "from then until the new primary was live"),
        ("replayed_from_oq", "outputs the new primary sent from its own OQ'"),
        ("resent_by_nu", "tuples Nu sent again at the takeover"),
        ("backlog_at_takeover", "inputs the standby held unprocessed and uncovered when it took over"),
        ("catch_up_ms", "the part of `data_recovery_ms` the new primary's operator took to reach Nu's head"),
        ("overhead", "backup bytes over primary bytes on Nu's links (seed 000's definition)"),
        ("dead_letters", "source records in the dead-letter topic (distinct stream:seq; Kafka runs), else refused"),
        ("bad_records", "source records the truth table refuses (`--bad-records`): each must be a dead letter"),
        ("dead_letters_exact", "the dead letters are exactly the bad records, one for one (Kafka runs)"),
        ("restarted", "places whose node ended itself (exit 70 or 75) and was started again as the standby"),
        ("standby_at_end", "Nu backs up to a standby in sync at the end"),
        ("quarantined", "per operator place, the input positions its node quarantined (the operator failed on "
                        "each alone); the same positions on N and N' where both processed them"),
        *_WHAT_RAN,
        ("stages", "a pipeline of several stages (null otherwise): per stage, `stage`, `fault` (`none` where it did "
                   "not hit), `expected_output`, `output_tuples`, `lost`, `duplicated`, `wrong`, `failovers`, "
                   "`failover_ms`, `ok`, and what weighs on a failover: `admitted_at_fault` (Nu's head when the "
                   "fault hit), `standby_in_sync_at_fault` (whether Nu then counted the standby in sync), "
                   "`standby_out_of_sync` (the times Nu counted it out of sync), `primary_longest_silence_ms` (the "
                   "longest Nd went without hearing the primary); the summary's outputs are then the last stage's, "
                   "its `lost`, `duplicated`, "
                   "`wrong` and `failovers` summed over the stages, its failover figures the slowest stage's"),
        ("ok", "the output is exact and the run completed (restarted nodes rejoined in sync)"),
    )),
    "failover-check": Summary("Repeated kills of the primary", "`make failover-check KILLS=n`", (
        ("trials", "trials run, one fault each"),
        ("lost", "outputs missing, summed over the trials"),
        ("duplicated", "outputs repeated, summed over the trials"),
        ("failed_trials", "trials that were not exact or did not complete"),
        ("wrong", "window results with the right window and keys but other aggregates, summed over the trials"),
        ("failed_workdirs", "where the failed trials' logs are"),
        ("recovery_ms_p50", "median time from the fault to the new primary live"),
        ("recovery_ms_p95", "95th percentile of the same"),
        ("recovery_ms_max", "slowest trial's recovery"),
        ("detection_ms_p50", "median detection time"),
        ("takeovers_declined", "takeovers Nd declined, summed (each adds about a heartbeat interval)"),
        ("handovers", "trials whose takeover was a handover (`FAULT=stop-primary`)"),
        ("handover_notices", "trials whose standby heard the leaving primary's notice"),
        *_WHAT_RAN,
    )),
    "chaos-campaign": Summary("Faults drawn at random",
                              "`make chaos-campaign RUNS=n` (each run in run/chaos-campaign.json)", (
        ("runs", "runs made, one fault (single or pair) each"),
        ("lost", "outputs missing, summed over the runs"),
        ("duplicated", "outputs repeated, summed over the runs"),
        ("wrong", "window results with the right window and keys but other aggregates, summed over the runs"),
        ("query", "the query every run computed (a selection unless `--query`; a pipeline's SQL with `--pipeline`)"),
        ("pipeline", "the pipeline file every run ran (`--pipeline`), null without one"),
        ("stalled", "runs whose output did not complete within `bound_s`"),
        ("double_faults", "runs whose fault was a pair (`a+b`)"),
        ("across_stages", "a pipeline of several stages: runs whose pair hit two stages at once (`a@1+b@3`)"),
        ("failed_runs", "runs not exact, stalled, or whose harness failed"),
        ("harness_errors", "runs in which the harness itself raised"),
        ("bound_s", "seconds a run's output may take to complete"),
        ("seed", "the draws' seed (the same seed repeats them)"),
        ("bsize", "every run's Bsize"),
        ("codec", "every run's backup codec"),
        ("faults", "runs per fault drawn"),
        *_MACHINE,
    )),
    "chaos": Summary("One fault on the compose stack", "`make chaos FAULT=name` (one line per fault)", (
        ("fault", "the fault's name"),
        ("expect", "the behaviour the catalog expects"),
        ("pipeline", "the stack's pipeline file (LS_PIPELINE), null for the tick example"),
        ("lost", "outputs missing from the results topic"),
        ("duplicated", "outputs repeated in the results topic"),
        ("expected", "outputs the truth table expects"),
        ("got", "outputs the results topic holds"),
        ("wrong", "as for `launch` (a window query, `LS_QUERY`, or a pipeline)"),
        ("recovery_ms", "from the first step to the last takeover live (null: none)"),
        ("new_primary", "the node that took over last, or null"),
        ("check_error", "why the last truth-table check could not run, if it could not"),
        ("failover_cause", "as for `launch`"),
        ("leases_released", "handovers Nd took (one per primary stopped with `docker stop`)"),
        ("handover_notices", "notices of a leaving primary that a standby heard"),
        ("standby_out_of_sync", "times Nu stopped waiting for a standby past `backup_stall_max`"),
        ("standby_in_sync", "Nu's standby is in sync at the end"),
        ("codec_backend", "what compressed Nu's backup in its container"),
        ("roles", "each node's role at the end"),
        ("takeovers_declined", "as for `launch`"),
        ("primary_longest_silence_ms", "as for `launch`"),
        ("ok", "0 lost, 0 duplicated, 0 wrong or unexpected, a takeover if the fault must cause one, restarted "
               "nodes back"),
        ("steps", "each step's action, target and seconds after the first (a spare started, an exit code)"),
        ("link", "with LS_LINK: the link the node containers' egress was shaped to (preset, rate_bps, delay_ms, "
                 "delay_applied, services); null: unshaped"),
        ("rounds", "`kill-primary-repeatedly`: the epoch and recovery of each round"),
        ("restarted", "operator nodes compose started again: restarts, role, epoch, backed_up, rejoined (the "
                      "standby Nu backs up to, or the primary it pushes to, in its epoch); before_fault: restarted "
                      "before the fault and in its cast, so rejoined then"),
        ("cast", "per stage the fault hit: the primary and standby services and the epoch when it began (its "
                 "roles name these nodes)"),
        ("stages", "a pipeline of several stages (LS_PIPELINE): per stage, `stage`, its check's `expected`, `got`, "
                   "`lost`, `duplicated`, `wrong`, and `recovery_ms` where the fault hit it (null elsewhere); "
                   "`lost`, `duplicated` and `wrong` above are summed over the stages, `expected` and `got` are "
                   "the last stage's, the failover figures the stage's whose takeover came last"),
        ("logs", "where every container's logs went (a failed fault)"),
        ("error", "what broke the runner (a failed fault)"),
    )),
    "stack-check": Summary("The truth-table check inside the stack", "`lazystandby stack-check`", (
        ("nodes", "each named node's status"),
        ("expected", "outputs the truth table expects"),
        ("got", "outputs the results topic holds"),
        ("lost", "outputs missing"),
        ("duplicated", "outputs repeated"),
        ("unexpected", "outputs the truth table does not expect"),
        ("out_of_order", "outputs out of their stream's order"),
        ("malformed", "source records the truth table skipped as malformed"),
        ("diff", "the first differences, for a reader"),
        ("wrong", "a window query's results with the expected window and keys but other aggregates"),
        ("late", "a window query's ticks Nu left out as late (valid, but not in its link log)"),
        ("admitted_all", "a window query: Nu had read every source record when the truth table was rebuilt"),
    )),
    "bench-window": Summary("The window query's benchmark", "`make bench-window` (details in run/bench/window.json)", (
        ("window_query", "the query of the throughput runs (the `window` example)"),
        ("window_throughput_tuples_per_s", "Python operator, standby on, Kafka source and results topic: ticks/s"),
        ("window_throughput_no_ha_tuples_per_s", "the same without a standby"),
        ("window_failover_query", "the query of the failover runs (one 30-minute window: the state holds every key)"),
        ("window_failover_ms_by_keys", "per key count of the generator: the median failover, kill to live"),
        ("window_live_keys_at_kill", "per key count: the standby's partial groups held at the kill"),
        ("window_failover_ratio_1m_over_1k", "failover at 1,000,000 keys over that at 1,000 (goal at most 1.5)"),
        ("window_failover_trials", "kills per key count"),
        ("window_throughput_tuples", "ticks per throughput run"),
        ("flink_window_eos_tuples_per_s", "Flink, the same query and topics, RocksDB, exactly-once sink: ticks/s"),
        ("kstreams_window_eos_tuples_per_s", "Kafka Streams, the same query and topics, exactly_once_v2: ticks/s"),
        ("window_throughput_over_flink", "ours (standby on) over Flink's (goal at least 2)"),
        ("window_throughput_over_kstreams", "ours (standby on) over Kafka Streams' (goal at least 2)"),
        ("window_no_ha_cpu_us_per_tuple", "the run without a standby: every node's CPU from Nu's first admission "
                                          "to the last result, microseconds per tick"),
        ("window_operator_us_per_tuple", "the Python operator alone over generated ticks, one thread, calls of "
                                         "32,768: microseconds per tick (the least of 3 passes)"),
        ("window_throughput_bound_tuples_per_s", "the most a warm standby allows on these cores: cores over the two "
                                                 "figures above, summed (the standby applies every tick)"),
        ("window_throughput_bound_over_flink", "that bound over Flink's ticks/s: the best ratio this machine allows"),
        ("window_throughput_bound_over_kstreams", "that bound over Kafka Streams' ticks/s"),
        ("flink_window_failover_ms_by_keys", "per key count: Flink restarted from its newest checkpoint, kill to "
                                             "the first input after the kill applied"),
        ("kstreams_window_failover_ms_by_keys", "per key count: Kafka Streams' standby replica taking over, kill "
                                                "to the first input after the kill applied"),
        ("flink_window_failover_over_ours_1m", "at 1,000,000 keys: Flink's failover over ours (goal at least 10)"),
        ("kstreams_window_failover_over_ours_1m", "at 1,000,000 keys: Kafka Streams' over ours (goal at least 10)"),
        *_MACHINE,
    )),
    "bench-nexmark": Summary("Nexmark beside Flink SQL", "`make bench-nexmark` (details in run/bench/nexmark.json)", (
        ("queries", "per query (q0, q1, q2; q5 and q7's first stages): `events_per_s` (ours, Python operator, warm "
                    "standby, Nu's first admission to Nd holding every result), `cpu_us_per_event` (every node's "
                    "CPU over that span), `outputs`, `flink_events_per_s` (Flink SQL, the same query and topic, "
                    "RocksDB, exactly-once sink; differential over a small run, so its start-up counts in "
                    "neither), `vs_flink`, `failover_ms` (each kill of ours, kill to live) and its "
                    "`failover_ms_p95`, `flink_failover_ms` (the job killed under load and restarted from its "
                    "newest checkpoint: kill to its first committed result), `flink_failover_over_ours`, "
                    "`spark_events_per_s` (the plan as one Spark Structured Streaming query over the topic, "
                    "availableNow, after its first micro-batch) and `vs_spark`; "
                    "windowed ones also `passive_events_per_s` (Passive Standby) and `passive_vs_flink`"),
        ("events", "bids in the topic every throughput run reads (the nexmark crate's generator)"),
        ("kills", "failover trials of ours per query"),
        ("vs_flink_min_selections", "the least `vs_flink` of q0, q1 and q2 (goal at least 2)"),
        ("vs_flink_min_windowed", "the least `vs_flink` of the windowed queries (goal at least 1)"),
        *_MACHINE,
    )),
    "bench-spark-cycle": Summary("What a Spark window micro-batch costs",
                                 "`make bench-spark-cycle` (details in run/bench/spark-cycle.json)", (
        ("spark_window_call_ms", "the node's Spark window operator answering a call of 5,000 ticks (a watermark "
                                 "record every 500): median ms from submit to the call's results"),
        ("spark_window_data_batch_ms", "its micro-batches that read rows: median `triggerExecution`, ms"),
        ("spark_window_emit_batch_ms", "its micro-batches that read nothing (Spark evicting closed windows): "
                                       "median `triggerExecution`, ms; null when none ran"),
        ("spark_jvm_batch_ms", "the same aggregation over Spark's rate source into the noop sink (no Python on "
                               "the path): median `triggerExecution`, ms"),
        ("spark_window_batch_over_jvm", "the node's data micro-batch over the JVM's: what the feed adds"),
        ("call_ticks", "ticks per timed call"),
        ("record_every", "positions between watermark records in the timed calls"),
        ("jvm_rows_per_s", "rows per second of the rate source"),
        *_MACHINE,
    )),
    "bench-links": Summary("Seed 000's trade-off on shaped links",
                           "`make bench-links` (details in run/bench/links.json)", (
        ("links", "per link preset, per Bsize: `overhead` (backup / primary bytes at Nu), `failover_ms_p50` and "
                  "`failover_ms_p95` (kill to live), the phases `detection_ms`, `reconnection_ms` and "
                  "`data_recovery_ms` (medians), `resent_by_nu` (median), `predicted_ms` (the standby's "
                  "predicted recovery before the kill, median), `exact` (every trial's output)"),
        ("query", "the query of every trial (the `window` example: a standby without the backup rebuilds its "
                  "open windows from Nu)"),
        ("rate", "the source rate of every trial, ticks/s"),
        ("trials", "kills of N per cell"),
        ("failover_ratio_inf_over_1", "per link: the failover p50 at Bsize inf over that at Bsize 1 (goal at "
                                      "least 3 on 10mbit)"),
        ("overhead_ratio_1_over_10000", "per link: the overhead at Bsize 1 over that at Bsize 10,000 (goal at "
                                        "least 3 on 10mbit)"),
        ("model_error_p95", "over every trial, |predicted - measured| / measured failover, 95th percentile (a "
                            "trial without a prediction counts 1; goal at most 0.25)"),
        ("model_error_p50", "the same, median"),
        ("model_error_p95_data_measured", "`model_error_p95` with each trial's resend and replay terms replaced by "
                                          "its measured data recovery: the error the detection and reconnection "
                                          "terms leave (null: no trial predicted)"),
        ("model_error_p95_detection_measured", "`model_error_p95` with each trial's detection term replaced by its "
                                               "measured time from the kill to the suspicion: the error the "
                                               "reconnection and data terms leave (null: no trial predicted)"),
        ("standby_states", "per standby state, `warm`, `snapshot` (Passive Standby, at the setup's `bsize`) and "
                           "`snapshot_inf` (Passive Standby at Bsize inf: only the snapshots reach the standby, as "
                           "in seed 001), the window query over a million keys: `backup_bytes_per_s` (Nu's "
                           "backup and the primary's snapshots, before "
                           "the kill), `snapshot_bytes_per_s` (the snapshots alone), `standby_cpu_ratio` (the "
                           "standby's CPU over the primary's since their first input, median; goal at most 0.1 for "
                           "`snapshot`), `failover_ms_p50`, `failover_ms_p95`, `exact`"),
        ("standby_states_setup", "how `standby_states` ran: `link`, `keys`, `rate`, `bsize` (but `snapshot_inf`'s), "
                                 "`snapshot_interval`, "
                                 "`seconds` of load per trial, `kill_after_s`"),
        ("exact", "every trial's output was exact"),
        ("delay_applied", "the presets' delay was applied (false where the kernel has no netem: rate alone)"),
        *_MACHINE,
    )),
    "dashboards-check": Summary("Every dashboard query against a real Prometheus", "`make dashboards-check`", (
        ("dashboards", "dashboards read from grafana/dashboards"),
        ("panels", "their panels"),
        ("queries", "panel queries run"),
        ("empty", "queries that returned nothing (must be 0)"),
        ("errors", "queries that failed (must be 0)"),
        ("failovers", "takeovers during the check (N is killed once)"),
        ("pngs", "the renders written (run/dashboards, or docs/dashboards with PUBLISH=1)"),
    )),
    "bench": Summary("The benchmark", "`make bench-quick`, `make bench` (full results in run/bench/<name>.json)", (
        ("tradeoff", "per Bsize and codec: `overhead`, mean `recovery_ms`, `vs_uncompressed` (wire bytes over "
                     "the same batches uncompressed)"),
        ("throughput_tuples_per_s", "Python operator, Bsize 10, zstd-stream-dict, standby on: the median run"),
        ("throughput_no_ha_tuples_per_s", "the same with no standby"),
        ("ha_cost_ratio", "the two above, with over without (goal 0.95)"),
        ("ha_cost_ratio_rounds", "that ratio within each round (the runs take turns)"),
        ("tls_cost_ratio", "the standby-on run with mutual TLS (every throughput figure's) over the same plaintext, "
                           "run back to back"),
        ("tls_cost_ratio_rounds", "that ratio in each round that ran the pair"),
        ("throughput_plaintext_tuples_per_s", "the standby-on configuration plaintext (`--insecure`)"),
        ("backup_coverage", "share of the tuples N' received once the backup caught up"),
        ("backup_skipped", "positions never sent to N' because Nd's acks covered them first"),
        ("backup_behind_at_end", "tuples N' had not acknowledged when Nd got the last output"),
        ("standby_decoded_ratio", "share of the backup N' received that it decoded"),
        ("worst_second_ratio", "the slowest full second over the mean, from N's first frame (standby on)"),
        ("worst_second", "which second that was (1: the first)"),
        ("worst_second_ratio_rounds", "the same in each round"),
        ("no_ha_worst_second_ratio", "the same with no standby: how much the machine's seconds vary alone"),
        ("no_ha_worst_second_ratio_rounds", "the same in each round"),
        ("worst_second_ratio_from_start", "the slowest second counted from Nu's start (the fill included)"),
        ("worst_second_ratio_from_start_rounds", "the same in each round"),
        ("no_ha_worst_second_ratio_from_start", "the same with no standby"),
        ("first_output_ms", "from Nu's start to N's first frame done (the pipeline's fill)"),
        ("no_ha_first_output_ms", "the same with no standby"),
        ("max_rss_mb", "peak resident memory per node (goal 300)"),
        ("ha_cpu_us_per_tuple", "every node's CPU per tuple, standby on"),
        ("no_ha_cpu_us_per_tuple", "the same with no standby"),
        ("cpu_us_per_tuple_by_node", "`ha` and `no_ha`: each node's CPU per tuple"),
        ("minor_faults_per_s_by_node", "`ha` and `no_ha`: pages each node faulted in per second"),
        ("backup_codec_us_per_tuple", "Nu's encoding and N''s decoding alone, one thread, least of 3 passes"),
        ("backup_codec_floor_us_per_tuple", "zstd over the same bytes in one call per run each way"),
        ("backup_codec_floor_encode_us_per_tuple", "its compression alone"),
        ("backup_codec_batch_floor_encode_us_per_tuple", "compression with each Bsize batch flushed on its own"),
        ("backup_codec_backend", "what compressed them (`libzstd ... via zrun.c` or `python-zstandard`)"),
        ("ha_cost_ratio_bound", "no_ha / (no_ha + floor encode): the best ratio saturated cores allow"),
        ("ha_cost_ratio_bound_batched", "the same with the batched floor: the best this codec and Bsize allow"),
        ("other_cpu_cores_rounds", "`ha` and `no_ha`: other work on the machine in each round's run, in cores"),
        ("other_cpu_cores_max_second_rounds", "the same in each run's busiest second (windows of 0.5 s or more)"),
        ("steal_cpu_cores_max", "the most the hypervisor took in any second of those runs"),
        ("paced_rate_tuples_per_s", "the rate the paced runs hold the generator to"),
        ("paced_tuples_per_s", "standby on, paced: the rate held"),
        ("paced_no_ha_tuples_per_s", "no standby, paced"),
        ("paced_ha_cost_ratio", "paced, with over without"),
        ("paced_ha_cost_ratio_rounds", "the same in each round"),
        ("paced_worst_second_ratio", "paced, the slowest second, standby on"),
        ("paced_no_ha_worst_second_ratio", "the same, no standby"),
        ("paced_backup_coverage", "paced, backup coverage"),
        ("paced_cpu_cores", "`ha` and `no_ha`: cores all nodes took, paced"),
        ("paced_standby_cpu_ratio", "the standby pipeline's cores over the other's (median of the rounds)"),
        ("paced_standby_cpu_ratio_rounds", "the same in each round"),
        ("paced_max_rss_mb", "paced, peak memory per node"),
        ("kafka_throughput_tuples_per_s", "the pipeline with the Kafka source and results topic, records already in"),
        ("quix_eos_tuples_per_s", "Quix Streams with exactly-once, same selection and topics"),
        ("kafka_vs_quix_eos", "ours over Quix's"),
        ("kstreams_eos_tuples_per_s", "Kafka Streams with exactly_once_v2, same selection and topics"),
        ("kafka_vs_kstreams_eos", "ours over Kafka Streams'"),
        ("flink_eos_tuples_per_s", "Flink MiniCluster, exactly-once KafkaSink, same selection and topics"),
        ("kafka_vs_flink_eos", "ours over Flink's"),
        ("kstreams_failover_ms", "Kafka Streams with a standby replica, the active instance killed (median)"),
        ("kstreams_failover_duplicated", "results Kafka Streams committed twice"),
        ("failover_speedup_vs_kstreams", "its failover over our Python operator's worst p95"),
        ("flink_failover_ms", "Flink killed and restarted from its newest checkpoint (median)"),
        ("flink_failover_duplicated", "results Flink committed twice"),
        ("failover_speedup_vs_flink", "its recovery over our Python operator's worst p95"),
        ("spark_pipeline_tuples_per_s", "the pipeline with the Spark operator over records already in Kafka"),
        ("spark_direct_tuples_per_s", "a plain Spark query, Kafka to Kafka, same records and settings"),
        ("spark_pipeline_vs_direct", "the two above, ours over plain Spark"),
        ("spark_pipeline_vs_direct_rounds", "the same in each round"),
        ("spark_generator_tuples_per_s", "the Spark operator fed by the generator, no Kafka"),
        ("spark_failover_ms_p95", "`failover-check --operator spark`: p95 recovery"),
        ("spark_restart_recovery_ms", "Spark's own restart from its checkpoint"),
        ("spark_restart_duplicated", "results Spark's restart wrote twice"),
        ("spark_failover_speedup", "Spark's restart over our Spark failover p95"),
        ("failover_speedup_vs_spark", "Spark's restart over our Python operator's worst p95"),
        ("rounds", "how many rounds, trials and kills each measurement took (figures are medians over rounds)"),
        ("phase_seconds", "wall seconds of each phase of the run"),
        *_MACHINE,
    )),
}


def declared(command: str, summary: dict[str, Any]) -> dict[str, Any]:
    """`summary` unchanged, once every key of it is declared for `command`; raises UndeclaredResultKey
    otherwise (or KeyError for an unknown command)."""
    names = SUMMARIES[command].names()
    extra = [k for k in summary if k not in names]
    if extra:
        raise UndeclaredResultKey(f"{command}'s summary has undeclared keys {extra}: declare them in "
                                  f"lazystandby/harness/results.py and regenerate docs/results.md")
    return summary


def dumps(command: str, summary: dict[str, Any]) -> str:
    """The summary's one JSON line, its keys checked against the declaration."""
    return json.dumps(declared(command, summary))


def markdown() -> str:
    """docs/results.md: one table per summary, one row per key."""
    out = ["# What the JSON summaries say", "",
           "Every command that checks or measures something prints one JSON summary as its last line (progress",
           "goes to stderr). This page is generated from `services/lazystandby/harness/results.py`, the",
           "declaration every summary is checked against (`python -m lazystandby.harness.results`; a test keeps",
           "it current). Keys are added, never renamed.", ""]
    for s in SUMMARIES.values():
        out += [f"## {s.title}", "", s.commands, "", "| key | meaning |", "|---|---|"]
        out += [f"| `{k}` | {meaning} |" for k, meaning in s.keys]
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(markdown())
