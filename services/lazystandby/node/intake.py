"""Nu's intake: records from outside admitted into the link order.

Each record is validated (its stream known, its sequence number above the last, its table's format), the
admitted ones numbered from the next link position, in-band control records placed first, and for a
window query Nu's watermark records placed among them and the late ones taken out. What is refused goes to
the dead letters with its reason, a late tick to the late data. The control records in force are kept by
position: a receiver that skips to a checkpoint gets the one in force there (`params_at`).

Holds no lock of its own: Nu calls it holding its lock, except `params_at`, which reads a list that is
replaced, never changed in place.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa

from ..config import NodeConfig
from ..core import messages as m
from ..core.errors import DuplicateSequence, MalformedRecord, NonMonotonicSequence, UnknownStream
from ..core.seq import PerStreamSequence, StreamRegistry
from ..core.tuples import STREAM_DTYPE, TupleBatch
from ..core.watermarks import WatermarkPlacer
from ..formats import control
from ..formats.admit import RecordRules, TableRules, TickRules
from ..formats.control import validate_control
from ..sources.base import DeadLetters, Record, Records

NO_SWITCH = "a window query takes no predicate switch (its where clause is part of the query)"
NO_SWITCH_SQL = "a pipeline's query takes no predicate switch (its WHERE clause is part of the query)"


def record_rules(cfg: NodeConfig) -> RecordRules:
    """What Nu admits and reads event times by: the pipeline's tables, else the tick example's format."""
    spec = cfg.pipeline_spec
    return TableRules({t.table: t for t in spec.sources}) if spec is not None else TickRules()


class Intake:
    """The link order's admission at Nu. `counters` is the node's (what it counts shows in its status)."""

    def __init__(self, cfg: NodeConfig, counters: Counter, *, well_formed: bool,
                 dead_letters: DeadLetters, late_data: DeadLetters) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.counters = counters
        # A source whose records cannot be malformed (the generator's) skips the format's judgement.
        self.well_formed = well_formed
        self.dead_letters = dead_letters
        self.late_data = late_data  # a window query's late ticks (the Kafka adapter writes `<prefix>late`)
        self.rules = record_rules(cfg)
        self.registry = StreamRegistry(cfg.stream_names)
        self.seqcheck = PerStreamSequence(cfg.name)
        # A window query: Nu places its watermark records and drops the late ticks (core/watermarks.py).
        self.placer: WatermarkPlacer | None = None
        spec = cfg.window_spec
        if spec is not None:
            self.placer = WatermarkPlacer(spec, cfg.watermark_every, [self.registry.id_of(n) for n in cfg.stream_names],
                                          cfg.watermark_idle, cfg.watermark_per_stream)
        self.control: list[bytes] = []  # control records injected, to enter at the next position
        self.params: list[m.Params] = []  # every control record admitted, by position (they are rare)

    def inject_control(self, payload: bytes) -> None:
        """Queue an in-band control tuple (operator parameter change) to enter at the next position."""
        if self.placer is not None or self.cfg.pipeline:
            raise MalformedRecord(f"{self.name}: {NO_SWITCH if self.placer is not None else NO_SWITCH_SQL}")
        self.control.append(payload)

    def restore(self, held: TupleBatch, last_seqs: dict[str, int], params: tuple | None) -> None:
        """A restarted Nu: the sequence numbers it had admitted through, the control record in force before
        what it holds and those among it, and a window query's event time."""
        self.seqcheck.commit({self.registry.id_of(k): v for k, v in last_seqs.items()})
        self.params = [m.Params(*params)] if params else []
        self.params += [m.Params(held.first + i, held.payload(i))
                        for i in np.flatnonzero(held.streams == StreamRegistry.CONTROL).tolist()]
        if self.placer is not None:
            self.resume_placer(held)

    def resume_placer(self, held: TupleBatch) -> None:
        """A restarted Nu's event time: the watermark in force at the end of the restored link order, the
        largest event time since, and the window ledger over what is held (every input an undelivered result
        needs is held: Nu's trim keeps them)."""
        placer = self.placer
        assert placer is not None
        marks = [(p.pos, control.watermark_of(p.payload), p.payload) for p in self.params]
        marks = [(pos, wm, payload) for pos, wm, payload in marks if wm is not None]
        data = np.flatnonzero(held.streams != StreamRegistry.CONTROL)
        ts = self.event_times(held.select(data, first=1)) if len(data) else np.empty(0, np.int64)
        positions = data + held.first
        lo = 0
        for pos, wm, _ in marks:
            if pos < held.first:
                continue
            hi = int(np.searchsorted(positions, pos))
            placer.ledger.add(positions[lo:hi], ts[lo:hi])
            placer.ledger.close(pos, wm)
            lo = hi
        placer.ledger.add(positions[lo:], ts[lo:])
        last = marks[-1] if marks else None
        placer.resume(last[1] if last else None, control.watermark_state(last[2]) if last else None,
                      last[0] if last else held.first - 1)
        placer.heard_from(positions[lo:], ts[lo:], held.streams[data[lo:]])

    def forget_params(self, trimmed: int) -> None:
        """Control records before the one in force at `trimmed` (Nu's trim point) are never asked for again
        (`params_at` is asked at checkpoints, which never go back past the trim point)."""
        params = self.params
        keep = next((i for i in range(len(params) - 1, -1, -1) if params[i].pos <= trimmed), 0)
        if keep:
            self.params = params[keep:]  # a new list: `params_at` reads the old one without the lock

    def admit(self, records: Records, first: int) -> TupleBatch:
        """Validate records from outside and number the admitted ones from `first`, the next link position
        (control records injected meanwhile first); refused ones go to the dead letters with the reason.
        Columnar: a poll in which every record is good (the common case) costs a few array operations; only
        a poll with a bad record is gone through record by record, to name each."""
        head = None
        if self.control:
            pending, self.control = self.control, []
            for k, payload in enumerate(pending):
                self.params.append(m.Params(first + k, payload))
            n = len(pending)
            head = TupleBatch(first, [StreamRegistry.CONTROL] * n, range(first, first + n), pending)
            first += n
        body = self._admit_records(records, first)
        if self.placer is not None and len(body):
            body = self.place(body)
        if head is None:
            return body
        return TupleBatch.concat([head, body]) if len(body) else head

    def place(self, body: TupleBatch) -> TupleBatch:
        """A window query: the admitted ticks with Nu's watermark records placed among them and the late ones
        taken out, renumbered from the same first position (nothing has seen these positions yet)."""
        placer = self.placer
        assert placer is not None
        placed = placer.place(body.first, self.event_times(body), body.streams)
        order = placed.order
        self._note_late(body, placed)
        if not len(order):
            return TupleBatch(body.first)  # every tick of the poll was late
        records = order < 0
        take = np.where(records, 0, order)
        streams = np.where(records, StreamRegistry.CONTROL, body.streams[take]).astype(STREAM_DTYPE)
        positions = np.arange(body.first, body.first + len(order))
        seqs = np.where(records, positions, body.seqs[take])
        # The payloads column by column: the ticks' runs taken from the poll, each record's text between.
        pieces, lo = [], 0
        for i, wm, state in zip(np.flatnonzero(records).tolist(), placed.watermarks, placed.states, strict=True):
            if i > lo:
                pieces.append(body.payloads.take(pa.array(order[lo:i])))
            text = control.encode_watermark(wm, state)
            pieces.append(pa.array([text], body.payloads.type))
            self.params.append(m.Params(int(positions[i]), text))
            lo = i + 1
        if lo < len(order):
            pieces.append(body.payloads.take(pa.array(order[lo:])))
        payloads = pa.concat_arrays(pieces) if len(pieces) > 1 else pieces[0]
        return TupleBatch.of_columns(body.first, streams, seqs, payloads, None)

    def event_times(self, batch: TupleBatch) -> np.ndarray:
        """The event times (ms) of admitted data tuples."""
        names = self.registry.names_by_id
        return self.rules.event_times(batch.payloads, [names[int(s)] for s in batch.streams.tolist()])

    def _note_late(self, body: TupleBatch, placed) -> None:
        """The late ticks of a poll to the late data, counted, and the records counted."""
        if len(placed.late):
            names = self.registry.names_by_id
            for i in placed.late.tolist():
                self.late_data.put(f"late: behind the watermark {self.placer.watermark} at its position",
                                   Record(names[int(body.streams[i])], int(body.seqs[i]), body.payload(i)))
            self.counters["late_tuples"] += len(placed.late)
        self.counters["watermarks"] += len(placed.watermarks)

    def _admit_records(self, records: Records, first: int) -> TupleBatch:
        if not len(records):
            return TupleBatch(first)
        ids = np.array([self.registry.known(name) for name in records.names] or [-1], np.int64)
        sids = ids[records.stream]
        fast = bool((sids > StreamRegistry.CONTROL).all())
        refused = None
        if fast and not self.well_formed:
            refused = self.rules.refusals(records.names, records.stream, records.payloads,
                                          max_bytes=self.cfg.max_tuple_bytes)
            fast = refused is None
        if fast:
            try:
                pending = self.seqcheck.check(sids, records.seqs)
            except (DuplicateSequence, NonMonotonicSequence):
                fast = False
        if not fast:
            return self._admit_one_by_one(records, first, refused)
        self.seqcheck.commit(pending)
        return TupleBatch.of_columns(first, sids.astype(STREAM_DTYPE), records.seqs, records.payloads, None)

    def _admit_one_by_one(self, records: Records, first: int, refused: dict[int, str] | None = None) -> TupleBatch:
        """The slow path: a poll with at least one record to refuse; every record judged on its own
        (`refused`: the format's reasons by index, when the poll was judged already)."""
        streams, seqs, payloads = [], [], []
        if refused is None and not self.well_formed:
            refused = self.rules.refusals(records.names, records.stream, records.payloads,
                                          max_bytes=self.cfg.max_tuple_bytes) or {}
        refused = refused or {}
        for i, r in enumerate(records):
            try:
                sid = self.registry.id_of(r.stream, node=self.name)
                try:
                    pending = self.seqcheck.check((sid,), (r.seq,))
                except (DuplicateSequence, NonMonotonicSequence):
                    last = self.seqcheck.last.get(sid, 0)
                    raise MalformedRecord(f"stream {r.stream} seq {r.seq} is not above {last}") from None
                if sid == StreamRegistry.CONTROL:
                    if self.placer is not None:
                        raise MalformedRecord(NO_SWITCH)
                    if self.cfg.pipeline:
                        raise MalformedRecord(NO_SWITCH_SQL)
                    validate_control(r.payload)
                    self.counters["control_tuples"] += 1
                elif i in refused:
                    raise MalformedRecord(refused[i])
            except (UnknownStream, MalformedRecord) as e:
                self.dead_letters.put(e.message, r)
                self.counters["dead_letters"] += 1
                self.counters[f"dead_letters_{e.counter}"] += 1
                continue
            self.seqcheck.commit(pending)
            if sid == StreamRegistry.CONTROL:
                self.params.append(m.Params(first + len(streams), r.payload))
            streams.append(sid)
            seqs.append(r.seq)
            payloads.append(r.payload)
        return TupleBatch(first, streams, seqs, payloads)

    def params_at(self, pos: int) -> m.Params | None:
        """The control record in force at `pos` (sent with every checkpoint: a receiver that skips to it
        never sees the control records inside the skipped positions)."""
        return next((p for p in reversed(self.params) if p.pos <= pos), None)

