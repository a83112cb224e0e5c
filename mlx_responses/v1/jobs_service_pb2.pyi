from mlx_responses.v1 import events_pb2 as _events_pb2
from mlx_responses.v1 import responses_pb2 as _responses_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateJobRequest(_message.Message):
    __slots__ = ("params",)
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    params: _responses_pb2.CreateResponseParams
    def __init__(self, params: _Optional[_Union[_responses_pb2.CreateResponseParams, _Mapping]] = ...) -> None: ...

class CreateJobResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _responses_pb2.Response
    def __init__(self, response: _Optional[_Union[_responses_pb2.Response, _Mapping]] = ...) -> None: ...

class CancelResponseRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class CancelResponseResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _responses_pb2.Response
    def __init__(self, response: _Optional[_Union[_responses_pb2.Response, _Mapping]] = ...) -> None: ...

class WatchJobRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class WatchJobResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_events_pb2.ResponseEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[_events_pb2.ResponseEvent, _Mapping]]] = ...) -> None: ...

class StreamJobEventsRequest(_message.Message):
    __slots__ = ("id", "starting_after")
    ID_FIELD_NUMBER: _ClassVar[int]
    STARTING_AFTER_FIELD_NUMBER: _ClassVar[int]
    id: str
    starting_after: int
    def __init__(self, id: _Optional[str] = ..., starting_after: _Optional[int] = ...) -> None: ...

class StreamJobEventsResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_events_pb2.ResponseEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[_events_pb2.ResponseEvent, _Mapping]]] = ...) -> None: ...
