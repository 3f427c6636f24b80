"""Pipeline files on a real Kafka broker: the user's own schema and SQL through Nu, N, N' and Nd, a
fault mid-run, and the results topic checked against DuckDB's truth over the source topics."""

import json

import pytest

from lazystandby.harness.launcher import SPARK_DETECTOR, run_trial
from lazystandby.sources.kafka_source import read_partition

EXAMPLES = "examples"


def trial(kafka, pipeline, **kw):
    kw.setdefault("kill_after", 1.0)
    kw.setdefault("total", 6_000)
    kw.setdefault("rate", 3_000.0)
    r = run_trial(kafka=kafka, pipeline=f"{EXAMPLES}/{pipeline}", timeout=120.0, **kw)
    assert r["delivered_all"], f"Nd did not receive everything; logs in {r['workdir']}"
    assert r["expected_output"] > 0
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["wrong"] == 0 and r["unexpected"] == 0, r
    assert r["ok"], r
    return r


@pytest.mark.parametrize("operator", ["python", "spark"])
def test_the_sensor_window_survives_a_killed_primary_exactly(kafka, operator):
    """JSON with nulls, a DECIMAL and ISO-8601 times; a one-minute window per device with HAVING; 30,000
    readings span about 75 s of event time, so the first window closes mid-run."""
    r = trial(kafka, "sensors.sql", fault="kill-primary", total=30_000, rate=10_000.0, kill_after=1.5,
              extra={"operator": operator, **SPARK_DETECTOR} if operator == "spark" else {})
    assert r["failovers"] == 1 and r["same_order"] and r["expected_output"] >= 8  # a minute of 8 devices


@pytest.mark.parametrize("operator", ["python", "spark"])
def test_avro_sensor_readings_survive_a_killed_primary_exactly(kafka, operator, tmp_path):
    """The sensor table as Avro with the Confluent header, on both operators (Spark is handed the records
    as JSON text): the same windows through a kill, exact."""
    from pathlib import Path

    text = Path(f"{EXAMPLES}/sensors.sql").read_text().replace("'format' = 'json'",
                                                                "'format' = 'avro', 'avro.confluent' = 'true'")
    assert "'avro'" in text
    path = tmp_path / "sensors-avro.sql"
    path.write_text(text)
    r = run_trial(kafka=kafka, pipeline=str(path), timeout=120.0, fault="kill-primary", total=30_000,
                  rate=10_000.0, kill_after=1.5,
                  extra={"operator": operator, **SPARK_DETECTOR} if operator == "spark" else {})
    assert r["delivered_all"] and r["expected_output"] >= 8, r
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["wrong"] == 0 and r["unexpected"] == 0, r
    assert r["ok"] and r["failovers"] == 1, r


@pytest.mark.parametrize("pipeline", ["nexmark-q5-counts.sql", "nexmark-q5-whole.sql"])
def test_nexmark_q5_on_the_spark_operator(kafka, pipeline):
    """Sliding windows on Spark: a record counts only in the windows still open at it; q5 whole then keeps
    each window's auctions with the most bids (QUALIFY, applied by the node to the rows Spark emits)."""
    r = trial(kafka, pipeline, fault="kill-primary", total=160_000, rate=20_000.0, kill_after=3.0,
              extra={"operator": "spark", **SPARK_DETECTOR})
    assert r["failovers"] == 1


def test_a_selection_with_projections_survives_a_killed_primary_exactly(kafka):
    r = trial(kafka, "nexmark-q1.sql", fault="kill-primary")
    assert r["failovers"] == 1
    rows = read_partition(kafka, f"{r['topic_prefix']}nexmark-q1")
    first = json.loads(rows[0].value)
    assert set(first) == {"auction", "bidder", "price", "date_time", "extra"}  # readable as it is


def test_bad_records_are_dead_lettered_with_their_reasons(kafka):
    bad = [b'{"device": null, "at": 1}', b'{"device": "d", "at": "soon"}', b"\xff", b"[1]",
           b'{"device": "d", "at": 1764000000000, "battery": 1234.5}', None]
    r = trial(kafka, "sensors.sql", fault="none", bad_records=bad, total=3_000)
    assert r["malformed"] == len(bad) and r["dead_letters_exact"], r
    letters = read_partition(kafka, f"{r['topic_prefix']}deadletters")
    reasons = b" ".join(bytes(v for h in (rec.headers or ()) for v in h[1]) + (rec.value or b"") for rec in letters)
    assert b"NOT NULL" in reasons or b"no value" in reasons


@pytest.mark.parametrize("fault", ["kill-primary"])
def test_nexmark_q5_counts_on_the_python_operator(kafka, fault):
    pytest.importorskip("duckdb")
    # The generator spaces its events 0.1 ms apart in event time: a 10 s window (and the 4 s delay) closes
    # after about 140,000 of them.
    r = trial(kafka, "nexmark-q5-counts.sql", fault=fault, total=160_000, rate=40_000.0, kill_after=2.0)
    assert r["failovers"] == 1 and r["recovery_ms"] < 1_000


def test_run_checks_itself_and_prints_launchs_summary(kafka, monkeypatch, capsys):
    """`lazystandby run PIPELINE --fault`: the pipeline through the cluster, its last line launch's JSON."""
    from lazystandby.cli import main

    monkeypatch.setenv("KAFKA_BOOTSTRAP", kafka)
    rc = main(["run", f"{EXAMPLES}/nexmark-q2.sql", "--fault", "kill-primary", "--total", "20000", "--rate",
               "10000", "--insecure"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0 and summary["ok"] and summary["pipeline"] == f"{EXAMPLES}/nexmark-q2.sql"
    assert summary["lost"] == summary["duplicated"] == summary["wrong"] == 0 and summary["failovers"] == 1
    assert summary["expected_output"] == summary["output_tuples"] > 0


def test_run_refuses_a_pipeline_it_cannot_run_in_one_line(tmp_path, capsys):
    from lazystandby.cli import main

    bad = tmp_path / "bad.sql"
    bad.write_text("CREATE TABLE t (a BIGINT) WITH ('topic' = 't'); SELECT a FROM t ORDER BY a;")
    assert main(["run", str(bad), "--fault", "kill-primary"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ORDER BY is not supported" in err[0]
