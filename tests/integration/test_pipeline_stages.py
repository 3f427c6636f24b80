"""A pipeline of several stages on a real Kafka broker (examples/nexmark-q5.sql: counts per auction in
sliding windows, then the auctions with the most bids per window, ranked in QUALIFY; and the same view
read by two stages, examples/nexmark-q5-fanout.sql): each stage its own
Nu, N, N' and Nd processes, faults hit by stage, and every stage's output checked against DuckDB's truth
over what it read."""

import pytest

from lazystandby.harness.launcher import run_trial

Q5 = "examples/nexmark-q5.sql"


def staged(kafka, fault, pipeline=Q5, count=2, **kw):
    r = run_trial(kafka=kafka, pipeline=pipeline, fault=fault, timeout=120.0, **kw)
    stages = r["stages"]
    assert [s["stage"] for s in stages] == list(range(1, count + 1)), r
    for s in stages:
        assert s["expected_output"] > 0 and s["output_tuples"] == s["expected_output"], r
        assert s["lost"] == 0 and s["duplicated"] == 0 and s["wrong"] == 0 and s["ok"], r
    assert r["ok"] and r["delivered_all"], r
    return r


@pytest.mark.parametrize("fault, hit", [("kill-primary@2", [2]), ("kill-primary@1+2", [1, 2])])
def test_nexmark_q5_in_two_stages_survives_killed_primaries_exactly(kafka, fault, hit):
    """240,000 bids span 24 s of event time: stage 1's windows close from 14 s on (10 s and a 4 s delay),
    so stage 2 reads counts while the fault hits it; each stage hit fails over. (A stage not hit may fail
    over too, exactly all the same, when a takeover elsewhere holds both cores past its detector's
    timeout.)"""
    r = staged(kafka, fault, total=240_000, rate=20_000.0, kill_after=1.0)
    for k in hit:
        assert r["stages"][k - 1]["failovers"] >= 1 and r["stages"][k - 1]["failover_ms"] > 0, r
    assert r["failovers"] >= len(hit) and r["recovery_ms"] > 0, r
    # The failover figures are the slowest stage's; its nodes ran from the whole file as that stage (so
    # their metrics carry pipeline_stage), as `lazystandby run` and the compose stack run them.
    slowest = max(hit, key=lambda k: r["stages"][k - 1]["failover_ms"])
    assert {s["pipeline_stage"] for s in r["after"].values()} == {slowest}, r["after"]


def test_a_view_read_by_two_stages_survives_both_readers_killed_at_once(kafka):
    """examples/nexmark-q5-fanout.sql: stage 1's counts feed stage 2 (q5's hot items) and stage 3 (a
    summary per window), each into its own sink; both readers' primaries are killed together, and each
    reader is checked against the truth over the whole view."""
    r = staged(kafka, "kill-primary@2+3", pipeline="examples/nexmark-q5-fanout.sql", count=3, total=240_000,
               rate=20_000.0, kill_after=1.0)
    one, hot, summary = r["stages"]
    assert hot["failovers"] >= 1 and summary["failovers"] >= 1, r
    # Both read the same view: the summary counts one result per window, q5 one per window's top auction.
    assert 0 < summary["expected_output"] <= hot["expected_output"] < one["expected_output"], r


def each_stages_nodes_in_prometheus(lines: list[bytes], work) -> dict[str, tuple[int, int, int]]:
    """A real Prometheus scraping every node `run` said it serves metrics on: per pipeline_stage, how many
    primaries and standbys it sees, and the failovers counted."""
    import re
    import time

    from lazystandby.harness.local_prometheus import LocalPrometheus

    targets = {}
    for line in b"".join(lines).decode(errors="replace").splitlines():
        if m := re.match(r"run: stage (\d+) metrics: (.*)", line):
            for name, addr in re.findall(r"(\S+) (127\.0\.0\.1:\d+)", m.group(2)):
                targets[f"stage{m.group(1)}-{name.replace(chr(39), '2')}"] = addr
    assert len(targets) == 8, targets

    def per_stage(expr: str) -> dict[str, int]:
        r = prom.query(expr)["data"]["result"]
        return {x["metric"]["pipeline_stage"]: int(float(x["value"][1])) for x in r}

    with LocalPrometheus(work, targets) as prom:
        deadline, got = time.monotonic() + 60, {}
        while time.monotonic() < deadline:
            prim = per_stage('sum by (pipeline_stage) (lazystandby_role{role="primary"})')
            stby = per_stage('sum by (pipeline_stage) (lazystandby_role{role="standby"}) '
                             'and on (pipeline_stage) max by (pipeline_stage) (lazystandby_standby_lag_tuples) >= 0')
            fail = per_stage("sum by (pipeline_stage) (lazystandby_failovers_total)")
            got = {k: (prim.get(k, 0), stby.get(k, 0), fail.get(k, -1)) for k in ("1", "2")}
            if got == {"1": (1, 1, 0), "2": (1, 1, 0)}:
                break
            time.sleep(1)
    return got


def test_run_without_a_fault_runs_every_stage_until_stopped(kafka, tmp_path):
    """`lazystandby run FILE` against a cluster: a Nu, N, N' and Nd per stage, each node given the whole
    file and its stage; the first stage reads the bids, the last writes q5's results; each stage's nodes
    are apart in one Prometheus (pipeline_stage); SIGTERM stops every process it started."""
    import os
    import random
    import signal
    import subprocess
    import sys
    import threading
    import time
    from pathlib import Path

    from lazystandby.formats.pipeline import read_stages
    from lazystandby.sinks.kafka_sink import read_results
    from lazystandby.sources.kafka_source import Topics
    from lazystandby.sources.pipeline_load import write_load

    prefix = f"r{random.getrandbits(32):x}."
    path = tmp_path / "q5.sql"
    path.write_text(Path(Q5).read_text().replace("'topic' = 'bid'", f"'topic' = '{prefix}bid'")
                    .replace("'topic' = 'nexmark-q5'", f"'topic' = '{prefix}q5'"))
    first = read_stages(path)[0]
    write_load(kafka, first, 200_000, topics=Topics.of_pipeline(prefix, first))  # 20 s of event time
    env = {**os.environ, "KAFKA_BOOTSTRAP": kafka, "LS_TOPIC_PREFIX": prefix,
           "PYTHONPATH": os.pathsep.join(["services", "spark", "."])}
    proc = subprocess.Popen([sys.executable, "-m", "lazystandby.cli", "run", str(path), "--insecure"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, b"")), daemon=True)
    reader.start()
    from confluent_kafka.admin import AdminClient

    def held(topic):  # what the topic holds, once a node has made it (reading one that is not there waits)
        made = AdminClient({"bootstrap.servers": kafka}).list_topics(timeout=10).topics
        return read_results(kafka, topic) if topic in made else []

    try:
        deadline, rows = time.monotonic() + 180, []
        while time.monotonic() < deadline and not rows and proc.poll() is None:
            time.sleep(2)
            rows = held(f"{prefix}q5")
        assert rows, f"no q5 result; run exited {proc.poll()}"
        assert held(f"{prefix}auction_bids"), "the view is the deployment's own topic"
        per_stage = each_stages_nodes_in_prometheus(lines, tmp_path / "prom")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        reader.join(timeout=10)
        out = b"".join(lines).decode(errors="replace")
    assert proc.returncode == 0, out[-2000:]
    # Each stage's nodes apart in one Prometheus: its primary, its standby (in sync, its lag), no failover.
    assert per_stage == {"1": (1, 1, 0), "2": (1, 1, 0)}, per_stage
    assert "stage 1/2" in out and "stage 2/2" in out and "every node was stopped" in out
