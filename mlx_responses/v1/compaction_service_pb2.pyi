from mlx_responses.v1 import responses_pb2 as _responses_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CompactResponseRequest(_message.Message):
    __slots__ = ("params", "keep_tokens")
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    KEEP_TOKENS_FIELD_NUMBER: _ClassVar[int]
    params: _responses_pb2.CreateResponseParams
    keep_tokens: int
    def __init__(self, params: _Optional[_Union[_responses_pb2.CreateResponseParams, _Mapping]] = ..., keep_tokens: _Optional[int] = ...) -> None: ...

class CompactResponseResponse(_message.Message):
    __slots__ = ("id", "created_at", "model", "output", "usage")
    ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    id: str
    created_at: int
    model: str
    output: _containers.RepeatedCompositeFieldContainer[_responses_pb2.Item]
    usage: _responses_pb2.Usage
    def __init__(self, id: _Optional[str] = ..., created_at: _Optional[int] = ..., model: _Optional[str] = ..., output: _Optional[_Iterable[_Union[_responses_pb2.Item, _Mapping]]] = ..., usage: _Optional[_Union[_responses_pb2.Usage, _Mapping]] = ...) -> None: ...
