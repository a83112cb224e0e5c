from mlx_responses.v1 import responses_pb2 as _responses_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetResponseRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetResponseResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _responses_pb2.Response
    def __init__(self, response: _Optional[_Union[_responses_pb2.Response, _Mapping]] = ...) -> None: ...

class DeleteResponseRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteResponseResponse(_message.Message):
    __slots__ = ("id", "deleted")
    ID_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    id: str
    deleted: bool
    def __init__(self, id: _Optional[str] = ..., deleted: _Optional[bool] = ...) -> None: ...

class GetConversationRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetConversationResponse(_message.Message):
    __slots__ = ("id", "items")
    ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    id: str
    items: _containers.RepeatedCompositeFieldContainer[_responses_pb2.Item]
    def __init__(self, id: _Optional[str] = ..., items: _Optional[_Iterable[_Union[_responses_pb2.Item, _Mapping]]] = ...) -> None: ...

class DeleteConversationRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteConversationResponse(_message.Message):
    __slots__ = ("id", "deleted")
    ID_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    id: str
    deleted: bool
    def __init__(self, id: _Optional[str] = ..., deleted: _Optional[bool] = ...) -> None: ...

class StoreStats(_message.Message):
    __slots__ = ("entries", "bytes", "max_entries", "max_bytes", "evictions")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    EVICTIONS_FIELD_NUMBER: _ClassVar[int]
    entries: int
    bytes: int
    max_entries: int
    max_bytes: int
    evictions: int
    def __init__(self, entries: _Optional[int] = ..., bytes: _Optional[int] = ..., max_entries: _Optional[int] = ..., max_bytes: _Optional[int] = ..., evictions: _Optional[int] = ...) -> None: ...

class GetStoreStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStoreStatsResponse(_message.Message):
    __slots__ = ("responses", "conversations")
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    CONVERSATIONS_FIELD_NUMBER: _ClassVar[int]
    responses: StoreStats
    conversations: StoreStats
    def __init__(self, responses: _Optional[_Union[StoreStats, _Mapping]] = ..., conversations: _Optional[_Union[StoreStats, _Mapping]] = ...) -> None: ...

class ItemPageQuery(_message.Message):
    __slots__ = ("after", "before", "limit", "order", "include")
    AFTER_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    after: str
    before: str
    limit: int
    order: str
    include: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, after: _Optional[str] = ..., before: _Optional[str] = ..., limit: _Optional[int] = ..., order: _Optional[str] = ..., include: _Optional[_Iterable[str]] = ...) -> None: ...

class ItemPage(_message.Message):
    __slots__ = ("items", "first_id", "last_id", "has_more")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    FIRST_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ID_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[_responses_pb2.Item]
    first_id: str
    last_id: str
    has_more: bool
    def __init__(self, items: _Optional[_Iterable[_Union[_responses_pb2.Item, _Mapping]]] = ..., first_id: _Optional[str] = ..., last_id: _Optional[str] = ..., has_more: _Optional[bool] = ...) -> None: ...

class ConversationObject(_message.Message):
    __slots__ = ("id", "created_at", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    created_at: int
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., created_at: _Optional[int] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListInputItemsRequest(_message.Message):
    __slots__ = ("id", "page")
    ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    id: str
    page: ItemPageQuery
    def __init__(self, id: _Optional[str] = ..., page: _Optional[_Union[ItemPageQuery, _Mapping]] = ...) -> None: ...

class ListInputItemsResponse(_message.Message):
    __slots__ = ("page",)
    PAGE_FIELD_NUMBER: _ClassVar[int]
    page: ItemPage
    def __init__(self, page: _Optional[_Union[ItemPage, _Mapping]] = ...) -> None: ...

class CreateConversationRequest(_message.Message):
    __slots__ = ("items", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[_responses_pb2.Item]
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, items: _Optional[_Iterable[_Union[_responses_pb2.Item, _Mapping]]] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CreateConversationResponse(_message.Message):
    __slots__ = ("conversation",)
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    conversation: ConversationObject
    def __init__(self, conversation: _Optional[_Union[ConversationObject, _Mapping]] = ...) -> None: ...

class RetrieveConversationRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RetrieveConversationResponse(_message.Message):
    __slots__ = ("conversation",)
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    conversation: ConversationObject
    def __init__(self, conversation: _Optional[_Union[ConversationObject, _Mapping]] = ...) -> None: ...

class UpdateConversationRequest(_message.Message):
    __slots__ = ("id", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class UpdateConversationResponse(_message.Message):
    __slots__ = ("conversation",)
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    conversation: ConversationObject
    def __init__(self, conversation: _Optional[_Union[ConversationObject, _Mapping]] = ...) -> None: ...

class ListConversationItemsRequest(_message.Message):
    __slots__ = ("id", "page")
    ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    id: str
    page: ItemPageQuery
    def __init__(self, id: _Optional[str] = ..., page: _Optional[_Union[ItemPageQuery, _Mapping]] = ...) -> None: ...

class ListConversationItemsResponse(_message.Message):
    __slots__ = ("page",)
    PAGE_FIELD_NUMBER: _ClassVar[int]
    page: ItemPage
    def __init__(self, page: _Optional[_Union[ItemPage, _Mapping]] = ...) -> None: ...

class AddConversationItemsRequest(_message.Message):
    __slots__ = ("id", "items", "include")
    ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    id: str
    items: _containers.RepeatedCompositeFieldContainer[_responses_pb2.Item]
    include: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., items: _Optional[_Iterable[_Union[_responses_pb2.Item, _Mapping]]] = ..., include: _Optional[_Iterable[str]] = ...) -> None: ...

class AddConversationItemsResponse(_message.Message):
    __slots__ = ("page",)
    PAGE_FIELD_NUMBER: _ClassVar[int]
    page: ItemPage
    def __init__(self, page: _Optional[_Union[ItemPage, _Mapping]] = ...) -> None: ...

class GetConversationItemRequest(_message.Message):
    __slots__ = ("conversation_id", "item_id", "include")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    item_id: str
    include: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, conversation_id: _Optional[str] = ..., item_id: _Optional[str] = ..., include: _Optional[_Iterable[str]] = ...) -> None: ...

class GetConversationItemResponse(_message.Message):
    __slots__ = ("item",)
    ITEM_FIELD_NUMBER: _ClassVar[int]
    item: _responses_pb2.Item
    def __init__(self, item: _Optional[_Union[_responses_pb2.Item, _Mapping]] = ...) -> None: ...

class DeleteConversationItemRequest(_message.Message):
    __slots__ = ("conversation_id", "item_id")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    item_id: str
    def __init__(self, conversation_id: _Optional[str] = ..., item_id: _Optional[str] = ...) -> None: ...

class DeleteConversationItemResponse(_message.Message):
    __slots__ = ("conversation",)
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    conversation: ConversationObject
    def __init__(self, conversation: _Optional[_Union[ConversationObject, _Mapping]] = ...) -> None: ...
