"""Every exception the runtime raises, in one hierarchy under LazyStandbyException.

Families:
- protocol errors (LazyStandbyError and below): a peer broke a rule of the protocol. Each names the node,
  the stream and the sequence number involved, says what was expected and what was got, and carries the
  status the gRPC adapter answers with (`status`) and the counter it raises (`counter`), so that a peer sees
  a precise reason and the node's state is left as it was;
- authorization (PermissionDenied, Unauthenticated): protocol errors decided from the caller's certificate;
- held runs (Released, Unreadable): a sealed backup run let go, or not decodable;
- roles (IllegalTransition): a role change the state machine refuses;
- peers (PeerError): a call to a peer failed, with the status it failed with;
- sources (SourceGap): records needed were deleted from the source before they were read;
- input from users (SettingError, PredicateError, ResultsFormatError): also ValueErrors, as before.
"""

from __future__ import annotations

from enum import StrEnum


class LazyStandbyException(Exception):
    """Root of every exception the runtime raises."""


class Status(StrEnum):
    """The status a call ends with, named as gRPC names its codes (the transport maps them one to one).

    Retry policies are keyed on these, never on message text."""

    OK = "OK"
    CANCELLED = "CANCELLED"
    UNKNOWN = "UNKNOWN"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    ABORTED = "ABORTED"
    OUT_OF_RANGE = "OUT_OF_RANGE"
    UNIMPLEMENTED = "UNIMPLEMENTED"
    INTERNAL = "INTERNAL"
    UNAVAILABLE = "UNAVAILABLE"
    DATA_LOSS = "DATA_LOSS"
    UNAUTHENTICATED = "UNAUTHENTICATED"

    @property
    def unreachable(self) -> bool:
        """The peer may be gone (or never answered): nothing is known about its state."""
        return self in (Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED, Status.CANCELLED, Status.UNKNOWN)


class LazyStandbyError(LazyStandbyException):
    """Base of every protocol error. `status` is the gRPC status the transport answers with."""

    status = Status.INTERNAL
    counter = "errors"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnknownStream(LazyStandbyError):
    status = Status.INVALID_ARGUMENT
    counter = "unknown_stream"


class SequenceGap(LazyStandbyError):
    """A position or sequence number skipped ahead of the expected one."""

    status = Status.OUT_OF_RANGE
    counter = "sequence_gap"


class DuplicateSequence(LazyStandbyError):
    """A position or sequence number at or below one already accepted."""

    status = Status.ALREADY_EXISTS
    counter = "duplicate_sequence"


class NonMonotonicSequence(LazyStandbyError):
    status = Status.INVALID_ARGUMENT
    counter = "non_monotonic_sequence"


class StaleEpoch(LazyStandbyError):
    """A peer speaks for an epoch older than the one this node has seen: it was demoted.

    ABORTED rather than FAILED_PRECONDITION so that a sender can tell "you were fenced" from "wrong role".
    """

    status = Status.ABORTED
    counter = "stale_epoch"


class WrongRole(LazyStandbyError):
    status = Status.FAILED_PRECONDITION
    counter = "wrong_role"


class CorruptBatch(LazyStandbyError):
    """Bytes that do not decode: bad compression, bad framing, a codec session out of order."""

    status = Status.DATA_LOSS
    counter = "corrupt_batch"


class OversizedMessage(LazyStandbyError):
    status = Status.RESOURCE_EXHAUSTED
    counter = "oversized"


class QueueFull(LazyStandbyError):
    """Backpressure: the receiver has no room now; the sender keeps the data and retries later."""

    status = Status.RESOURCE_EXHAUSTED
    counter = "queue_full"


class MalformedMessage(LazyStandbyError):
    """A call whose bytes are not a message of the protocol (not protobuf, an unknown enum value)."""

    status = Status.INVALID_ARGUMENT
    counter = "malformed_message"


class UnknownEpoch(LazyStandbyError):
    """A call in an epoch no takeover announced to this node. Epochs move only by takeovers: a frame that
    carries a higher epoch moves nothing, and its sender (a primary this node has not heard of, after a
    restart) announces itself with a Takeover."""

    status = Status.FAILED_PRECONDITION
    counter = "unknown_epoch"


class PrimaryAlive(LazyStandbyError):
    """A takeover declined by Nd because the primary in force delivered to it within its lease: the
    standby lost its primary, not the pipeline (a partition between the two, or the standby cut off and
    back). FAILED_PRECONDITION, not ABORTED: the sender was not fenced, and withdraws its epoch."""

    status = Status.FAILED_PRECONDITION
    counter = "takeover_declined"


class PrimaryHeard(PrimaryAlive):
    """A takeover declined by Nd past the primary's lease: its last frame reached Nd well after the standby
    last heard it (core.recovery.PrimaryLease.heard_since_lost), so the standby is cut off from a primary
    that lives. Answered and handled as PrimaryAlive; counted apart."""

    counter = "takeover_declined_unheard"


class StandbyInPlace(LazyStandbyError):
    """A registration refused by Nu: another standby is registered, in sync, and answers. A standby is
    replaced only once it is gone or out of sync, or by a takeover (which leaves Nu with none), never
    by whoever registers next (a forged registration once moved Nu's backup to a port where nothing
    listened). The refused standby retries, and gets in once the one in place is gone."""

    status = Status.ALREADY_EXISTS
    counter = "standby_in_place"


class NotThePrimary(LazyStandbyError):
    """A delivery from a node that is not the primary of the current epoch (a client replaying or
    forging calls): refused before it touches the output or the counters the correctness alerts use."""

    status = Status.PERMISSION_DENIED
    counter = "not_the_primary"


class SourceUnavailable(LazyStandbyError):
    """Nu cannot reach where its restart state lives (the source's commits) to record a change."""

    status = Status.UNAVAILABLE
    counter = "source_unavailable"


class MalformedRecord(LazyStandbyError):
    status = Status.INVALID_ARGUMENT
    counter = "malformed_record"


# --- authorization ----------------------------------------------------------------------------------
class PermissionDenied(LazyStandbyError):
    status = Status.PERMISSION_DENIED
    counter = "permission_denied"


class Unauthenticated(LazyStandbyError):
    status = Status.UNAUTHENTICATED
    counter = "unauthenticated"


# --- held runs --------------------------------------------------------------------------------------
class Released(LazyStandbyException):
    """A run that was let go (`trim`: covered or processed) since the caller took it: needed no more."""


class Unreadable(LazyStandbyException):
    """A sealed run that did not decode (`error`, what eager decoding would have raised), from position `at`;
    `error` None: the run was let go meanwhile (Released), and its inputs are covered."""

    def __init__(self, at: int, error: LazyStandbyError | None) -> None:
        super().__init__(f"input {at}: {error}")
        self.at, self.error = at, error


# --- measurements ------------------------------------------------------------------------------------
class ProbeFailed(LazyStandbyException):
    """A copy of the operator raised on a probe's inputs (node/operator_probe.py): the probe measured
    nothing. Never fatal to the node: the live operator is not touched, and the fit goes on from its calls."""


# --- roles, peers and sources -----------------------------------------------------------------------
class IllegalTransition(LazyStandbyException):
    """A role change the state machine does not allow (core.roles.TRANSITIONS)."""


class PeerError(LazyStandbyException):
    """A call to a peer failed with `status` (UNAVAILABLE when unreachable). `refused`: nothing is there (the
    peer's host refused the connection, or its name resolves to no address), as opposed to a call that
    timed out."""

    def __init__(self, status: Status | str, message: str, *, refused: bool = False) -> None:
        self.status = Status(status)
        super().__init__(f"{self.status}: {message}")
        self.message = message
        self.refused = refused

    @property
    def unreachable(self) -> bool:
        return self.status.unreachable


class LoopTold(LazyStandbyException):
    """Raised by a node's loop that was told to die (SIGUSR1: the chaos test of a loop's death)."""


class SourceGap(LazyStandbyException, RuntimeError):
    """Records the source no longer holds were needed: deleted (retention, truncation) before Nu read them or
    before a restart could read them back. Nu stops admitting there instead of skipping: skipping would pass
    off an incomplete stream as the whole one."""


class LinkError(LazyStandbyException, RuntimeError):
    """Shaped links (harness.links) cannot be made here, or one of their commands failed: the message says
    which, and what is needed (root, iproute2)."""


# --- input from users -------------------------------------------------------------------------------
class SettingError(LazyStandbyException, ValueError):
    """A setting with a value it does not accept: the message is one line that names the setting (its
    flag and env var) and says what it accepts."""


class PredicateError(LazyStandbyException, ValueError):
    """A predicate that does not parse, or names a field or type the ticks do not have."""


class QueryError(LazyStandbyException, ValueError):
    """A query text (formats/query.py) that declares no query this engine runs; the message says why."""


class SchemaError(LazyStandbyException, ValueError):
    """A table declaration (CREATE TABLE) this engine cannot read: the message names the table and the
    column or clause, and says what is supported."""


class UnsupportedSql(LazyStandbyException, ValueError):
    """A SQL text the engine cannot run: the message is one line that names the construct and says what
    is supported (docs/sql.md)."""


class PipelineError(LazyStandbyException, ValueError):
    """A pipeline file that declares no pipeline this engine runs: the message names the statement."""


class ResultsFormatError(LazyStandbyException, ValueError):
    """The results topic holds records whose output sequence numbers cannot be known."""
