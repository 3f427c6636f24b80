"""The Python Data Source (pyspark 4.2+) that connects a Spark Structured Streaming query to a node.

Reader: offsets are the node's feed offsets; `latestOffset` asks the node how far it has handed over
(capped at `maxRows` per micro-batch so a backlog never becomes one huge first batch); `read` fetches
its range over gRPC as Arrow buffers and yields it as one `pyarrow.RecordBatch`, plus a one-row batch
marking the range's end, so that a range whose tuples the filter drops entirely is still reported as
done. Writer (`DataSourceStreamArrowWriter`): each task sends its ranges and the selected offsets, as
arrays, straight back to the node, idempotently, so Spark's task retries cannot duplicate anything. No
Python runs per row on either side. (A window query's results do not come back through a writer: its
query hands them to the node in the driver, query.start_window.)

Spark runs these in its own Python processes, so everything here talks to the node over loopback gRPC.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit

SCHEMA = "off long, rstart long, marker boolean, payload string"
ARROW_SCHEMA = pa.schema([("off", pa.int64()), ("rstart", pa.int64()), ("marker", pa.bool_()),
                          ("payload", pa.string())])
# Fewest rows worth a task of their own: below it a second task (and its Python workers) costs more time
# than it saves; a micro-batch of a few thousand rows runs as one.
PER_TASK = 25_000
# How long the reader waits in the node for rows before Spark sees an empty trigger: short, because a
# query being stopped waits for it, and long enough that an idle query costs nothing between rows.
LONG_POLL_MS = 100
_OPTS = [("grpc.max_send_message_length", 256 << 20), ("grpc.max_receive_message_length", 256 << 20)]


def _stub(address: str):
    from lazystandby.v1 import lazystandby_pb2_grpc as pb_grpc

    return pb_grpc.OperatorFeedStub(grpc.insecure_channel(address, options=_OPTS))


class RangePartition(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        super().__init__((start, end))
        self.start, self.end = start, end


class FeedReader(DataSourceStreamReader):
    def __init__(self, options: dict) -> None:
        self.address = options["address"]
        self.max_rows = int(options.get("maxRows", "200000"))
        self.partitions_n = int(options.get("partitions", "2"))
        self._stub = None

    @property
    def stub(self):
        if self._stub is None:
            self._stub = _stub(self.address)
        return self._stub

    def _state(self, after: int = 0, wait_ms: int = 0):
        from lazystandby.v1 import lazystandby_pb2 as pb

        return self.stub.Latest(pb.LatestRequest(after=after, wait_ms=wait_ms), timeout=30)

    def initialOffset(self) -> dict:
        return {"off": int(self._state().start)}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        end = int(self._state(start["off"], LONG_POLL_MS).end)
        if not isinstance(limit, ReadAllAvailable):
            end = min(end, start["off"] + self.max_rows)
        return {"off": max(end, start["off"])}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        s, e = start["off"], end["off"]
        if e <= s:
            return []
        n = max(1, min(self.partitions_n, (e - s + PER_TASK - 1) // PER_TASK))
        step = (e - s + n - 1) // n
        return [RangePartition(a, min(e, a + step)) for a in range(s, e, step)]

    def read(self, partition: RangePartition) -> Iterator[pa.RecordBatch]:
        from lazystandby.v1 import lazystandby_pb2 as pb
        from lazystandby_spark.feed import payloads_from

        reply = self.stub.Fetch(pb.FetchRequest(start=partition.start, end=partition.end), timeout=60)
        payloads = payloads_from(reply)
        n = partition.end - partition.start
        if len(payloads) != n:
            raise RuntimeError(f"feed returned {len(payloads)} tuples for {partition.start}..{partition.end}")
        yield pa.RecordBatch.from_arrays(
            [pa.array(np.arange(partition.start, partition.end, dtype=np.int64)),
             pa.array(np.full(n, partition.start, np.int64)), pa.array(np.zeros(n, np.bool_)), payloads],
            schema=ARROW_SCHEMA)
        yield pa.RecordBatch.from_arrays(
            [pa.array([partition.end], pa.int64()), pa.array([partition.start], pa.int64()),
             pa.array([True]), pa.array([None], pa.string())], schema=ARROW_SCHEMA)

    def commit(self, end: dict) -> None:
        pass


class EmitWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: dict) -> None:
        self.address = options["address"]

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        from lazystandby.v1 import lazystandby_pb2 as pb

        starts, ends, selected = [], [], []
        for rb in iterator:
            off = rb.column("off").to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
            marker = rb.column("marker").to_numpy(zero_copy_only=False).astype(np.bool_, copy=False)
            starts.append(rb.column("rstart").to_numpy(zero_copy_only=False)[marker])
            ends.append(off[marker])
            selected.append(off[~marker])
        if starts and sum(map(len, starts)):
            _stub(self.address).Emit(
                pb.EmitRequest(range_starts=np.concatenate(starts).tolist(), range_ends=np.concatenate(ends).tolist(),
                               selected=np.concatenate(selected).astype("<i8").tobytes()), timeout=60)
        return WriterCommitMessage()

    def commit(self, messages, batchId: int) -> None:
        pass

    def abort(self, messages, batchId: int) -> None:
        pass


class FeedDataSource(DataSource):
    """`spark.readStream.format("lazystandby_feed")` and `writeStream.format("lazystandby_feed")`."""

    @classmethod
    def name(cls) -> str:
        return "lazystandby_feed"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema) -> DataSourceStreamReader:
        return FeedReader(self.options)

    def streamWriter(self, schema, overwrite: bool) -> DataSourceStreamWriter:
        return EmitWriter(self.options)
