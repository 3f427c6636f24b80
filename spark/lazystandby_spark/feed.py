"""The node's side of the Spark feed: tuples handed to Spark by feed offset, and the results that came back.

The node keeps a feed of contiguous offsets 0, 1, ... and serves it over gRPC; the query's Python data
source (source.py, in Spark's worker processes) reads ranges of it, and its sink reports, per range, which
offsets were selected. Results come back by offset, so N and N' select exactly the same tuples.

Everything crosses as Arrow buffers: a range is fetched as a binary array's data and offsets, selected
offsets come back as one int64 array. Several ranges may be handed over before the first is answered
(`append` returns at once; `answer` is a future): Spark's micro-batches then follow one another with no
round trip to the node in between.

Pacing: the feed decides how far the query may read (`Latest`). A primary's feed offers every row at once;
a standby's holds rows back for up to `hold` seconds (or until `hold_rows` wait), so its query runs fewer,
larger micro-batches while only the takeover needs its answers; `pace(0)` at takeover offers everything
now. `Latest` is a long poll: Spark's reader waits in it for rows instead of polling an idle feed.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque
from concurrent.futures import Future

import grpc
import numpy as np
import pyarrow as pa

from lazystandby.core.tuples import binary_from, offsets_of
from lazystandby.v1 import lazystandby_pb2 as pb
from lazystandby.v1 import lazystandby_pb2_grpc as pb_grpc

_OFFSETS = np.dtype("<i4")
_SELECTED = np.dtype("<i8")
MAX_WAIT_MS = 1_000  # longest long poll a reader may ask for (a stopping query waits for it)


class Feed(pb_grpc.OperatorFeedServicer):
    """Tuples handed to Spark, by feed offset, and the answers that came back."""

    def __init__(self, clock=time.monotonic) -> None:
        self.lock = threading.Lock()
        self._changed = threading.Condition(self.lock)
        self.clock = clock
        self.base = 0  # offset of chunks[0][0]
        self.chunks: deque[pa.BinaryArray] = deque()
        self.end = 0  # one past the last offset handed over
        self.query_start = 0
        self.done: dict[int, int] = {}  # range start -> end, not yet folded into done_through
        self.done_through = 0  # every offset below is answered
        self.selected: list[np.ndarray] = []  # selected offsets not yet handed to a waiter
        self.waiters: deque[tuple[int, int, Future]] = deque()  # (start, end, future), by end
        self.offered = 0  # the end last offered to the query: it reads below it
        self.hold = 0.0  # seconds a row may wait to be offered with later ones (0: offered at once)
        self.hold_rows = 0  # ... unless this many wait
        self._held_since = 0.0  # when the oldest row not yet offered was appended

    def pace(self, hold: float, hold_rows: int = 1) -> None:
        """Offer rows at once (`hold` 0) or hold them for up to `hold` seconds unless `hold_rows` wait.
        Taking the hold off offers what waits now, to a reader waiting in `Latest` too."""
        if hold < 0 or (hold > 0 and hold_rows < 1):
            raise ValueError(f"pace: hold {hold} s, hold_rows {hold_rows}: want hold >= 0 and hold_rows >= 1")
        with self._changed:
            self.hold, self.hold_rows = hold, hold_rows
            self._changed.notify_all()

    def restart_at_end(self) -> None:
        """A new query starts reading at the current end (nothing before it is offered to it)."""
        with self.lock:
            self.query_start = self.offered = self.end

    def append(self, payloads: pa.BinaryArray) -> int:
        """Hands `payloads` to Spark; returns the feed offset of the first."""
        with self.lock:
            first = self.end
            if len(payloads):
                if self.offered == self.end:
                    self._held_since = self.clock()
                self.chunks.append(payloads)
                self.end += len(payloads)
                self._changed.notify_all()
            return first

    def answer(self, start: int, end: int) -> Future:
        """A future of the selected offsets in [start, end) (int64, increasing, relative to `start`), done
        once Spark has answered every offset below `end`. Ask in increasing order of `end`."""
        fut: Future = Future()
        with self.lock:
            self.waiters.append((start, end, fut))
            ready = self._ready()
        resolve(ready)
        return fut

    def fail(self, error: BaseException) -> None:
        """Every waiting future fails with `error` (the query died: nothing will answer them)."""
        with self.lock:
            waiting, self.waiters = list(self.waiters), deque()
        for _, _, fut in waiting:
            if not fut.done():
                fut.set_exception(error)

    def _ready(self) -> list[tuple[Future, np.ndarray]]:
        """Holding the lock: the waiters now answered, with their offsets; trims what Spark answered."""
        out = []
        if self.waiters and self.waiters[0][1] <= self.done_through:
            sel = np.sort(np.concatenate(self.selected)) if self.selected else np.empty(0, np.int64)
            while self.waiters and self.waiters[0][1] <= self.done_through:
                start, end, fut = self.waiters.popleft()
                lo, hi = np.searchsorted(sel, [start, end])
                out.append((fut, sel[lo:hi] - start))
                sel = sel[hi:]
            self.selected = [sel] if len(sel) else []
        while self.chunks and self.base + len(self.chunks[0]) <= self.done_through:
            self.base += len(self.chunks.popleft())
        return out

    def _offerable(self) -> int:
        """Holding the lock: how far the query could read if nothing were held back."""
        return self.end

    def _offer(self) -> int:
        """Holding the lock: how far the query may read now."""
        end = self._offerable()
        waiting = end - self.offered
        if waiting > 0 and (self.hold <= 0 or waiting >= self.hold_rows
                            or self.clock() - self._held_since >= self.hold):
            self.offered = end
        return self.offered

    def _readable(self, after: int) -> int:
        """Holding the lock: how far one micro-batch that starts at `after` may read now."""
        return self._offer()

    def _range(self, start: int, end: int) -> pa.BinaryArray:
        """Holding the lock: the payloads at [start, end), one array."""
        parts, at = [], self.base
        for chunk in self.chunks:
            lo, hi = max(start, at), min(end, at + len(chunk))
            if lo < hi:
                parts.append(chunk.slice(lo - at, hi - lo))
            at += len(chunk)
            if at >= end:
                break
        if len(parts) == 1:
            return parts[0]
        return pa.concat_arrays(parts) if parts else pa.array([], pa.binary())

    # --- the gRPC side, called from Spark's Python workers -----------------------------------------
    def Latest(self, request, context):
        with self._changed:
            deadline = self.clock() + min(request.wait_ms, MAX_WAIT_MS) / 1000
            while True:
                end = self._readable(request.after)
                left = deadline - self.clock()
                if end > request.after or left <= 0:
                    return pb.FeedState(start=self.query_start, end=end)
                if self._offerable() > self.offered:  # rows held: look again when their hold ends
                    left = min(left, self._held_since + self.hold - self.clock())
                self._changed.wait(max(left, 0.001))

    def Fetch(self, request, context):
        with self.lock:
            if request.start < self.base or request.end > self.end or request.start > request.end:
                context.abort(grpc.StatusCode.OUT_OF_RANGE,
                              f"feed holds {self.base}..{self.end}; asked {request.start}..{request.end}")
            arr = self._range(request.start, request.end)
        offsets = offsets_of(arr)
        lo, hi = int(offsets[0]), int(offsets[-1])
        data = arr.buffers()[2]
        return pb.FetchReply(data=b"" if data is None else data.slice(lo, hi - lo).to_pybytes(),
                             offsets=(offsets - lo).astype(_OFFSETS, copy=False).tobytes())

    def Emit(self, request, context):
        sel = np.frombuffer(request.selected, _SELECTED)
        with self.lock:
            fresh = self._answered(request.range_starts, request.range_ends, sel)
            if fresh.any():
                self.selected.append(sel[fresh])
            ready = self._ready()
        resolve(ready)
        return pb.EmitReply()

    def _answered(self, starts, ends, offsets: np.ndarray) -> np.ndarray:
        """Holding the lock: the ranges [start, end) are answered, `offsets` selected in them. Moves
        done_through over what is now answered contiguously; returns the mask of the offsets not answered
        before (a retried task's, or a micro-batch run again, are)."""
        for s, e in zip(starts, ends, strict=True):
            if e > self.done_through:
                self.done[s] = e
        fresh = offsets >= self.done_through
        while self.done_through in self.done:
            self.done_through = self.done.pop(self.done_through)
        return fresh


def resolve(ready: list[tuple[Future, object]]) -> None:
    # Outside the feed's lock: a future's callbacks take the node's lock.
    for fut, offsets in ready:
        if not fut.done():
            fut.set_result(offsets)


def payloads_from(reply: pb.FetchReply) -> pa.StringArray:
    """The payloads of a FetchReply as an Arrow string array (no copy; invalid UTF-8 becomes U+FFFD, as
    Python's decoding did, so a bad tuple is unselected rather than failing the query)."""
    arr = binary_from(np.frombuffer(reply.offsets, _OFFSETS), reply.data)
    try:
        return arr.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array([b.decode("utf-8", "replace") for b in arr.to_pylist()], pa.string())


class WindowFeed(Feed):
    """The feed of a window query: micro-batches cut at watermark records, and the window results back.

    Why the cuts: Spark's watermark is the largest event time its query has read, and a window closes
    when it passes the window's end plus the lateness. Nu's records carry exactly that largest event time
    (their own event time is the watermark they carry, so the query reads it too), so a micro-batch that
    ends just past a record leaves Spark's watermark where the link order's is, on N and N' alike,
    however many records one micro-batch spans. A micro-batch never ends between records: ticks after
    the last record wait in the feed for the next one.

    When results are out: the query runs in update mode, so each micro-batch's commit carries every
    window group its rows changed, with the group's whole aggregate so far. After the commit of a
    micro-batch that read up to offset `e`, every group holds every tick below `e`, so the windows the
    records below `e` close are complete there: the node takes them (operators/spark_window) without
    waiting for the micro-batch after, in which Spark evicts them. `closed_through` is the offset below
    which every record's windows are out; `until(offset)` waits for it.
    """

    def __init__(self, max_rows: int, clock=time.monotonic) -> None:
        super().__init__(clock)
        self.max_rows = max_rows
        self.bounds: list[int] = []  # feed offsets just past each record, increasing, above closed_through
        self.closed_through = 0
        self.rows: list[pa.Table] = []  # updated groups committed, not yet taken (drain), in commit order
        self.closers: deque[tuple[int, Future]] = deque()  # (offset, future), by offset
        self._read = False  # whether the micro-batch running has read anything
        self._read_end = 0  # highest offset read

    def restart_at_end(self) -> None:
        """A new query over an empty state: rows not yet offered (ticks past the last record) and results
        not yet taken belong to the state given up, and are dropped."""
        with self.lock:
            self.chunks.clear()
            self.base = self.query_start = self.offered = self.done_through = self.end
            self.closed_through = self._read_end = self.end
            self.bounds, self.rows, self._read = [], [], False

    def append_cut(self, payloads: pa.BinaryArray, records: list[int]) -> int:
        """Hands `payloads` to Spark, with watermark records at indices `records` (increasing); returns the
        feed offset of the first."""
        with self.lock:
            first = self.end
            if records:
                if self.offered == self._offerable():
                    self._held_since = self.clock()
                self.bounds.extend(first + r + 1 for r in records)
            if len(payloads):
                self.chunks.append(payloads)
                self.end += len(payloads)
            self._changed.notify_all()
            return first

    def until(self, offset: int) -> Future:
        """A future, done once every window closed by the records below `offset` is out (`drain`)."""
        fut: Future = Future()
        with self.lock:
            self.closers.append((offset, fut))
            ready = self._ready_closed()
        resolve([(f, None) for f in ready])
        return fut

    def drain(self) -> list[pa.Table]:
        with self.lock:
            rows, self.rows = self.rows, []
        return rows

    def fail(self, error: BaseException) -> None:
        super().fail(error)
        with self.lock:
            waiting, self.closers = list(self.closers), deque()
        for _, fut in waiting:
            if not fut.done():
                fut.set_exception(error)

    def _offerable(self) -> int:
        # Only up to just past the last record: ticks after it wait for the next one.
        return self.bounds[-1] if self.bounds else self.offered

    def _readable(self, after: int) -> int:
        return self._cut(after, self._offer())

    def _cut(self, after: int, end: int) -> int:
        """Holding the lock: how far one micro-batch from `after` reads, at most `end` (a bound): the last
        bound within max_rows of `after`, or the first past it."""
        if end <= after:
            return end
        i = bisect.bisect_right(self.bounds, after)
        j = bisect.bisect_right(self.bounds, min(end, after + self.max_rows)) - 1
        return self.bounds[max(i, j)] if i < len(self.bounds) else end

    def _ready_closed(self) -> list[Future]:
        out = []
        while self.closers and self.closers[0][0] <= self.closed_through:
            out.append(self.closers.popleft()[1])
        return out

    def _closed(self, through: int) -> list[Future]:
        """Holding the lock: every record below `through` has its windows out."""
        if through > self.closed_through:
            self.closed_through = through
            del self.bounds[:bisect.bisect_left(self.bounds, through)]
            self.done_through = through  # rows below are read and committed: freed
            self._ready()
        return self._ready_closed()

    # --- the gRPC side -----------------------------------------------------------------------------
    def Fetch(self, request, context):
        reply = super().Fetch(request, context)
        with self.lock:
            self._read = True
            self._read_end = max(self._read_end, request.end)
        return reply

    def commit(self, table: pa.Table) -> None:
        """A micro-batch's updated groups (the query's foreachBatch, in the driver), once it ran."""
        with self.lock:
            if table.num_rows:
                self.rows.append(table)
            # A micro-batch that read up to e committed every group the rows below e changed: the windows
            # the records below e closed are complete. One that read nothing (Spark evicting) adds nothing.
            ready = self._closed(self._read_end) if self._read else []
            self._read = False
        resolve([(f, None) for f in ready])
