"""Nexmark q5 whole on a real broker: ours, a rank per window in QUALIFY (examples/nexmark-q5-whole.sql),
and Flink SQL's, the suite's self-join of the counts with their maximum (bench/jvm/flinksql), over the
same bids: the same auctions with the same counts, ties and all."""

import collections
import json
import random
import time

from bench.jvm_peers import CommittedReader
from bench.nexmark import QUERIES, ROOT, flink_cp, flink_run
from lazystandby.formats.pipeline import read_pipeline
from lazystandby.harness.truth import truth
from lazystandby.sources.kafka_source import Topics, read_partition
from lazystandby.sources.pipeline_load import write_load


def committed(bootstrap: str, topic: str, timeout: float = 60.0) -> list:
    """Every committed record of `topic`: read until the consumer's position reaches the partition's last
    stable offset (the job has ended and committed, so no transaction is still open)."""
    from kafka import TopicPartition

    reader = CommittedReader(bootstrap, topic)
    tp = TopicPartition(topic, 0)
    try:
        end = reader.consumer.end_offsets([tp])[tp]  # read_committed: the last stable offset
        deadline = time.monotonic() + timeout
        while reader.consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"{topic}: read to {reader.consumer.position(tp)} of {end}"
            reader.more()
        return reader.records
    finally:
        reader.close()


def test_q5_ranked_in_qualify_equals_flinks_self_join(kafka, tmp_path):
    spec = read_pipeline(ROOT / "examples" / QUERIES["q5whole"])
    prefix = f"q5w{random.getrandbits(32):x}."
    # 0.1 ms of event time apart: 200,000 bids span 20 s, a dozen windows of 10 s sliding by 2 s.
    write_load(kafka, spec, 200_000, topics=Topics(prefix, (("bid", f"{prefix}bid"),)))
    payloads = [r.value for r in read_partition(kafka, f"{prefix}bid")]
    ours = collections.Counter((v["auction"], v["num"]) for v in map(json.loads, truth(spec.plan, payloads)))
    sink = f"{prefix}flink"
    flink_run(flink_cp(), kafka, f"{prefix}bid", "q5whole", work=tmp_path, sink=sink)
    theirs = collections.Counter((v["auction"], v["num"]) for v in (json.loads(r.value)
                                                                    for r in committed(kafka, sink)))
    assert sum(ours.values()) >= 10, ours
    assert ours == theirs
