from mlx_responses.v1 import responses_pb2 as _responses_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_TYPE_UNSPECIFIED: _ClassVar[EventType]
    EVENT_TYPE_RESPONSE_CREATED: _ClassVar[EventType]
    EVENT_TYPE_RESPONSE_IN_PROGRESS: _ClassVar[EventType]
    EVENT_TYPE_RESPONSE_COMPLETED: _ClassVar[EventType]
    EVENT_TYPE_RESPONSE_INCOMPLETE: _ClassVar[EventType]
    EVENT_TYPE_RESPONSE_FAILED: _ClassVar[EventType]
    EVENT_TYPE_RESPONSE_QUEUED: _ClassVar[EventType]
    EVENT_TYPE_OUTPUT_ITEM_ADDED: _ClassVar[EventType]
    EVENT_TYPE_OUTPUT_ITEM_DONE: _ClassVar[EventType]
    EVENT_TYPE_CONTENT_PART_ADDED: _ClassVar[EventType]
    EVENT_TYPE_CONTENT_PART_DONE: _ClassVar[EventType]
    EVENT_TYPE_OUTPUT_TEXT_DELTA: _ClassVar[EventType]
    EVENT_TYPE_OUTPUT_TEXT_DONE: _ClassVar[EventType]
    EVENT_TYPE_REASONING_TEXT_DELTA: _ClassVar[EventType]
    EVENT_TYPE_REASONING_TEXT_DONE: _ClassVar[EventType]
    EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DELTA: _ClassVar[EventType]
    EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DONE: _ClassVar[EventType]
    EVENT_TYPE_COMPACTION_STARTED: _ClassVar[EventType]
    EVENT_TYPE_COMPACTION_COMPLETED: _ClassVar[EventType]
    EVENT_TYPE_REASONING_SUMMARY_PART_ADDED: _ClassVar[EventType]
    EVENT_TYPE_REASONING_SUMMARY_PART_DONE: _ClassVar[EventType]
    EVENT_TYPE_REASONING_SUMMARY_TEXT_DELTA: _ClassVar[EventType]
    EVENT_TYPE_REASONING_SUMMARY_TEXT_DONE: _ClassVar[EventType]
    EVENT_TYPE_CUSTOM_TOOL_CALL_INPUT_DELTA: _ClassVar[EventType]
    EVENT_TYPE_CUSTOM_TOOL_CALL_INPUT_DONE: _ClassVar[EventType]
    EVENT_TYPE_SHELL_CALL_COMMAND_ADDED: _ClassVar[EventType]
    EVENT_TYPE_SHELL_CALL_COMMAND_DELTA: _ClassVar[EventType]
    EVENT_TYPE_SHELL_CALL_COMMAND_DONE: _ClassVar[EventType]
EVENT_TYPE_UNSPECIFIED: EventType
EVENT_TYPE_RESPONSE_CREATED: EventType
EVENT_TYPE_RESPONSE_IN_PROGRESS: EventType
EVENT_TYPE_RESPONSE_COMPLETED: EventType
EVENT_TYPE_RESPONSE_INCOMPLETE: EventType
EVENT_TYPE_RESPONSE_FAILED: EventType
EVENT_TYPE_RESPONSE_QUEUED: EventType
EVENT_TYPE_OUTPUT_ITEM_ADDED: EventType
EVENT_TYPE_OUTPUT_ITEM_DONE: EventType
EVENT_TYPE_CONTENT_PART_ADDED: EventType
EVENT_TYPE_CONTENT_PART_DONE: EventType
EVENT_TYPE_OUTPUT_TEXT_DELTA: EventType
EVENT_TYPE_OUTPUT_TEXT_DONE: EventType
EVENT_TYPE_REASONING_TEXT_DELTA: EventType
EVENT_TYPE_REASONING_TEXT_DONE: EventType
EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DELTA: EventType
EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DONE: EventType
EVENT_TYPE_COMPACTION_STARTED: EventType
EVENT_TYPE_COMPACTION_COMPLETED: EventType
EVENT_TYPE_REASONING_SUMMARY_PART_ADDED: EventType
EVENT_TYPE_REASONING_SUMMARY_PART_DONE: EventType
EVENT_TYPE_REASONING_SUMMARY_TEXT_DELTA: EventType
EVENT_TYPE_REASONING_SUMMARY_TEXT_DONE: EventType
EVENT_TYPE_CUSTOM_TOOL_CALL_INPUT_DELTA: EventType
EVENT_TYPE_CUSTOM_TOOL_CALL_INPUT_DONE: EventType
EVENT_TYPE_SHELL_CALL_COMMAND_ADDED: EventType
EVENT_TYPE_SHELL_CALL_COMMAND_DELTA: EventType
EVENT_TYPE_SHELL_CALL_COMMAND_DONE: EventType

class ResponseSnapshotEvent(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _responses_pb2.Response
    def __init__(self, response: _Optional[_Union[_responses_pb2.Response, _Mapping]] = ...) -> None: ...

class OutputItemEvent(_message.Message):
    __slots__ = ("output_index", "item")
    OUTPUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    ITEM_FIELD_NUMBER: _ClassVar[int]
    output_index: int
    item: _responses_pb2.Item
    def __init__(self, output_index: _Optional[int] = ..., item: _Optional[_Union[_responses_pb2.Item, _Mapping]] = ...) -> None: ...

class ContentPartEvent(_message.Message):
    __slots__ = ("item_id", "output_index", "content_index", "part")
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    CONTENT_INDEX_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    item_id: str
    output_index: int
    content_index: int
    part: _responses_pb2.ContentPart
    def __init__(self, item_id: _Optional[str] = ..., output_index: _Optional[int] = ..., content_index: _Optional[int] = ..., part: _Optional[_Union[_responses_pb2.ContentPart, _Mapping]] = ...) -> None: ...

class TextDeltaEvent(_message.Message):
    __slots__ = ("item_id", "output_index", "content_index", "delta", "logprobs")
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    CONTENT_INDEX_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: _containers.RepeatedCompositeFieldContainer[_responses_pb2.Logprob]
    def __init__(self, item_id: _Optional[str] = ..., output_index: _Optional[int] = ..., content_index: _Optional[int] = ..., delta: _Optional[str] = ..., logprobs: _Optional[_Iterable[_Union[_responses_pb2.Logprob, _Mapping]]] = ...) -> None: ...

class TextDoneEvent(_message.Message):
    __slots__ = ("item_id", "output_index", "content_index", "text", "name", "logprobs")
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    CONTENT_INDEX_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    item_id: str
    output_index: int
    content_index: int
    text: str
    name: str
    logprobs: _containers.RepeatedCompositeFieldContainer[_responses_pb2.Logprob]
    def __init__(self, item_id: _Optional[str] = ..., output_index: _Optional[int] = ..., content_index: _Optional[int] = ..., text: _Optional[str] = ..., name: _Optional[str] = ..., logprobs: _Optional[_Iterable[_Union[_responses_pb2.Logprob, _Mapping]]] = ...) -> None: ...

class CompactionStartedEvent(_message.Message):
    __slots__ = ("response_id", "input_tokens")
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    response_id: str
    input_tokens: int
    def __init__(self, response_id: _Optional[str] = ..., input_tokens: _Optional[int] = ...) -> None: ...

class CompactionCompletedEvent(_message.Message):
    __slots__ = ("response_id", "input_tokens_before", "input_tokens_after")
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_BEFORE_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_AFTER_FIELD_NUMBER: _ClassVar[int]
    response_id: str
    input_tokens_before: int
    input_tokens_after: int
    def __init__(self, response_id: _Optional[str] = ..., input_tokens_before: _Optional[int] = ..., input_tokens_after: _Optional[int] = ...) -> None: ...

class ReasoningSummaryPartEvent(_message.Message):
    __slots__ = ("item_id", "output_index", "summary_index", "part")
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_INDEX_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    item_id: str
    output_index: int
    summary_index: int
    part: _responses_pb2.SummaryText
    def __init__(self, item_id: _Optional[str] = ..., output_index: _Optional[int] = ..., summary_index: _Optional[int] = ..., part: _Optional[_Union[_responses_pb2.SummaryText, _Mapping]] = ...) -> None: ...

class ResponseEvent(_message.Message):
    __slots__ = ("type", "sequence_number", "snapshot", "output_item", "content_part", "text_delta", "text_done", "compaction_started", "compaction_completed", "summary_part")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_ITEM_FIELD_NUMBER: _ClassVar[int]
    CONTENT_PART_FIELD_NUMBER: _ClassVar[int]
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    TEXT_DONE_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_STARTED_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_PART_FIELD_NUMBER: _ClassVar[int]
    type: EventType
    sequence_number: int
    snapshot: ResponseSnapshotEvent
    output_item: OutputItemEvent
    content_part: ContentPartEvent
    text_delta: TextDeltaEvent
    text_done: TextDoneEvent
    compaction_started: CompactionStartedEvent
    compaction_completed: CompactionCompletedEvent
    summary_part: ReasoningSummaryPartEvent
    def __init__(self, type: _Optional[_Union[EventType, str]] = ..., sequence_number: _Optional[int] = ..., snapshot: _Optional[_Union[ResponseSnapshotEvent, _Mapping]] = ..., output_item: _Optional[_Union[OutputItemEvent, _Mapping]] = ..., content_part: _Optional[_Union[ContentPartEvent, _Mapping]] = ..., text_delta: _Optional[_Union[TextDeltaEvent, _Mapping]] = ..., text_done: _Optional[_Union[TextDoneEvent, _Mapping]] = ..., compaction_started: _Optional[_Union[CompactionStartedEvent, _Mapping]] = ..., compaction_completed: _Optional[_Union[CompactionCompletedEvent, _Mapping]] = ..., summary_part: _Optional[_Union[ReasoningSummaryPartEvent, _Mapping]] = ...) -> None: ...
