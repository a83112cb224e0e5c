from mlx_responses.v1 import events_pb2 as _events_pb2
from mlx_responses.v1 import responses_pb2 as _responses_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateResponseRequest(_message.Message):
    __slots__ = ("params",)
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    params: _responses_pb2.CreateResponseParams
    def __init__(self, params: _Optional[_Union[_responses_pb2.CreateResponseParams, _Mapping]] = ...) -> None: ...

class CreateResponseResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _responses_pb2.Response
    def __init__(self, response: _Optional[_Union[_responses_pb2.Response, _Mapping]] = ...) -> None: ...

class StreamResponseRequest(_message.Message):
    __slots__ = ("params",)
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    params: _responses_pb2.CreateResponseParams
    def __init__(self, params: _Optional[_Union[_responses_pb2.CreateResponseParams, _Mapping]] = ...) -> None: ...

class StreamResponseResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_events_pb2.ResponseEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[_events_pb2.ResponseEvent, _Mapping]]] = ...) -> None: ...

class CountInputTokensRequest(_message.Message):
    __slots__ = ("params",)
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    params: _responses_pb2.CreateResponseParams
    def __init__(self, params: _Optional[_Union[_responses_pb2.CreateResponseParams, _Mapping]] = ...) -> None: ...

class CountInputTokensResponse(_message.Message):
    __slots__ = ("input_tokens",)
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Model(_message.Message):
    __slots__ = ("id", "created", "owned_by", "path", "context_length", "loaded", "memory_bytes", "expires_at", "pinned", "failure")
    ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    OWNED_BY_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_LENGTH_FIELD_NUMBER: _ClassVar[int]
    LOADED_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    id: str
    created: int
    owned_by: str
    path: str
    context_length: int
    loaded: bool
    memory_bytes: int
    expires_at: int
    pinned: bool
    failure: ModelFailure
    def __init__(self, id: _Optional[str] = ..., created: _Optional[int] = ..., owned_by: _Optional[str] = ..., path: _Optional[str] = ..., context_length: _Optional[int] = ..., loaded: _Optional[bool] = ..., memory_bytes: _Optional[int] = ..., expires_at: _Optional[int] = ..., pinned: _Optional[bool] = ..., failure: _Optional[_Union[ModelFailure, _Mapping]] = ...) -> None: ...

class ModelFailure(_message.Message):
    __slots__ = ("message", "reload_after")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RELOAD_AFTER_FIELD_NUMBER: _ClassVar[int]
    message: str
    reload_after: int
    def __init__(self, message: _Optional[str] = ..., reload_after: _Optional[int] = ...) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[Model]
    def __init__(self, models: _Optional[_Iterable[_Union[Model, _Mapping]]] = ...) -> None: ...

class LoadModelRequest(_message.Message):
    __slots__ = ("model", "keep_alive_seconds")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    KEEP_ALIVE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    model: str
    keep_alive_seconds: float
    def __init__(self, model: _Optional[str] = ..., keep_alive_seconds: _Optional[float] = ...) -> None: ...

class LoadModelResponse(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: Model
    def __init__(self, model: _Optional[_Union[Model, _Mapping]] = ...) -> None: ...

class UnloadModelRequest(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: str
    def __init__(self, model: _Optional[str] = ...) -> None: ...

class UnloadModelResponse(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: Model
    def __init__(self, model: _Optional[_Union[Model, _Mapping]] = ...) -> None: ...
