"""A lazy standby's backup as it came: Algorithm 2 (seed 000 section 3.4) with the decompression put off
until the tuples are needed.

Most of what a standby receives is covered by Nd's acks before it would process it (OperatorNode's
`standby_defer`), and a covered input is never processed; decoding it anyway was most of the standby's
CPU. So a run is checked on arrival in everything that needs no decoding (its place in the codec session,
its positions, its declared sizes) and queued sealed: `Sealed` items in IQ'. A run is decoded when the
operator takes one of its inputs, or when a takeover starts (`StandbySide.unseal`). A streaming session
decodes only forward from a fresh run (`EncodedRun.fresh`, every `batching.FRESH_EVERY` tuples), so the
runs from the last fresh one before the oldest input not covered yet stay held, sealed. The other codecs
compress every batch on its own, so each of their runs is held as fresh: it decodes without the ones
before it (with its session's dictionary, which it is given on arrival).

A run that fails to decode then is reported by the error its eager decoding raised; the node forgets it
and what came after it (`truncate`), and Nu, which holds every input past the Level-1 ack, sends it again
after a resync.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from .codec import BatchDecoder, CodecName, DecoderPosition, opens_session
from .errors import CorruptBatch, LazyStandbyError, Released, Unreadable
from .messages import BackupRun
from .tuples import TupleBatch, decode_counted, short_batches

# Decoded tuples a standby keeps at most (about 8 MB of ticks): the operator takes a run in pieces, and a
# takeover decodes the backlog before its plan; beyond this, a run is decoded again if it is needed again.
CACHE_TUPLES = 131_072


@dataclass(slots=True, eq=False)
class _Held:
    run: BackupRun
    first: int
    end: int
    batch: TupleBatch | None = None  # decoded and checked, once needed
    bad: LazyStandbyError | None = None

    @property
    def fresh(self) -> bool:
        return self.run.encoded.fresh


@dataclass(frozen=True, slots=True)
class Ledger:
    """Where the link's codec session stands on arrival (nothing decoded): the session, the index its
    next run must carry, its codec and dictionary. `session` 0: the next run must open a new session."""

    session: int = 0
    next_index: int = 0
    codec: CodecName = CodecName.NONE
    dictionary: bytes = b""


class Sealed:
    """An IQ' item: positions first .. end-1 of a held run, decoded on demand (`tuples`). Slicing it
    decodes nothing."""

    __slots__ = ("held", "store", "first", "end")

    def __init__(self, held: _Held, store: HeldRuns, first: int, end: int) -> None:
        self.held, self.store, self.first, self.end = held, store, first, end

    def __len__(self) -> int:
        return self.end - self.first

    @property
    def last(self) -> int:
        return self.end - 1

    def slice(self, start: int, stop: int) -> Sealed:
        start, stop = max(start, self.first), min(stop, self.end)
        return Sealed(self.held, self.store, start, max(start, stop))

    def tuples(self) -> TupleBatch:
        """The tuples at these positions; raises Unreadable with the run's decoding error."""
        try:
            return self.store.tuples(self.held).slice(self.first, self.end)
        except LazyStandbyError as e:
            raise Unreadable(self.first, e) from None
        except Released:
            raise Unreadable(self.first, None) from None


class HeldRuns:
    """The runs a standby holds sealed, in arrival order, and the decoder that opens them.

    `accept` checks runs and says what they would change; `commit` records them (the caller does both
    around its own admission, so a refused frame changes nothing here either). `tuples` decodes a run,
    in order from the nearest fresh run or from where the decoder stands; `trim` lets go of runs that
    nothing will need; `truncate` forgets a run and everything after it. Thread-safe."""

    def __init__(self, node: str, check: Callable[[TupleBatch, str], TupleBatch], *,
                 max_batch_bytes: int = 64 << 20, cache_tuples: int = CACHE_TUPLES) -> None:
        self.node = node
        self.check = check
        self.max_batch_bytes = max_batch_bytes
        self.cache_tuples = cache_tuples
        self._cached: deque[_Held] = deque()  # runs whose decoded tuples are kept, oldest first
        self._cached_tuples = 0  # the tuples they hold
        self.ledger = Ledger()
        self.decoded_tuples = 0  # tuples decoded (the rest were let go sealed)
        self._runs: deque[_Held] = deque()
        self._decoder = BatchDecoder(node, max_batch_bytes=max_batch_bytes)
        self._after: _Held | None = None  # the run the decoder's context last decoded
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._runs)

    def accept(self, runs: list[BackupRun]) -> tuple[list[_Held], Ledger]:
        """The runs as held entries, and the ledger after them: each must follow on in its session (or
        open a new one at index 0) and declare sizes it can be decoded within. Raises what eager decoding
        would (CorruptBatch, DuplicateSequence, OversizedMessage)."""
        led, out = self.ledger, []
        for run in runs:
            e = run.encoded
            where = f"{self.node}: backup run session {e.session} index {e.first_index}"
            # A codec that does not stream makes each batch a frame of its own: every run decodes on its own.
            fresh = e.fresh or not e.codec.streaming
            if len(e.raw_sizes) != len(run.counts):
                raise CorruptBatch(f"{where}: {len(run.counts)} counts for {len(e.raw_sizes)} batches")
            e.check_sizes(where, self.max_batch_bytes)
            short = short_batches(run.counts, e.raw_sizes)
            if short is not None:
                raise CorruptBatch(f"{where}: batch {short} of {run.counts[short]} tuples declares "
                                   f"{e.raw_sizes[short]} raw bytes, fewer than their encoding takes")
            if opens_session(where, e.session, e.first_index, e.codec, (led.session, led.next_index, led.codec)):
                dictionary = e.dictionary or (led.dictionary if e.codec.uses_dictionary else b"")
                led = Ledger(e.session, 0, e.codec, dictionary)
            # A fresh run decodes on its own: it carries its session's dictionary from here on.
            dictionary = led.dictionary if fresh and e.codec.uses_dictionary and not e.dictionary else e.dictionary
            if fresh is not e.fresh or dictionary is not e.dictionary:
                run = BackupRun(run.first, run.counts, replace(e, fresh=fresh, dictionary=dictionary))
            led = Ledger(led.session, led.next_index + len(e), led.codec, led.dictionary)
            out.append(_Held(run, run.first, run.first + sum(run.counts)))
        return out, led

    def commit(self, held: list[_Held], ledger: Ledger) -> None:
        with self._lock:
            self._runs.extend(held)
            self.ledger = ledger

    def tuples(self, h: _Held) -> TupleBatch:
        """Run `h` decoded and checked (cached): from the run after the one the decoder last decoded when
        that is where `h` follows on, else from the last fresh run at or before `h`."""
        with self._lock:
            if h.batch is not None:
                return h.batch
            if h.bad is not None:
                raise h.bad
            runs = self._runs
            i = _index(runs, h)
            continuing = i > 0 and runs[i - 1] is self._after
            start = i
            if not continuing:
                while start >= 0 and not runs[start].fresh:
                    start -= 1
                if start < 0:
                    h.bad = CorruptBatch(f"{self.node}: backup run from {h.first}: no fresh run held before it "
                                         f"to decode it from")
                    raise h.bad
            for k in range(start, i + 1):
                e = runs[k]
                try:
                    raw = self._decompress(e, new_context=k == start and not continuing)
                    if k == i:
                        batch = decode_counted(raw, e.first, e.run.counts, e.run.encoded.raw_sizes,
                                               what=f"backup run {e.first}")
                        self._keep(e, self.check(batch, f"backup run {e.first}"))
                except LazyStandbyError as err:
                    self._after = None
                    e.bad = err
                    if e is not h:
                        h.bad = CorruptBatch(f"{self.node}: backup run from {h.first} follows run {e.first}, "
                                             f"which does not decode: {err}")
                    raise h.bad from None
                self._after = e
            assert h.batch is not None
            return h.batch

    def unseal(self, after: int) -> Unreadable | None:
        """Decode every held run with an input past `after` (a takeover's first step); the first that does
        not decode, as Unreadable from its first input past `after`, or None."""
        with self._lock:
            runs = [h for h in self._runs if h.end - 1 > after]
        for h in runs:
            try:
                self.tuples(h)
            except LazyStandbyError as e:
                return Unreadable(max(h.first, after + 1), e)
            except Released:
                continue  # processed or covered meanwhile
        return None

    def trim(self, covered: int) -> None:
        """Inputs through `covered` are needed no more (covered by Nd's output, or processed): let go of the
        runs before the last fresh run at or before the first run still needed (later runs decode from
        there), and of what the runs through `covered` had decoded."""
        with self._lock:
            runs = self._runs
            need = next((k for k, e in enumerate(runs) if e.end - 1 > covered), len(runs))
            base = next((k for k in range(min(need, len(runs) - 1), -1, -1) if runs[k].fresh), 0)
            for _ in range(base):
                runs.popleft()
            self._drop_cached(lambda e: e.end - 1 <= covered)

    def truncate(self, pos: int) -> None:
        """Forget the run holding `pos` and every run after it; the next run must open a new session
        (the sender resets after the refusal that follows)."""
        with self._lock:
            while self._runs and self._runs[-1].end > pos:
                self._runs.pop()
            self._drop_cached(lambda e: e.end > pos)
            self.ledger = Ledger()
            self._after = None

    def _keep(self, e: _Held, batch: TupleBatch) -> None:
        """Holding the lock: keep run `e`'s decoded tuples (the operator slices a run in pieces), letting go
        of the oldest kept beyond `cache_tuples`: the decoded inputs of runs processed but not covered yet
        would otherwise stay as long as Nd's acks lag, where IQ''s capacity bounded them before."""
        e.batch = batch
        self.decoded_tuples += len(batch)
        self._cached.append(e)
        self._cached_tuples += len(batch)
        while self._cached_tuples > self.cache_tuples and len(self._cached) > 1:
            self._let_go(self._cached.popleft())

    def _drop_cached(self, which: Callable[[_Held], bool]) -> None:
        for e in [c for c in self._cached if which(c)]:
            self._let_go(e)
        self._cached = deque(c for c in self._cached if c.batch is not None)

    def _let_go(self, e: _Held) -> None:
        if e.batch is not None:
            self._cached_tuples -= len(e.batch)
            e.batch = None

    def restart_session(self) -> None:
        """The link's codec session moved on elsewhere (an eager frame): the next run must open a new one."""
        with self._lock:
            self.ledger = Ledger()

    def _decompress(self, e: _Held, *, new_context: bool) -> bytes:
        """Run `e`'s bytes, decoded where the decoder stands, or (a fresh run) in a context of its own."""
        pos = DecoderPosition(None, -1) if new_context else self._decoder.position
        raw, pos = self._decoder.decode_run(e.run.encoded, pos)
        self._decoder.commit(pos)
        return raw


def _index(runs: deque[_Held], h: _Held) -> int:
    for k in range(len(runs) - 1, -1, -1):
        if runs[k] is h:
            return k
    raise Released(f"backup run from {h.first} is no longer held")
