"""The Python Data Source (pyspark 4.2+) that connects a Spark Structured Streaming query to a node.

Reader: offsets are the node's feed offsets; `latestOffset` asks the node how far it has handed over
(capped at `maxRows` per micro-batch so a backlog never becomes one huge first batch); `read` fetches
its range over gRPC and yields the tuples, plus one marker row per range so that a range whose tuples the
filter drops entirely is still reported as done. Writer: each task sends its ranges and the selected
offsets straight back to the node, idempotently, so Spark's task retries cannot duplicate anything.

Spark runs these in its own Python processes, so everything here talks to the node over loopback gRPC.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit

SCHEMA = "off long, rstart long, marker boolean, payload string"
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

    def _state(self):
        from lazystandby.v1 import lazystandby_pb2 as pb

        return self.stub.Latest(pb.StatusRequest(), timeout=30)

    def initialOffset(self) -> dict:
        return {"off": int(self._state().start)}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        end = int(self._state().end)
        if not isinstance(limit, ReadAllAvailable):
            end = min(end, start["off"] + self.max_rows)
        return {"off": max(end, start["off"])}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        s, e = start["off"], end["off"]
        if e <= s:
            return []
        n = max(1, min(self.partitions_n, (e - s + 999) // 1000))
        step = (e - s + n - 1) // n
        return [RangePartition(a, min(e, a + step)) for a in range(s, e, step)]

    def read(self, partition: RangePartition) -> Iterator[tuple]:
        from lazystandby.v1 import lazystandby_pb2 as pb

        reply = self.stub.Fetch(pb.FetchRequest(start=partition.start, end=partition.end), timeout=60)
        if len(reply.payloads) != partition.end - partition.start:
            raise RuntimeError(f"feed returned {len(reply.payloads)} tuples for {partition.start}..{partition.end}")
        off = partition.start
        for p in reply.payloads:
            yield (off, partition.start, False, p)
            off += 1
        yield (partition.end, partition.start, True, None)

    def commit(self, end: dict) -> None:
        pass


class EmitWriter(DataSourceStreamWriter):
    def __init__(self, options: dict) -> None:
        self.address = options["address"]

    def write(self, iterator) -> WriterCommitMessage:
        from lazystandby.v1 import lazystandby_pb2 as pb

        starts, ends, selected = [], [], []
        for row in iterator:
            if row.marker:
                starts.append(row.rstart)
                ends.append(row.off)
            else:
                selected.append(row.off)
        if starts:
            _stub(self.address).Emit(pb.EmitRequest(range_starts=starts, range_ends=ends, selected=selected),
                                     timeout=60)
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
