"""The Spark operator on a real Spark standalone cluster (a master and a worker started from the pyspark
package): N's and N''s queries run in executors on the worker, which reach each node's feed over the
network and import the packages the driver shipped. Then N is killed; the output is still exact."""

import pytest

from lazystandby.harness.launcher import run_trial
from lazystandby.harness.spark_cluster import APP_CONF, StandaloneCluster

from .scratch import spark_scratch


@pytest.fixture(scope="module")
def spark_cluster():
    with StandaloneCluster() as cluster:
        yield cluster


def test_kill_primary_with_spark_on_a_standalone_cluster(spark_cluster):
    spark_master = spark_cluster.master_url
    before = spark_scratch()
    r = run_trial(fault="kill-primary", total=12_000, rate=6_000.0, kill_after=1.0, timeout=120.0,
                  extra={"operator": "spark", "spark_master": spark_master, "spark_conf": APP_CONF,
                         "heartbeat_interval": 0.2, "heartbeat_misses": 5})
    assert r["took_over"] and r["delivered_all"], f"logs in {r['workdir']}"
    assert r["expected"] > 0
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["out_of_order"] == 0 and r["ok"], r["diff"]
    assert r["failovers"] == 1
    # The queries ran on the cluster, not in a local master: the master ran both nodes' applications.
    assert {"lazystandby-N", "lazystandby-N'"} <= set(spark_cluster.applications())
    # The killed driver's scratch (its JVM's, the shipped packages, the checkpoints) went with the run's work
    # directory, not into /tmp.
    assert spark_scratch() - before == set()
