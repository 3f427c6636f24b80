"""The node's side of the Spark feed: tuples handed to Spark by feed offset, and the results that came back.

The node keeps a feed of contiguous offsets 0, 1, ... and serves it over gRPC; the query's Python data
source (source.py, in Spark's worker processes) reads ranges of it, and its sink reports, per range, which
offsets were selected. Results come back by offset, so N and N' select exactly the same tuples.
"""

from __future__ import annotations

import threading

import grpc

from lazystandby.v1 import lazystandby_pb2 as pb
from lazystandby.v1 import lazystandby_pb2_grpc as pb_grpc


class Feed(pb_grpc.OperatorFeedServicer):
    """Tuples handed to Spark, by feed offset, and the results that came back."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.base = 0  # offset of payloads[0]
        self.payloads: list[str] = []
        self.query_start = 0
        self.done: dict[int, int] = {}  # range start -> end, not yet folded into done_through
        self.done_through = 0  # every offset below is answered
        self.selected: set[int] = set()

    @property
    def end(self) -> int:
        return self.base + len(self.payloads)

    def append(self, payloads: list[str]) -> int:
        with self.cond:
            first = self.end
            self.payloads.extend(payloads)
            self.cond.notify_all()
            return first

    def wait_done(self, end: int, timeout: float) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.done_through >= end, timeout):
                raise TimeoutError(f"Spark did not answer offsets up to {end} within {timeout}s "
                                   f"(answered through {self.done_through})")

    def take_selected(self, start: int, end: int) -> list[int]:
        with self.cond:
            out = sorted(o for o in self.selected if start <= o < end)
            self.selected.difference_update(out)
            # What Spark answered is no longer needed in the feed.
            drop = self.done_through - self.base
            if drop > 0:
                del self.payloads[:drop]
                self.base += drop
            return out

    # --- the gRPC side, called from Spark's Python workers -----------------------------------------
    def Latest(self, request, context):
        with self.cond:
            return pb.FeedState(start=self.query_start, end=self.end)

    def Fetch(self, request, context):
        with self.cond:
            if request.start < self.base or request.end > self.end:
                context.abort(grpc.StatusCode.OUT_OF_RANGE,
                              f"feed holds {self.base}..{self.end}; asked {request.start}..{request.end}")
            return pb.FetchReply(payloads=self.payloads[request.start - self.base : request.end - self.base])

    def Emit(self, request, context):
        with self.cond:
            for s, e in zip(request.range_starts, request.range_ends, strict=True):
                if e <= self.done_through:
                    continue  # a retried task: already answered
                self.done[s] = e
            self.selected.update(o for o in request.selected if o >= self.done_through)
            while self.done_through in self.done:
                self.done_through = self.done.pop(self.done_through)
            self.cond.notify_all()
        return pb.EmitReply()
