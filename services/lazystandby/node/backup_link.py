"""The outbound link's backup to the standby (seed 000 Algorithm 1): OQu's tuples cut into Bsize batches,
compressed in runs by the codec, one backup call in flight while the next run is encoded, each carrying the
Level-1 checkpoint (and the control record in force there) so that the standby skips what Nd already covers.

What it keeps of its own: the Bsize in force, the batcher's watermarks over OQu (cut, confirmed), the codec
session, the backup generation (a failed call, a new Bsize or a new standby starts one: the batches since
the standby's last answer are cut again), whether the standby is in sync (backup_stall_max), when to retry
it, and the cadence of checkpoints and recovery hints. What it reads of the outbound link it sends for
(node/outbound.py) is `Sender`: the node's lock, OQu, its checkpoint and epoch, the standby in place, and its
trim and skip points.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from typing import Protocol

import zstandard as zstd

from .. import native
from ..config import NodeConfig
from ..core import messages as m
from ..core.acks import Checkpoint
from ..core.batching import BackupBatcher, RunEncoder, format_bsize
from ..core.errors import PeerError
from ..core.queues import KeyedQueue
from ..core.recovery_model import replay_room
from ..core.retry import after_backup_error
from ..transport.peer import Peer, Pending
from .bsize_tuning import BsizeTuning

# Seconds between Nu's recovery hints to its standby, with a backup frame or alone: at Bsize inf (or with a
# checkpoint that does not move, as under long windows) no other frame may come for long.
HINT_EVERY_S = 0.5


class Sender(Protocol):
    """What the backup link reads and calls of the outbound link it sends for; all of it holding `lock`, but `clock`
    and `sleep`."""

    name: str
    lock: threading.Condition
    counters: Counter
    oqu: KeyedQueue
    checkpoint: Checkpoint
    standby: Peer | None
    tuning: BsizeTuning

    @property
    def epoch(self) -> int: ...
    def clock(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...
    def trim(self) -> None: ...
    def skip_point(self) -> int: ...
    def resend_floor(self) -> int: ...
    def params_at(self, pos: int) -> m.Params | None: ...
    def tuple_bytes(self) -> float: ...
    def standby_link(self, address: str, error: PeerError | None) -> None: ...


@dataclass(slots=True)
class _BackupCall:
    """A backup call prepared by the backup loop, then in flight."""

    peer: Peer
    gen: int  # the backup generation it was cut in (a failure or a new standby starts a new one)
    resync: bool
    last: int  # last position it carries (0: none)
    frame: m.BackupFrame
    encode_s: float = 0.0
    sent_at: float = 0.0
    pending: Pending | None = None


class BackupLink:
    """The backup to the standby in place (`Sender.standby`); its loops are the node's `backup` and `probe`."""

    def __init__(self, cfg: NodeConfig, out: Sender, log) -> None:
        self.cfg = cfg
        self.out = out
        self.log = log
        # The Bsize in force: cfg.bsize, or the one chosen for recovery_target_ms (`tune`).
        self.bsize = cfg.bsize
        self.batcher = BackupBatcher(cfg.bsize)
        self.run_encoder = self._encoder_for(cfg.bsize)  # used by the backup thread only
        self._encoder_reset = False  # a reset asked of the backup thread (a registration)
        self.gen = 0
        self._inflight: _BackupCall | None = None
        self.awaiting_since: float | None = None  # when the backup call now in flight was sent
        self.out_of_sync_since: float | None = None  # since when the standby is out of sync (backup_stall_max)
        self.encode_seconds = 0.0  # time spent cutting and compressing runs
        self.call_seconds = 0.0  # time backup calls were in flight
        self.retry_at = 0.0  # a standby whose call failed is retried from then
        self.resync = False  # the next call only asks where the standby stands
        self._standby_checkpoint = 0  # the newest checkpoint the standby applied
        self.next_checkpoint_at = 0.0
        self.next_hint_at = 0.0
        self._sent = (-1, 0.0)  # (generation, when) of the last call cut: backup_linger_s
        # The checkpoint the standby's next run starts just after, when it must skip ahead (`skip_trimmed`).
        self._jump: Checkpoint | None = None
        self._status_seen: tuple | None = None  # (standby, when, answered): the last Status call to the one in place
        # The source waits for the standby's backlog (`replay_room`): a frame asks for its view every ack_poll_ms.
        self.replay_full = False

    # --- what the node tells it -------------------------------------------------------------------------
    def restored(self, trimmed: int) -> None:
        """Holding the lock: a restarted Nu's OQu starts after `trimmed`; the standby is asked where it stands."""
        self.batcher.restart(trimmed)
        self.resync = True

    def registered(self, *, new: bool) -> None:
        """Holding the lock: a standby registered (`new`: at another address than the one before, fed from the
        trim point); its first call asks where it stands, in a new codec session."""
        if new:
            self.batcher.restart(self.out.oqu.trimmed_through)
            self.gen += 1
            self.out.tuning.new_standby()
        self.retry_at = 0.0
        self._standby_checkpoint = 0
        self._encoder_reset = True
        self.resync = True

    def standby_gone(self) -> None:
        """Holding the lock: the standby took over (or left): what was prepared for it is void."""
        self.gen += 1

    STANDBY_STATUS_S = 0.5  # how long Nu waits for the standby in place to answer, at another's registration

    def standby_answers(self, standby: Peer) -> bool:
        """Without the lock: whether the standby in place answers a Status call within STANDBY_STATUS_S (the
        last answer is kept for a second: a refused standby retries every 50 ms)."""
        now = self.out.clock()
        seen = self._status_seen
        if seen is not None and seen[0] is standby and now - seen[1] < 1.0:
            return seen[2]
        try:
            standby.status(self.STANDBY_STATUS_S)
            answers = True
        except PeerError:
            answers = False
        self._status_seen = (standby, now, answers)
        return answers

    def status(self) -> dict:
        """Holding the lock: the backup's part of Nu's status."""
        unbatched = self.batcher.unbatched(self.out.oqu)
        return {
            "oqu_unbatched": unbatched,
            "oqu_batched": len(self.out.oqu) - unbatched,
            "batched_through": self.batcher.batched_through,
            "backup_skipped": self.batcher.skipped,
            "backup_confirmed_through": self.batcher.confirmed_through,
            "backup_encode_seconds": round(self.encode_seconds, 3),
            "backup_call_seconds": round(self.call_seconds, 3),
            "bsize": format_bsize(self.bsize),
            "codec_backend": self.run_encoder.encoder.backend,
        }

    # --- what the source and the trim ask ----------------------------------------------------------------
    def bounded(self) -> bool:
        """Whether the backup holds the pipeline back (backup_lag_max): only while a standby answers. One
        that fails is retried later and holds up nothing (its backlog is trimmed by Level-1 acks meanwhile)."""
        return bool(self.cfg.backup_lag_max and self.bsize is not None and self._answering())

    def _answering(self) -> bool:
        return self.out.standby is not None and self.out.clock() >= self.retry_at and self.in_sync()

    def in_sync(self) -> bool:
        """Holding the lock: False from the moment a backup call has gone unanswered for backup_stall_max
        until a call succeeds (a failed one, a timeout after a pause, does not bring it back: the retry
        would hang as long). Nu then neither waits for the standby nor holds OQu's trim back for it; when it
        answers, it skips to the checkpoint (`skip_trimmed`). The first look past the limit counts and
        logs the change."""
        if self.out_of_sync_since is not None:
            return False
        since, stall = self.awaiting_since, self.cfg.backup_stall_max
        if since is None or not stall or self.out.clock() - since < stall:
            return True
        self.out_of_sync_since = since
        self.out.counters["standby_out_of_sync"] += 1
        self.log.warning("%s: standby %s has not answered a backup call for %.1f s: out of sync, the source "
                         "and OQu's trim no longer wait for it (it catches up by a checkpoint when it answers)",
                         self.out.name, self.out.standby.address if self.out.standby else "", self.out.clock() - since)
        return False

    def room(self) -> int:
        """How many more tuples the source may admit before the standby falls more than backup_lag_max
        behind what it has acknowledged."""
        if not self.bounded():
            return 1 << 62
        return max(0, self.cfg.backup_lag_max - (self.out.oqu.last - self.batcher.confirmed_through))

    def replay_room(self) -> int:
        """Holding the lock: how many more tuples the source may admit before a takeover would find more than
        standby_replay_max_ms of operator work waiting (core.recovery_model.replay_room). Unbounded without
        the setting, before the standby's first view, and while it does not answer."""
        view = self.out.tuning.standby_view
        self.replay_full = False
        if not self.cfg.standby_replay_max_ms or view is None or self.bsize is None or not self._answering():
            return 1 << 62
        room = replay_room(self.cfg.standby_replay_max_ms / 1000, view,
                           self.out.oqu.last - self.batcher.confirmed_through, self.bsize)
        self.replay_full = room == 0
        return 1 << 62 if room is None else room

    # --- the loops ---------------------------------------------------------------------------------------
    def loop(self) -> None:
        """One backup call in flight while the next run is cut and compressed (double buffering): the
        standby decodes one run while Nu encodes the next. Calls stay one at a time, so the standby gets
        the codec session's batches in order; a failed call discards what was prepared after it."""
        inflight = self._inflight
        prepared = None if (inflight is not None and inflight.resync) else self._prepare(idle=inflight is None)
        if inflight is not None:
            self._inflight = None
            self._finish(inflight)
        if prepared is None:
            return
        if prepared.peer is not self.out.standby or prepared.gen != self.gen:
            return  # a failure or a new standby since it was cut: the batcher was rewound meanwhile
        prepared.sent_at = self.out.clock()
        with self.out.lock:
            self.awaiting_since = prepared.sent_at
        prepared.pending = prepared.peer.backup_async(prepared.frame, self.cfg.rpc_timeout)
        if prepared.pending.done():  # a transport that answers at once (in memory): nothing to overlap
            self._finish(prepared)
        else:
            self._inflight = prepared

    def probe_loop(self) -> None:
        if not self.probe_link():
            self.out.sleep(0.05)

    def probe_link(self) -> bool:
        """A probe of the standby's link when one is due and the backup link is idle: no call in flight,
        none to resync, no run due. Its time, against its size, goes into the standby link's cost
        (node/bsize_tuning.py). Whether one was sent. A link kept busy by the backup holds little unsent,
        and a takeover's resend over it is short: the push cost stands in until a probe gets through."""
        with self.out.lock:
            now = self.out.clock()
            peer = self.out.standby
            busy = self.resync or self.awaiting_since is not None or (
                self.bsize is not None and self.batcher.unbatched(self.out.oqu) >= self.bsize)
            if peer is None or now < self.retry_at or busy:
                return False
            padding = self.out.tuning.next_probe(now, self.out.counters["probes"])
            if padding is None:
                return False
            size = len(padding)
        t0 = self.out.clock()
        try:
            peer.probe(m.Probe(padding=padding), self.cfg.rpc_timeout)
        except PeerError:
            with self.out.lock:
                self.out.counters["probe_errors"] += 1
            return True
        with self.out.lock:
            self.out.tuning.standby_cost.add(size, self.out.clock() - t0, keep=True)
            self.out.counters["probes"] += 1
            self.out.counters["probe_bytes"] += size
        return True

    def _prepare(self, *, idle: bool) -> _BackupCall | None:
        """The next backup call, encoded (outside the lock), or None when there is nothing to send (after
        waiting a little when no call is in flight either)."""
        with self.out.lock:
            now = self.out.clock()
            if self.out.standby is None or now < self.retry_at:
                if idle:
                    self.out.lock.wait(0.05)
                return None
            self.tune(now)
            peer, epoch, ckpt, gen = self.out.standby, self.out.epoch, self.out.checkpoint, self.gen
            resync = self.resync
            gather = 0.0 if resync else self._gathering(now)
            if gather > 0:
                if idle:
                    self.out.lock.wait(gather)
                return None
            run, ckpt = (None, ckpt) if resync else self._cut(ckpt)
            # With nothing to batch, still tell the standby when the trim point passed what it holds:
            # it skips ahead and never needs those positions (this is all an Upstream Backup standby gets).
            advance = ckpt.input_pos > self._standby_checkpoint and now >= self.next_checkpoint_at
            look = self.replay_full and now >= self.next_checkpoint_at
            hint = self._hint(now)
            if not resync and run is None and not advance and not look and hint is None:
                if idle:
                    self.out.lock.wait(self.cfg.linger_ms / 1000)
                return None
            if resync:
                # Only a question: where does the standby stand? A checkpoint here would move it, and a
                # standby that holds what Nu can still send was skipped past it (at a start-up registration,
                # up to 50,000 tuples at full speed). One behind the trim point gets its jump with the next
                # run, as after any resync (`skip_trimmed`).
                ckpt = Checkpoint()
            elif run is None:
                self.next_checkpoint_at = now + self.cfg.ack_poll_ms / 1000
                # The standby skips to this checkpoint; what it covers but was not cut into batches yet (less
                # than Bsize tuples) is never cut: the next run starts after it. (Cut later, that run repeated
                # what the standby had skipped, and was refused.)
                self.batcher.skip_covered(self.out.skip_point())
            self._sent = (gen, now)
            reset, self._encoder_reset = self._encoder_reset, False
        # Outside the lock: compressing a run takes milliseconds, and the source and primary loops must not
        # wait for it. Only this thread uses the encoder (a registration asks for a reset through a flag).
        t0 = self.out.clock()
        if reset:
            self.run_encoder.reset()
        try:
            runs = [self.run_encoder.encode(run)] if run is not None else []
        except (zstd.ZstdError, MemoryError) as e:
            self._encode_failed(gen, e)
            return None
        frame = m.BackupFrame(epoch=epoch, sender=self.out.name, checkpoint=ckpt, runs=runs,
                              params=self.out.params_at(ckpt.input_pos), hint=hint)
        return _BackupCall(peer, gen, resync, run.last if run is not None else 0, frame, encode_s=self.out.clock() - t0)

    def _cut(self, ckpt: Checkpoint):
        """Holding the lock: the run due now (None: none) and the checkpoint its frame carries, `ckpt` unless
        the standby must skip ahead (`skip_trimmed`)."""
        self.skip_trimmed()
        run = self.batcher.due_run(self.out.oqu, self.cfg.max_batches_per_rpc)
        jump = self._jump
        if run is not None:
            self.out.trim()  # what was held back for this run can go now (the run is a view of it)
            self._jump = None
            if jump is not None and run.first == jump.input_pos + 1:
                ckpt = jump  # the skip's own checkpoint (a later one may have come since the resync)
        elif jump is not None:
            ckpt = jump  # a frame without batches skips the standby to where the next run starts, no further
        return run, ckpt

    def _hint(self, now: float) -> m.RecoveryHint | None:
        """Holding the lock: Nu's part of the standby's predicted recovery, every HINT_EVERY_S (a fit over the
        timed pushes costs a little, and a backup call can be due every millisecond)."""
        if now < self.next_hint_at:
            return None
        hint = self.out.tuning.hint(head=self.out.oqu.last, resend_floor=self.out.resend_floor(),
                                   tuple_bytes=self.out.tuple_bytes())
        if hint is not None:
            self.next_hint_at = now + HINT_EVERY_S
        return hint

    def _encoder_for(self, bsize: int | None) -> RunEncoder:
        cfg = self.cfg
        return RunEncoder(cfg.codec, level=cfg.codec_level, bsize=bsize, dict_samples=cfg.dict_samples,
                          dict_size=cfg.dict_size, native=native.compressor())

    def tune(self, now: float) -> None:
        """Holding the lock, in the backup thread: with recovery_target_ms set, the Bsize chosen for it
        (node/bsize_tuning.py) from now on."""
        choice = self.out.tuning.choose(now, head=self.out.oqu.last, resend_floor=self.out.resend_floor(),
                                       tuple_bytes=self.out.tuple_bytes(), bsize=self.bsize,
                                       changed_before=bool(self.out.counters["bsize_changes"]))
        if choice is None:
            return
        self.log.info("%s: Bsize %s -> %s for recovery_target_ms %g (predicted %.0f ms%s)", self.out.name,
                      format_bsize(self.bsize), format_bsize(choice.value), self.cfg.recovery_target_ms,
                      choice.predicted_s * 1000, "" if choice.met else "; no Bsize meets the target")
        self.set_bsize(choice.value)

    def set_bsize(self, bsize: int | None) -> None:
        """Holding the lock, in the backup thread: Bsize from now on. A new backup generation: what was cut
        since the standby's last answer is cut again at the new size, in a new codec session (the standby
        reads each batch's count from the run, whatever Bsize cut it)."""
        self.bsize = bsize
        self.batcher.bsize = bsize
        self.run_encoder = self._encoder_for(bsize)
        self.void(resync=False)
        self.out.counters["bsize_changes"] += 1

    def _encode_failed(self, gen: int, error: Exception) -> None:
        """A run could not be compressed (zstd or memory): like a failed call, the batches cut since the
        standby's last answer are cut again, in a new codec session after a resync, and the loop goes on
        (the pipeline never waits on a backup that stopped)."""
        self.log.error("%s: compressing a backup run failed (%s): a new codec session after a resync",
                       self.out.name, error)
        with self.out.lock:
            self.out.counters["backup_encode_errors"] += 1
            if gen != self.gen:
                return  # already void: the generation that cut it was rewound
            self.void(resync=True)

    def void(self, *, resync: bool) -> None:
        """Holding the lock: what was cut or prepared since the standby's last answer is void (a failed call,
        a run that did not compress): a new generation, the batches cut again from the last confirmed one,
        in a new codec session; `resync`: ask the standby where it stands first."""
        self.gen += 1
        self.batcher.rewind()
        self._encoder_reset = True
        self.resync = resync

    def skip_trimmed(self) -> None:
        """Holding the lock: when Level-1 acks trimmed OQu past what was cut for the standby (it did not
        answer meanwhile, the backup is not bounded, or a resync found it behind the trim point), the next
        run starts after the checkpoint and carries it (an ordinary jump, `_jump`). Cut from the
        trim point, which a bounded trim can leave behind the checkpoint, with the newest checkpoint, the
        run skipped into covered positions: refused as a gap whenever the standby's last heartbeat of the
        primary was older than that checkpoint, then a resync and a new codec session."""
        ckpt = self.out.checkpoint
        if self.batcher.batched_through < self.out.oqu.trimmed_through <= ckpt.input_pos:
            self.batcher.skip_covered(self.out.skip_point())
            self._jump = ckpt

    def _gathering(self, now: float) -> float:
        """Seconds the backup link still gathers before its next call (0: call now). A call goes once
        backup_linger_s has passed since the last one, or at once when a full run (max_batches_per_rpc) is
        due: at low rates fewer calls carry the same batches with less framing, at full speed nothing waits.
        A new backup generation (a standby that registered, a call that failed) does not wait for the last
        call of the one before: the newcomer gets its backlog, the retry its batches, at once."""
        cfg = self.cfg
        gen, sent_at = self._sent
        if not cfg.backup_linger_s or self.bsize is None or gen != self.gen:
            return 0.0
        if self.batcher.unbatched(self.out.oqu) >= cfg.max_batches_per_rpc * self.bsize:
            return 0.0
        return max(0.0, sent_at + cfg.backup_linger_s - now)

    def _finish(self, call: _BackupCall) -> None:
        peer, ckpt, runs = call.peer, call.frame.checkpoint, call.frame.runs
        try:
            assert call.pending is not None
            ack = call.pending.result()
        except PeerError as e:
            self._answered(call, ok=False)
            if peer is self.out.standby:
                self.out.standby_link(peer.address, e)
            with self.out.lock:
                self.out.counters[f"backup_error_{e.status.lower()}"] += 1
                if peer is not self.out.standby or call.gen != self.gen:
                    # A new standby registered while this call was in flight (closing the old channel cancels
                    # it); the registration already re-cut the batches, and the newcomer is not to wait.
                    return
                retry = after_backup_error(e.status)
                self.void(resync=retry.resync)
                self.retry_at = self.out.clock() + retry.delay
                self.out.trim()  # the backup holds nothing back while the standby is not answering
            return
        self._answered(call, ok=True)
        with self.out.lock:
            if peer is not self.out.standby or call.gen != self.gen:
                return
            self.out.standby_link(peer.address, None)
            self.out.counters["backup_bytes"] += ack.wire_bytes
            if ack.view is not None:
                self.out.tuning.standby_view = ack.view
            self._standby_checkpoint = max(self._standby_checkpoint, min(ckpt.input_pos, ack.applied_through))
            if call.resync:
                # The standby's applied position is the truth after an error or a registration; re-cut from
                # there, as a new generation: its first batches go at once, without gathering. One that holds
                # less than the trim point skips to the checkpoint with its next run (`skip_trimmed`).
                self.batcher.restart(ack.applied_through)
                self.skip_trimmed()
                self.resync = False
                self.gen += 1
                return
            self.batcher.confirm(min(ack.applied_through, call.last))
            self.out.lock.notify_all()  # the source may be waiting for the standby to catch up
            self.out.counters["backup_batches"] += sum(len(r.counts) for r in runs)
            self.out.counters["backup_tuples"] += sum(sum(r.counts) for r in runs)
            self.out.counters["backup_raw_bytes"] += sum(sum(r.encoded.raw_sizes) for r in runs)
            self.out.counters["backup_payload_bytes"] += sum(len(r.encoded.payload) for r in runs)
            self.out.counters["backup_rpcs"] += 1
            self.encode_seconds += call.encode_s
            self.call_seconds += self.out.clock() - call.sent_at

    def _answered(self, call: _BackupCall, *, ok: bool) -> None:
        """A backup call came back; one that succeeded brings an out-of-sync standby back in sync."""
        with self.out.lock:
            if self.awaiting_since == call.sent_at:
                self.awaiting_since = None
            if ok and self.out_of_sync_since is not None:
                self.log.info("%s: standby %s answered again after %.1f s out of sync", self.out.name,
                              call.peer.address, self.out.clock() - self.out_of_sync_since)
                self.out_of_sync_since = None
