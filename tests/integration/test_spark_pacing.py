"""A standby's Spark query holds the backup it is fed (fewer, larger micro-batches) and answers at once
when the takeover turns the hold off: a real Spark session, the node's own operator."""

import tempfile
import time

import numpy as np

from lazystandby.config import NodeConfig
from lazystandby.operators.selection import Selection
from lazystandby.operators.spark import SparkSelection
from tests.unit.core.test_columnar import ticks_batch


def test_a_held_standby_answers_only_once_the_hold_is_off_and_answers_the_same(tmp_path, monkeypatch):
    # The session's JVM, started in pytest's process, left its scratch in /tmp (five entries a run): it goes
    # where the test's temporary files go instead (the Spark session follows Python's temporary directory).
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    batch = ticks_batch(3000)
    expected = np.asarray(Selection("price > 100").process(batch))
    op = SparkSelection("price > 100", NodeConfig(name="N'", operator="spark", spark_standby_hold=600.0,
                                                  spark_partitions=1))
    try:
        unheld = op.submit(batch.slice(1, 1001))  # not lazy yet: answered like a primary's
        np.testing.assert_array_equal(unheld.result(timeout=120), expected[expected < 1000])
        op.lazy(True)
        held = op.submit(batch.slice(1001, 3001))
        time.sleep(3.0)  # several micro-batches' time: a query offered the rows would have answered
        assert not held.done(), "the standby's rows are held for up to 600 s"
        t0 = time.monotonic()
        op.lazy(False)  # a takeover
        np.testing.assert_array_equal(held.result(timeout=120), expected[expected >= 1000] - 1000)
        assert time.monotonic() - t0 < 60
    finally:
        op.close()
