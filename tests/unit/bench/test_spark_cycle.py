"""bench/spark_cycle.py's arithmetic and its link order (the Spark runs are the bench's own)."""

from bench.spark_cycle import batch_medians, link_order
from lazystandby.core.seq import StreamRegistry
from lazystandby.formats import control


def progress(rows, ms):
    return {"numInputRows": rows, "durationMs": {"triggerExecution": ms}}


def test_micro_batches_that_read_rows_and_those_that_only_emit_are_told_apart():
    got = batch_medians([progress(5_000, 300), progress(0, 200), progress(4_000, 500), progress(0, 240),
                         progress(10, 100)])
    assert got == {"data": 300, "empty": 220}
    assert batch_medians([]) == {"data": None, "empty": None}


def test_the_link_order_holds_every_tick_and_a_record_at_each_period():
    q, batch = link_order(2_000, 500)
    controls = [i for i in range(len(batch)) if batch.streams[i] == StreamRegistry.CONTROL]
    assert len(batch) - len(controls) == 2_000
    assert len(controls) >= 4  # one per poll of 500 ticks
    marks = [control.watermark_of(batch.payload(i)) for i in controls]
    assert all(m is not None for m in marks) and marks == sorted(marks)
    assert q.stateful
