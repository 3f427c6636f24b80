"""Algorithm 1 (seed 000 section 3.4): cutting Nu's backup into batches of Bsize tuples for the standby.

Nu holds every tuple in OQu until a Level-1 ack trims it. The batcher keeps a watermark over OQu:
`batched_through` is the last position handed to the standby, `confirmed_through` the last one the standby
acknowledged. Tuples past the watermark are the "unbatched" part of OQu, the only part Nu must resend to a
promoted standby. Keeping batched tuples until the Level-1 ack costs no more memory than Bsize = inf does,
and lets Nu re-seed a standby that restarted empty.

    Bsize = 1    every tuple is its own batch: Active Standby
    Bsize = inf  (None) nothing is ever cut: Upstream Backup
"""

from __future__ import annotations

from .codec import BatchEncoder, CodecName, RunCompressorFactory, train_dictionary
from .messages import BackupRun
from .queues import KeyedQueue
from .tuples import TupleBatch, encode_runs, layout_runs

INFINITE = None

# A dictionary codec's defaults. A streaming context learns from its own history after a few batches, so the
# dictionary matters most in a session's first batches, and it travels once per session: sooner and smaller
# wins: 500 samples and 2 KB give a session's first batches a smaller backup than 2,000 and 4 KB, and
# the same over long sessions (docs/benchmarks.md, "Tuning": codec parameters).
DICT_SAMPLES = 500
DICT_SIZE = 2048

# How often (in tuples) a streaming backup session opens a new zstd frame (EncodedRun.fresh). A standby
# leaves the runs Nd's acks cover undecoded, but a run it needs decodes only from the last fresh run before
# it: at most this many tuples of extra decoding (milliseconds), while at this spacing the frames' restarts
# cost next to nothing in bytes (each restarts the window the codec compresses against).
FRESH_EVERY = 65_536


def parse_bsize(text: str | int | None) -> int | None:
    """'inf' (or None) means never batch; otherwise a positive number of tuples."""
    if text is None or (isinstance(text, str) and text.strip().lower() in ("inf", "infinity", "")):
        return INFINITE
    n = int(text)
    if n < 1:
        raise ValueError(f"Bsize must be >= 1 or 'inf', got {text!r}")
    return n


def format_bsize(bsize: int | None) -> str:
    """The text `parse_bsize` reads back: a number, or 'inf'."""
    return "inf" if bsize is INFINITE else str(bsize)


class BackupBatcher:
    """Decides which positions of OQu go to the standby next, Bsize at a time."""

    def __init__(self, bsize: int | None) -> None:
        self.bsize = bsize
        self.batched_through = 0
        self.confirmed_through = 0
        self.skipped = 0  # positions trimmed before they were batched: the standby never gets them

    def unbatched(self, oqu: KeyedQueue) -> int:
        """Tuples in OQu that no batch has covered yet."""
        return max(0, oqu.last - max(self.batched_through, oqu.trimmed_through))

    def due(self, oqu: KeyedQueue, max_batches: int) -> list[TupleBatch]:
        """Lines 12-16: while Bsize tuples are queued past the watermark, cut them into a batch."""
        run = self.due_run(oqu, max_batches)
        if run is None:
            return []
        assert self.bsize is not None
        return [run.slice(k, k + self.bsize) for k in range(run.first, run.end, self.bsize)]

    def due_run(self, oqu: KeyedQueue, max_batches: int) -> TupleBatch | None:
        """The tuples of the next (at most `max_batches`) whole batches, as one run of a multiple of Bsize
        tuples (the caller cuts it: tuples.encode_runs), or None when not one batch is due.

        Positions trimmed by a Level-1 ack before they were batched are skipped: Nd already holds their
        outputs, so the standby never needs them (it resumes from the checkpoint that trimmed them).
        """
        if self.bsize is INFINITE:
            return None
        self.skip_covered(oqu.trimmed_through)
        k = min(max_batches, (oqu.last - self.batched_through) // self.bsize)
        if k <= 0:
            return None
        run = oqu.read(self.batched_through + 1, k * self.bsize)
        assert run is not None and len(run) == k * self.bsize
        self.batched_through = run.last
        return run

    def skip_covered(self, through: int) -> None:
        """Positions through `through` are covered (Nd holds their outputs): those not batched yet never
        will be, and the standby never needs them."""
        if through > self.batched_through:
            self.skipped += through - self.batched_through
            self.batched_through = through
            self.confirmed_through = max(self.confirmed_through, through)

    def confirm(self, through: int) -> None:
        self.confirmed_through = max(self.confirmed_through, through)

    def rewind(self) -> None:
        """The batches in flight were not acknowledged: cut them again (the receiver skips repeats)."""
        self.batched_through = self.confirmed_through

    def restart(self, through: int) -> None:
        """A new standby, empty: everything after `through` (the trim point) is still to be batched."""
        self.batched_through = through
        self.confirmed_through = through


class RunEncoder:
    """The sending end of the backup link's codec (Algorithm 1): a run cut by BackupBatcher becomes Bsize
    batches, each encoded (seqs written as steps, tuples.encode_runs) and compressed on its own, in order,
    in the link's codec session. A dictionary codec first trains its dictionary on `dict_samples`
    single-tuple samples (the unit a dictionary helps most), the first tuples it is given, and then opens a
    new session carrying it: at full speed the first run brings them all, and it already goes out with the
    dictionary (the runs of a slow start go without until then).

    One caller at a time. `reset` starts a new session, as after a reconnect or a refused call: the
    receiver resets too."""

    def __init__(self, codec: CodecName | str, *, level: int = 0, bsize: int | None = 10,
                 dict_samples: int = DICT_SAMPLES, dict_size: int = DICT_SIZE, fresh_every: int = FRESH_EVERY,
                 native: RunCompressorFactory | None = None) -> None:
        if dict_samples < 1 or dict_size < 1:
            raise ValueError(f"a dictionary needs dict_samples >= 1 and dict_size >= 1, not {dict_samples} "
                             f"and {dict_size}")
        self.bsize = bsize
        self.encoder = BatchEncoder(CodecName(codec), level=level, bsize=bsize, native=native)
        self.dict_samples, self.dict_size = dict_samples, dict_size
        self.fresh_every = fresh_every
        self._samples: list[bytes] = []
        self._since_fresh = 0

    def reset(self) -> None:
        self.encoder.reset()
        self._since_fresh = 0

    def encode(self, run: TupleBatch) -> BackupRun:
        bsize = self.bsize
        if bsize is None:
            raise ValueError("Bsize inf cuts no backup batches")
        if self.encoder.needs_dictionary:
            need = self.dict_samples - len(self._samples)
            self._samples.extend(encode_runs(run.slice(run.first, run.first + need), 1, seq_deltas=True))
            if len(self._samples) >= self.dict_samples:
                self.encoder.set_dictionary(train_dictionary(self._samples, self.dict_size))
                self._samples = []
        if len(run) % bsize:
            raise ValueError(f"a backup run of {len(run)} tuples is not whole batches of {bsize}")
        fresh = self._since_fresh >= self.fresh_every
        encoded = self.encoder.encode_layout(layout_runs(run, bsize, seq_deltas=True), fresh=fresh)
        self._since_fresh = len(run) if encoded.fresh else self._since_fresh + len(run)
        return BackupRun(first=run.first, counts=[bsize] * len(encoded), encoded=encoded)
