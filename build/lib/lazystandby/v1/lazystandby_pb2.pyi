from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Codec(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CODEC_NONE: _ClassVar[Codec]
    CODEC_ZLIB: _ClassVar[Codec]
    CODEC_ZSTD: _ClassVar[Codec]
    CODEC_ZSTD_DICT: _ClassVar[Codec]
    CODEC_ZSTD_STREAM: _ClassVar[Codec]
    CODEC_ZSTD_STREAM_DICT: _ClassVar[Codec]

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_UPSTREAM: _ClassVar[Role]
    ROLE_PRIMARY: _ClassVar[Role]
    ROLE_STANDBY: _ClassVar[Role]
    ROLE_PROMOTING: _ClassVar[Role]
    ROLE_FENCED: _ClassVar[Role]
    ROLE_DOWNSTREAM: _ClassVar[Role]
CODEC_NONE: Codec
CODEC_ZLIB: Codec
CODEC_ZSTD: Codec
CODEC_ZSTD_DICT: Codec
CODEC_ZSTD_STREAM: Codec
CODEC_ZSTD_STREAM_DICT: Codec
ROLE_UNSPECIFIED: Role
ROLE_UPSTREAM: Role
ROLE_PRIMARY: Role
ROLE_STANDBY: Role
ROLE_PROMOTING: Role
ROLE_FENCED: Role
ROLE_DOWNSTREAM: Role

class Level1Ack(_message.Message):
    __slots__ = ("epoch", "input_pos", "output_count")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    INPUT_POS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_COUNT_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    input_pos: int
    output_count: int
    def __init__(self, epoch: _Optional[int] = ..., input_pos: _Optional[int] = ..., output_count: _Optional[int] = ...) -> None: ...

class Level0Ack(_message.Message):
    __slots__ = ("epoch", "received_through")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_THROUGH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    received_through: int
    def __init__(self, epoch: _Optional[int] = ..., received_through: _Optional[int] = ...) -> None: ...

class Frame(_message.Message):
    __slots__ = ("epoch", "sender", "first_pos", "count", "tuples", "checkpoint")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    FIRST_POS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TUPLES_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    sender: str
    first_pos: int
    count: int
    tuples: bytes
    checkpoint: Level1Ack
    def __init__(self, epoch: _Optional[int] = ..., sender: _Optional[str] = ..., first_pos: _Optional[int] = ..., count: _Optional[int] = ..., tuples: _Optional[bytes] = ..., checkpoint: _Optional[_Union[Level1Ack, _Mapping]] = ...) -> None: ...

class FrameAck(_message.Message):
    __slots__ = ("level1", "received_through")
    LEVEL1_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_THROUGH_FIELD_NUMBER: _ClassVar[int]
    level1: Level1Ack
    received_through: int
    def __init__(self, level1: _Optional[_Union[Level1Ack, _Mapping]] = ..., received_through: _Optional[int] = ...) -> None: ...

class BackupBatch(_message.Message):
    __slots__ = ("first_pos", "count", "codec", "session", "index", "payload", "dictionary", "raw_bytes")
    FIRST_POS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    CODEC_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    DICTIONARY_FIELD_NUMBER: _ClassVar[int]
    RAW_BYTES_FIELD_NUMBER: _ClassVar[int]
    first_pos: int
    count: int
    codec: Codec
    session: int
    index: int
    payload: bytes
    dictionary: bytes
    raw_bytes: int
    def __init__(self, first_pos: _Optional[int] = ..., count: _Optional[int] = ..., codec: _Optional[_Union[Codec, str]] = ..., session: _Optional[int] = ..., index: _Optional[int] = ..., payload: _Optional[bytes] = ..., dictionary: _Optional[bytes] = ..., raw_bytes: _Optional[int] = ...) -> None: ...

class BackupFrame(_message.Message):
    __slots__ = ("epoch", "sender", "checkpoint", "batches")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    sender: str
    checkpoint: Level1Ack
    batches: _containers.RepeatedCompositeFieldContainer[BackupBatch]
    def __init__(self, epoch: _Optional[int] = ..., sender: _Optional[str] = ..., checkpoint: _Optional[_Union[Level1Ack, _Mapping]] = ..., batches: _Optional[_Iterable[_Union[BackupBatch, _Mapping]]] = ...) -> None: ...

class BackupAck(_message.Message):
    __slots__ = ("applied_through",)
    APPLIED_THROUGH_FIELD_NUMBER: _ClassVar[int]
    applied_through: int
    def __init__(self, applied_through: _Optional[int] = ...) -> None: ...

class OutputFrame(_message.Message):
    __slots__ = ("epoch", "sender", "first_oseq", "count", "tuples")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    FIRST_OSEQ_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TUPLES_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    sender: str
    first_oseq: int
    count: int
    tuples: bytes
    def __init__(self, epoch: _Optional[int] = ..., sender: _Optional[str] = ..., first_oseq: _Optional[int] = ..., count: _Optional[int] = ..., tuples: _Optional[bytes] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("sender", "epoch")
    SENDER_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    sender: str
    epoch: int
    def __init__(self, sender: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class HeartbeatReply(_message.Message):
    __slots__ = ("node", "role", "epoch", "level0", "received_through")
    NODE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEVEL0_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_THROUGH_FIELD_NUMBER: _ClassVar[int]
    node: str
    role: Role
    epoch: int
    level0: Level0Ack
    received_through: int
    def __init__(self, node: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., epoch: _Optional[int] = ..., level0: _Optional[_Union[Level0Ack, _Mapping]] = ..., received_through: _Optional[int] = ...) -> None: ...

class TakeoverRequest(_message.Message):
    __slots__ = ("node", "epoch", "address", "resend_from")
    NODE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    RESEND_FROM_FIELD_NUMBER: _ClassVar[int]
    node: str
    epoch: int
    address: str
    resend_from: int
    def __init__(self, node: _Optional[str] = ..., epoch: _Optional[int] = ..., address: _Optional[str] = ..., resend_from: _Optional[int] = ...) -> None: ...

class TakeoverReply(_message.Message):
    __slots__ = ("epoch", "delivered_through", "checkpoint", "head_pos", "resend_from")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_THROUGH_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    HEAD_POS_FIELD_NUMBER: _ClassVar[int]
    RESEND_FROM_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    delivered_through: int
    checkpoint: Level1Ack
    head_pos: int
    resend_from: int
    def __init__(self, epoch: _Optional[int] = ..., delivered_through: _Optional[int] = ..., checkpoint: _Optional[_Union[Level1Ack, _Mapping]] = ..., head_pos: _Optional[int] = ..., resend_from: _Optional[int] = ...) -> None: ...

class RegisterStandbyRequest(_message.Message):
    __slots__ = ("node", "address")
    NODE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    node: str
    address: str
    def __init__(self, node: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class RegisterStandbyReply(_message.Message):
    __slots__ = ("epoch", "primary_address")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    primary_address: str
    def __init__(self, epoch: _Optional[int] = ..., primary_address: _Optional[str] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatusReply(_message.Message):
    __slots__ = ("node", "role", "epoch", "json")
    NODE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    node: str
    role: Role
    epoch: int
    json: str
    def __init__(self, node: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., epoch: _Optional[int] = ..., json: _Optional[str] = ...) -> None: ...

class FeedState(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class FetchReply(_message.Message):
    __slots__ = ("payloads",)
    PAYLOADS_FIELD_NUMBER: _ClassVar[int]
    payloads: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, payloads: _Optional[_Iterable[str]] = ...) -> None: ...

class EmitRequest(_message.Message):
    __slots__ = ("range_starts", "range_ends", "selected")
    RANGE_STARTS_FIELD_NUMBER: _ClassVar[int]
    RANGE_ENDS_FIELD_NUMBER: _ClassVar[int]
    SELECTED_FIELD_NUMBER: _ClassVar[int]
    range_starts: _containers.RepeatedScalarFieldContainer[int]
    range_ends: _containers.RepeatedScalarFieldContainer[int]
    selected: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, range_starts: _Optional[_Iterable[int]] = ..., range_ends: _Optional[_Iterable[int]] = ..., selected: _Optional[_Iterable[int]] = ...) -> None: ...

class EmitReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
