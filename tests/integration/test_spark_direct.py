"""The benchmark's peer is a fair one: the plain Spark query (Kafka connector, same selection) produces
exactly the expected outputs on a real broker, and its restart from a checkpoint is what bench times."""

import random
from collections import Counter

from bench.spark_peer import direct_results, kill_query, start_query
from lazystandby.harness.check import kafka_expected
from lazystandby.sources.kafka_generator import generate
from lazystandby.sources.kafka_source import Topics


def test_the_direct_spark_query_selects_exactly_what_the_pipeline_would(kafka, tmp_path):
    prefix = f"sdq{random.getrandbits(32):x}."
    generate(kafka, ["I1", "I2"], 4000, topics=Topics(prefix))
    ckpt = tmp_path
    q = start_query(kafka, prefix, ckpt / "ckpt", "--available-now", "--out-topic", f"{prefix}out")
    try:
        assert q.stdout is not None
        assert q.stdout.readline().startswith("started")
        assert q.stdout.readline().strip() == "done 4000"
        assert q.wait(timeout=60) == 0
    finally:
        kill_query(q)
    expected, _ = kafka_expected(kafka, ["I1", "I2"], "price > 100", prefix=prefix)
    got = Counter((t, s) for t, s, _, _ in direct_results(kafka, f"{prefix}out"))
    assert 0 < len(expected) < 4000
    assert got == Counter((f"{prefix}{s}", q) for s, q in expected)
