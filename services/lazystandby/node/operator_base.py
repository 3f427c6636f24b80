"""What N and N' share whatever their role: the operator loop that drains IQ through the operator into
OQ, the Level-1 point, and the parts it is composed of, each holding its own state: the inbound part
(`inbound.Inbound`: IQ and what is held), the operator's calls (`operator_calls.OperatorCalls`), the
quarantine (`quarantine.Quarantine`); what it reports is `operator_status`.

The role parts act on this state, each holding its own: `primary.PrimarySide` (`primary_side`: Push in,
Deliver out, the planned handover), `standby.StandbySide` (`standby_side`: the backup in, lazily; the
heartbeats that watch the primary) and `takeover.Takeover` (`takeover`: seed 000 section 3.6, made
Precise, as numbered steps). A node changes role at run time, so it composes every part; the operator
loop asks the standby's part what it may take (`deferred_through`) and the primary's whether its operator
stalled (`stalled_s`). `operator_node.OperatorNode` is the node's face to the wire.

Invariants the sides rely on: `inbound.received_through` is the last input position held; `processed`
(moved only by `processed_to`) the last one the operator answered, with the outputs made through it;
every output in OQ is numbered on from the last, one per selected input, in input order; nothing is
changed by a handler before the whole frame is checked.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..config import NodeConfig
from ..core import messages as m
from ..core.acks import Checkpoint, Level1Tracker, level1_from_level0
from ..core.errors import UnknownEpoch, Unreadable
from ..core.held import HeldRuns
from ..core.queues import KeyedQueue
from ..core.roles import Role
from ..core.tuples import TupleBatch
from ..operators.base import Operator
from ..sources.base import DeadLetters
from ..transport.peer import Peer
from .common import IDLE_STANDBY_WAIT_S, NodeBase
from .inbound import Inbound
from .operator_calls import OperatorCalls
from .passive import PassiveStandby
from .primary import PrimarySide
from .quarantine import Quarantine, Quarantined, bisect
from .runs import Jump, _join_runs, outputs_of
from .standby import StandbySide
from .takeover import Takeover


class OperatorBase(NodeBase):
    """The state of an operator node and its operator loop (IQ -> operator -> OQ). Subclassed by
    OperatorNode only, with the role sides mixed in over it."""

    MAIN_LOOP = "operator"


    def __init__(self, cfg: NodeConfig, operator: Operator, peers: Callable[[str], Peer], *,
                 dead_letters: DeadLetters | None = None, **kw) -> None:
        super().__init__(cfg, **kw)
        self.operator = operator
        # A stateful operator (a window): every input is applied, none skipped for being covered, and a jump
        # rebuilds the state from the inputs Nu still holds (`Jump.rebuild_from`).
        self.stateful = operator.stateful
        # While rebuilding: the checkpoint whose outputs (all held by Nd) are dropped, its count resumed after.
        self._rebase: Checkpoint | None = None
        self.quarantine = Quarantine(dead_letters or DeadLetters())
        self.peers = peers
        self.inbound = Inbound(cfg, self.clock)
        self.oq = KeyedQueue(f"{cfg.name} OQ", capacity=cfg.oq_capacity)
        self.held = HeldRuns(cfg.name, self.inbound.check_tuples, max_batch_bytes=cfg.max_message_bytes)
        self._init_positions()
        self.downstream: Peer | None = peers(cfg.downstream) if cfg.downstream else None
        self.upstream: Peer | None = peers(cfg.upstream) if cfg.upstream else None
        self.calls = OperatorCalls(cfg, operator, self.clock)
        self.passive = cfg.standby_state == "snapshot"  # a Passive Standby pair (seed 001)
        self.snapshots = PassiveStandby(self)
        if cfg.role == "primary":
            self.state.become(Role.PRIMARY, epoch=1)
        else:
            self.state.become(Role.STANDBY, epoch=0)
        # The role parts, each holding its own state and acting on this one: a node changes role at run time
        # (a standby takes over, a primary shown a newer epoch rejoins as a standby), so it carries them all.
        self.primary_side = PrimarySide(self)
        self.standby_side = StandbySide(self)
        self.takeover = Takeover(self)

    def _init_positions(self) -> None:
        """Where this node stands in the link order and in its outputs: received, processed, covered, and
        acknowledged by Nd (Level-0) and to Nu (Level-1)."""
        self.processed = Checkpoint()
        # When `processed` last moved (wall clock; None before): a frame finished, or a skip past covered
        # inputs. A reader polling between frames cannot tell from the count alone when it held.
        self.processed_at: float | None = None
        self.first_processed_at: float | None = None  # when the operator finished its first frame
        # This process's CPU seconds when its first input arrived: what it spent since is the pipeline's
        # (a primary's operator, a standby's backup), not its start-up's.
        self.cpu_at_first_input: float | None = None
        # The newest checkpoint known to be covered by Nd's output (Nu's Level-1 point, sent with the backup
        # and with Nu's takeover answer), and the control record in force there.
        self.covered: tuple[Checkpoint, m.Params | None] = (Checkpoint(), None)
        self.level1 = Level1Tracker()
        self.level0 = 0

    def stop(self, join_timeout: float = 5.0) -> None:
        self.standby_side.beat_now.set()  # the heartbeat loop sees the stop now, not at its next beat
        super().stop(join_timeout)

    def start(self) -> None:
        standby = self.state.role is Role.STANDBY  # before the loops: the output loop may make a primary rejoin
        self.spawn("operator", self._operator_loop, on_crash=self._operator_failed)
        self.spawn("output", self.primary_side.deliver.loop)
        self.spawn("announce", self.primary_side.announce_loop)
        if self.passive:
            self.spawn("snapshot", self.snapshots.send_loop)
        if self.calls.probe is not None:
            self.spawn("operator-probe", self.primary_side.probe_operator)
        if standby:
            self.standby_side.watch()

    # --- input: frames and batches -> IQ ---------------------------------------------------------------
    def admit(self, batches: list, ckpt: Checkpoint, params: m.Params | None = None) -> None:
        """Queue `batches` in IQ if they follow on from what this node holds (Inbound.admit: checked whole
        before anything changes)."""
        # Only a standby defers, and times covering for it.
        if self.inbound.admit(batches, ckpt, params, stateful=self.stateful, timed=self.state.role is Role.STANDBY):
            self.counters["jumps"] += 1
        if self.cpu_at_first_input is None:
            self.cpu_at_first_input = time.process_time()
        self.lock.notify_all()

    def jump(self, ckpt: Checkpoint, params: m.Params | None = None, *, rebuild_from: int | None = None) -> None:
        """Holding the lock: skip to a checkpoint whose inputs all produced outputs Nd holds (Inbound.jump)."""
        self.inbound.jump(ckpt, params, rebuild_from=rebuild_from)
        self.counters["jumps"] += 1
        self.lock.notify_all()

    def note_covered(self, ckpt: Checkpoint, params: m.Params | None) -> None:
        """Holding the lock: every input through `ckpt` is covered by outputs Nd holds, so nobody will ever
        need this node to process it. The operator loop skips those it has not submitted yet: a standby
        whose operator fell behind (Spark on a busy machine) catches up to the Level-1 point instead of
        working through inputs that only matter until the primary's outputs for them reach Nd."""
        if ckpt.input_pos > self.covered[0].input_pos:
            self.covered = (ckpt, params)
            if self.stateful:
                # Nothing covered is skipped (every input feeds the state): what Nd holds is only not kept.
                self.oq.trim(ckpt.output_count)
            self.held.trim(self.done_through() if self.stateful else ckpt.input_pos)
            self.inbound.covered_through(ckpt.input_pos)
            self.lock.notify_all()  # a deferring operator loop may now skip

    def on_level0(self, k: int) -> None:
        """Holding the lock: Nd holds every output through `k` (its Level-0 ack, to the primary directly, to
        the standby in the primary's heartbeat replies: Algorithm 3): OQ drops them, the Level-1 ack follows."""
        if k > self.level0:
            self.level0 = k
        self.oq.trim(self.level0)
        self.level1_now()
        self.lock.notify_all()

    def check_epoch(self, epoch: int, sender: str, what: str) -> None:
        """Calls from Nu speak for Nu's epoch: an older one is refused (StaleEpoch); a newer one moves
        nothing here (only this node's own takeover, or what Nu and the primary tell it, moves its epoch)."""
        self.state.fence.check(epoch, sender=sender, what=what)
        if self.state.role is not Role.STANDBY and self.state.fence.is_newer(epoch):
            raise UnknownEpoch(f"{self.name}: {what} from {sender} in epoch {epoch}; this primary is in epoch "
                               f"{self.state.epoch} and no takeover it knows of made epoch {epoch}")

    # --- operator: IQ -> OQ ----------------------------------------------------------------------------
    def _operator_loop(self) -> None:
        """One pass: what may be taken from IQ now (`_take_items`), the answers ready collected, a Passive
        Standby's snapshot loaded, then each run taken submitted in calls (`_process_run`)."""
        items = self._take_items()
        self.collect(block=False)
        with self.lock:
            load = self.snapshots.due()
        if load:
            self.snapshots.load()
        if self.quarantine.unwritten:
            self.write_quarantined()  # a standby drops those covered since (a takeover writes the rest first)
        # Held runs this node has processed are needed no more than covered ones (their outputs are in OQ'),
        # except as the base later runs decode from; while Nd's acks lag, only this lets them go.
        self.held.trim(self.done_through())
        for it in items:
            if isinstance(it, Jump):
                if it.rebuild_from is not None:
                    self._rebuild(it)
                elif it.checkpoint.input_pos > self.processed.input_pos:  # else a skip already went past it
                    self._restore(it.checkpoint, it.params)
                continue
            if not self._process_run(it):
                return

    def _take_items(self) -> list:
        """Waits, holding the lock, until there is something to take or answers to collect; returns the
        runs and jumps taken from IQ (none when a snapshot is due or a takeover still gathers)."""
        with self.lock:
            through: int | None = None  # the last input this pass may take (None: all)
            take = True
            while not self.stopped:
                if self.operator.failure is not None:
                    raise self.operator.failure  # ends this loop, as a failed call does (_operator_failed)
                self.dying_point("operator")  # an idle standby may wait here for long
                if self.snapshots.due():
                    take = False
                    break  # a Passive Standby that took over: its snapshot is loaded first (`_operator_loop`)
                if self.inbound.iq.empty():
                    if self.calls.head_done():
                        break
                    self._wait_for_work(0.1)
                    continue
                if self.takeover.gathering and self.takeover.still_gathering():
                    take = False
                    if self.calls.head_done():
                        break  # answers to collect; nothing taken yet
                    self.lock.wait(0.005)  # ends on an input's arrival or the deadline, not on a notify
                    continue
                take = True
                through = self.standby_side.deferred_through()
                if through is None or self.inbound.iq.head()[0].first <= through or self.calls.head_done():  # type: ignore[index]
                    break  # something to take, or answers to collect (taking what may be taken now)
                self._wait_for_work(0.02)  # wakes when Nd's acks cover more (`note_covered`) or a takeover starts
            return _join_runs(self.inbound.iq.take_all(self.calls.take, through)) if take else []

    def _process_run(self, it) -> bool:
        """A run taken from IQ, submitted from its first input in calls of the node's batch size, past what a
        snapshot or a covering checkpoint made needless; False when an input did not decode (the node
        stops taking: StandbySide.unreadable)."""
        start = it.first
        while start < it.end and not self.stopped:
            room = self._room_for(it.end - start)
            with self.lock:
                covered, params = self.covered
                rebase = self._rebase
                snap_through = self.snapshots.through()
            if snap_through is not None and start <= snap_through:
                # In the snapshot: a Passive Standby's backup up to it is needed no more.
                with self.lock:
                    self.counters["snapshot_dropped"] += min(snap_through + 1, it.end) - start
                start = min(snap_through + 1, it.end)
                continue
            if covered.input_pos >= start and not self.stateful:
                start = self._skip(covered, params, start, it.end)
                continue
            if rebase is not None and start <= rebase.input_pos:
                room = min(room, rebase.input_pos - start + 1)  # a call ends where numbering resumes
            try:
                piece = it.slice(start, start + room)
            except Unreadable as e:
                if e.error is None:
                    # Let go since it was taken: covered meanwhile (a trim drops only covered or processed
                    # runs, and nothing from `start` on is processed), which the skip above now sees.
                    with self.lock:
                        if self.covered[0].input_pos >= start:
                            continue
                    raise
                at = e.at
                if at > start:  # what decoded before it is processed; the rest is forgotten
                    try:
                        self._submit(it.slice(start, at))
                    except Unreadable:
                        at = start  # that did not decode either: forgotten from `start`
                self.standby_side.unreadable(e.error, at)
                return False
            if len(piece):
                self._submit(piece)
            start = piece.end
        return True

    def _restore(self, ckpt: Checkpoint, params: m.Params | None) -> None:
        """Resume the operator at `ckpt` (a Jump, or a skip over covered inputs)."""
        self.collect(block=True)  # restore only with nothing in flight (the Operator contract)
        self.operator.restore(ckpt.input_pos, params)
        with self.lock:
            self.processed_to(ckpt)
            self.oq.trim(ckpt.output_count)
            self.lock.notify_all()

    def _rebuild(self, jump: Jump) -> None:
        """A stateful jump: the operator starts empty before `rebuild_from` with the control record in force
        at the checkpoint (a watermark: windows final there take nothing more), and what it makes through
        the checkpoint is dropped (Nu trims no input that an undelivered result depends on, so every window
        open at the checkpoint is rebuilt whole)."""
        self.collect(block=True)
        ckpt, start = jump.checkpoint, jump.rebuild_from
        assert start is not None
        self.operator.restore(start - 1, jump.params)
        with self.lock:
            self.counters["rebuilds"] += 1
            self.snapshots.forget()
            self.processed_to(Checkpoint(start - 1, ckpt.output_count))
            self._rebase = ckpt if ckpt.input_pos >= start else None
            self.oq.trim(ckpt.output_count)
            self.lock.notify_all()

    def _skip(self, covered: Checkpoint, params: m.Params | None, start: int, end: int) -> int:
        """Inputs `start`..`covered` are not submitted (see `note_covered`); returns the next position to
        submit. A checkpoint that counts fewer outputs than this node made before `start` cannot be true;
        it is dropped and nothing is skipped."""
        if covered.input_pos > self.processed.input_pos:
            self.collect(block=True)
            with self.lock:
                if covered.output_count < self.processed.output_count:
                    self.counters["skips_refused"] += 1
                    self.covered = (Checkpoint(), None)
                    self.log.warning("%s: checkpoint %s counts fewer outputs than the %d made before input %d; "
                                     "not skipping", self.name, covered, self.processed.output_count, start)
                    return start
            self._restore(covered, params)
        with self.lock:
            self.counters["skipped_tuples"] += min(covered.input_pos + 1, end) - start
        return covered.input_pos + 1

    def _room_for(self, wanted: int) -> int:
        """How many inputs the next operator call may take: at most one output per input, so never more
        than OQ has room for once what is in flight is answered, and never more in flight than the operator
        takes. A call sized to the room left cannot wait for room that will never come (an operator call's
        outputs larger than the whole OQ would spin for ever); with OQ full, this waits for Nd's acks
        (backpressure: IQ fills, then Nu is told RESOURCE_EXHAUSTED)."""
        while True:
            self.collect(block=False)
            with self.lock:
                room = self.calls.room(self.oq.room())
                if room > 0 or self.stopped:
                    return max(0, min(wanted, room))
                self.counters["oq_full_waits" if self.oq.room() == 0 else "in_flight_waits"] += 1
                if not self.calls.head_done():
                    self.lock.wait(0.05)

    def _wait_for_work(self, seconds: float) -> None:
        """Holding the lock, the operator loop with nothing to take: up to `seconds`, woken by the lock's
        notifies. A Passive Standby's loop waits on standby_wake instead: a backup input is never its work
        (it waits for a snapshot that covers it, to be dropped), so only a snapshot, a takeover or a stop
        gives it any."""
        if self.passive and self.state.role is Role.STANDBY:
            self.standby_wake.wait(IDLE_STANDBY_WAIT_S)
        else:
            self.lock.wait(seconds)

    def _submit(self, batch: TupleBatch) -> None:
        t0 = self.calls.begin()
        fut = self.operator.submit(batch)
        with self.lock:
            self.calls.made(batch, fut, t0)
        if fut.done():
            self.collect(block=False)
        else:
            fut.add_done_callback(self._wake)

    def _wake(self, _fut) -> None:
        with self.lock:
            self.lock.notify_all()

    def collect(self, block: bool) -> None:
        """Takes the operator's answers in submission order: those ready, or (block) all in flight."""
        while self.calls and not self.stopped:
            batch, fut, _ = self.calls.in_flight[0]
            if not fut.done():
                if not block:
                    return
                with self.lock:
                    self.lock.wait_for(lambda f=fut: f.done() or self.stopped, 0.5)
                continue
            found: list[Quarantined] = []
            try:
                selected = fut.result()
            except Exception as e:  # from the input: quarantined; else it ends this loop (_operator_failed)
                if not self.operator.input_fault(e):
                    raise
                selected, found = bisect(self.operator, batch, e)
            if found:
                self._quarantine(found)
            with self.lock:
                self.calls.answered(self.state.role is Role.PRIMARY)
                self._finish(batch, selected)

    def _quarantine(self, found: list[Quarantined]) -> None:
        """Poison inputs found in a call: counted, listed, and for a primary written to the dead letters
        before the call's outputs enter OQ (node/quarantine.Quarantine)."""
        with self.lock:
            self.counters["quarantined_tuples"] += len(found)
            self.quarantine.found(found, self.inbound.registry.names_by_id)
        self.log.error("%s: %d input(s) quarantined at positions %s: the operator fails on each alone (%s)",
                       self.name, len(found), [q.pos for q in found[:10]], found[0].error)
        self.write_quarantined()

    def write_quarantined(self) -> None:
        """A primary, or a standby taking over, writes the quarantined inputs not written yet (waiting for
        them); a standby drops those a covering checkpoint has passed."""
        with self.lock:
            todo = self.quarantine.due(self.state.role in (Role.PRIMARY, Role.PROMOTING), self.covered[0].input_pos)
        self.quarantine.write(todo, self.inbound.registry.names_by_id, self.name)

    def _finish(self, batch: TupleBatch, selected) -> None:
        """Holding the lock: the outputs of `batch`, numbered on from the last ones, into OQ."""
        self.counters["operator_batches"] += 1
        base = self.processed.output_count
        out = outputs_of(batch, selected, base + 1)
        rebase = self._rebase
        if rebase is not None and batch.last <= rebase.input_pos:
            # Rebuilding: these outputs are held by Nd; numbering resumes after the checkpoint's count.
            self.counters["rebuilt_tuples"] += len(batch)
            self.counters["processed_tuples"] += len(batch)
            self.processed_to(Checkpoint(batch.last, rebase.output_count))
            if batch.last == rebase.input_pos:
                self._rebase = None
            self.lock.notify_all()
            return
        # Outputs Nd already holds (a promoted standby re-processing) are not kept: Precise.
        fresh = out.slice(self.oq.trimmed_through + 1, out.end)
        if len(fresh):
            # Fits for a selection (calls take no more inputs than OQ has room for); a window's record may
            # make more, which the next call then waits for (`_room_for`).
            self.oq.append(fresh, over=self.stateful)
        self.counters["processed_tuples"] += len(batch)
        self.counters["output_tuples"] += len(out)
        self.processed_to(Checkpoint(batch.last, base + len(out)))
        if self.first_processed_at is None:
            self.first_processed_at = self.processed_at
        self.snapshots.maybe_take()
        self.lock.notify_all()

    def _operator_failed(self, e: Exception) -> None:
        """The operator loop ended with an error (a failed call: a Spark JVM that is gone): nothing will be
        processed here again. A primary says so at once in its heartbeats (OperatorWatch.fail), and the node
        asks its process to exit (`fail`): its closed port is the surest sign of all."""
        why = f"{type(e).__name__}: {e}"[:300]
        with self.lock:
            self.calls.watch.fail(why)
            self.counters["operator_failures"] += 1
            self.primary_side.stalled_s()  # said now, not at the next heartbeat
        self.fail(f"the operator failed ({why})")

    def processed_to(self, ckpt: Checkpoint) -> None:
        """Holding the lock: `processed` moves here only, with the time it moved (`processed_at`)."""
        self.processed, self.processed_at = ckpt, time.time()

    def level1_now(self) -> Checkpoint:
        return self.level1.update(level1_from_level0(self.level0, self.processed, self.oq, grouped=self.stateful))

    def done_through(self) -> int:
        """The last input that needs no more work here: processed, or covered by Nd's output (skipped; a
        stateful node skips nothing)."""
        if self.stateful:
            return max(self.processed.input_pos, self.snapshots.through() or 0)
        return max(self.processed.input_pos, self.covered[0].input_pos)
