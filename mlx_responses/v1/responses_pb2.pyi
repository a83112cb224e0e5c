from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ResponseStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESPONSE_STATUS_UNSPECIFIED: _ClassVar[ResponseStatus]
    RESPONSE_STATUS_QUEUED: _ClassVar[ResponseStatus]
    RESPONSE_STATUS_IN_PROGRESS: _ClassVar[ResponseStatus]
    RESPONSE_STATUS_COMPLETED: _ClassVar[ResponseStatus]
    RESPONSE_STATUS_INCOMPLETE: _ClassVar[ResponseStatus]
    RESPONSE_STATUS_FAILED: _ClassVar[ResponseStatus]
    RESPONSE_STATUS_CANCELLED: _ClassVar[ResponseStatus]

class ItemStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ITEM_STATUS_UNSPECIFIED: _ClassVar[ItemStatus]
    ITEM_STATUS_IN_PROGRESS: _ClassVar[ItemStatus]
    ITEM_STATUS_COMPLETED: _ClassVar[ItemStatus]
    ITEM_STATUS_INCOMPLETE: _ClassVar[ItemStatus]

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_USER: _ClassVar[Role]
    ROLE_ASSISTANT: _ClassVar[Role]
    ROLE_SYSTEM: _ClassVar[Role]
    ROLE_DEVELOPER: _ClassVar[Role]

class ApplyPatchOperationType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    APPLY_PATCH_OPERATION_TYPE_UNSPECIFIED: _ClassVar[ApplyPatchOperationType]
    APPLY_PATCH_OPERATION_TYPE_CREATE_FILE: _ClassVar[ApplyPatchOperationType]
    APPLY_PATCH_OPERATION_TYPE_UPDATE_FILE: _ClassVar[ApplyPatchOperationType]
    APPLY_PATCH_OPERATION_TYPE_DELETE_FILE: _ClassVar[ApplyPatchOperationType]

class ApplyPatchOutputStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    APPLY_PATCH_OUTPUT_STATUS_UNSPECIFIED: _ClassVar[ApplyPatchOutputStatus]
    APPLY_PATCH_OUTPUT_STATUS_COMPLETED: _ClassVar[ApplyPatchOutputStatus]
    APPLY_PATCH_OUTPUT_STATUS_FAILED: _ClassVar[ApplyPatchOutputStatus]

class ToolChoiceMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOOL_CHOICE_MODE_UNSPECIFIED: _ClassVar[ToolChoiceMode]
    TOOL_CHOICE_MODE_NONE: _ClassVar[ToolChoiceMode]
    TOOL_CHOICE_MODE_AUTO: _ClassVar[ToolChoiceMode]
    TOOL_CHOICE_MODE_REQUIRED: _ClassVar[ToolChoiceMode]
RESPONSE_STATUS_UNSPECIFIED: ResponseStatus
RESPONSE_STATUS_QUEUED: ResponseStatus
RESPONSE_STATUS_IN_PROGRESS: ResponseStatus
RESPONSE_STATUS_COMPLETED: ResponseStatus
RESPONSE_STATUS_INCOMPLETE: ResponseStatus
RESPONSE_STATUS_FAILED: ResponseStatus
RESPONSE_STATUS_CANCELLED: ResponseStatus
ITEM_STATUS_UNSPECIFIED: ItemStatus
ITEM_STATUS_IN_PROGRESS: ItemStatus
ITEM_STATUS_COMPLETED: ItemStatus
ITEM_STATUS_INCOMPLETE: ItemStatus
ROLE_UNSPECIFIED: Role
ROLE_USER: Role
ROLE_ASSISTANT: Role
ROLE_SYSTEM: Role
ROLE_DEVELOPER: Role
APPLY_PATCH_OPERATION_TYPE_UNSPECIFIED: ApplyPatchOperationType
APPLY_PATCH_OPERATION_TYPE_CREATE_FILE: ApplyPatchOperationType
APPLY_PATCH_OPERATION_TYPE_UPDATE_FILE: ApplyPatchOperationType
APPLY_PATCH_OPERATION_TYPE_DELETE_FILE: ApplyPatchOperationType
APPLY_PATCH_OUTPUT_STATUS_UNSPECIFIED: ApplyPatchOutputStatus
APPLY_PATCH_OUTPUT_STATUS_COMPLETED: ApplyPatchOutputStatus
APPLY_PATCH_OUTPUT_STATUS_FAILED: ApplyPatchOutputStatus
TOOL_CHOICE_MODE_UNSPECIFIED: ToolChoiceMode
TOOL_CHOICE_MODE_NONE: ToolChoiceMode
TOOL_CHOICE_MODE_AUTO: ToolChoiceMode
TOOL_CHOICE_MODE_REQUIRED: ToolChoiceMode

class InputText(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class TopLogprob(_message.Message):
    __slots__ = ("token", "logprob", "token_bytes")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BYTES_FIELD_NUMBER: _ClassVar[int]
    token: str
    logprob: float
    token_bytes: bytes
    def __init__(self, token: _Optional[str] = ..., logprob: _Optional[float] = ..., token_bytes: _Optional[bytes] = ...) -> None: ...

class Logprob(_message.Message):
    __slots__ = ("token", "logprob", "token_bytes", "top_logprobs")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    token: str
    logprob: float
    token_bytes: bytes
    top_logprobs: _containers.RepeatedCompositeFieldContainer[TopLogprob]
    def __init__(self, token: _Optional[str] = ..., logprob: _Optional[float] = ..., token_bytes: _Optional[bytes] = ..., top_logprobs: _Optional[_Iterable[_Union[TopLogprob, _Mapping]]] = ...) -> None: ...

class OutputText(_message.Message):
    __slots__ = ("text", "logprobs")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    text: str
    logprobs: _containers.RepeatedCompositeFieldContainer[Logprob]
    def __init__(self, text: _Optional[str] = ..., logprobs: _Optional[_Iterable[_Union[Logprob, _Mapping]]] = ...) -> None: ...

class Refusal(_message.Message):
    __slots__ = ("refusal",)
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    refusal: str
    def __init__(self, refusal: _Optional[str] = ...) -> None: ...

class ReasoningText(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class SummaryText(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class MediaPart(_message.Message):
    __slots__ = ("type",)
    TYPE_FIELD_NUMBER: _ClassVar[int]
    type: str
    def __init__(self, type: _Optional[str] = ...) -> None: ...

class ContentPart(_message.Message):
    __slots__ = ("input_text", "output_text", "refusal", "reasoning_text", "media", "input_image", "input_file")
    INPUT_TEXT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TEXT_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    REASONING_TEXT_FIELD_NUMBER: _ClassVar[int]
    MEDIA_FIELD_NUMBER: _ClassVar[int]
    INPUT_IMAGE_FIELD_NUMBER: _ClassVar[int]
    INPUT_FILE_FIELD_NUMBER: _ClassVar[int]
    input_text: InputText
    output_text: OutputText
    refusal: Refusal
    reasoning_text: ReasoningText
    media: MediaPart
    input_image: VisionInputImage
    input_file: VisionInputFile
    def __init__(self, input_text: _Optional[_Union[InputText, _Mapping]] = ..., output_text: _Optional[_Union[OutputText, _Mapping]] = ..., refusal: _Optional[_Union[Refusal, _Mapping]] = ..., reasoning_text: _Optional[_Union[ReasoningText, _Mapping]] = ..., media: _Optional[_Union[MediaPart, _Mapping]] = ..., input_image: _Optional[_Union[VisionInputImage, _Mapping]] = ..., input_file: _Optional[_Union[VisionInputFile, _Mapping]] = ...) -> None: ...

class VisionInputImage(_message.Message):
    __slots__ = ("image_url", "file_id", "detail")
    IMAGE_URL_FIELD_NUMBER: _ClassVar[int]
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    image_url: str
    file_id: str
    detail: str
    def __init__(self, image_url: _Optional[str] = ..., file_id: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class VisionInputFile(_message.Message):
    __slots__ = ("file_data", "file_id", "file_url", "filename")
    FILE_DATA_FIELD_NUMBER: _ClassVar[int]
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_URL_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    file_data: str
    file_id: str
    file_url: str
    filename: str
    def __init__(self, file_data: _Optional[str] = ..., file_id: _Optional[str] = ..., file_url: _Optional[str] = ..., filename: _Optional[str] = ...) -> None: ...

class MessageItem(_message.Message):
    __slots__ = ("id", "role", "status", "content")
    ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    id: str
    role: Role
    status: ItemStatus
    content: _containers.RepeatedCompositeFieldContainer[ContentPart]
    def __init__(self, id: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., status: _Optional[_Union[ItemStatus, str]] = ..., content: _Optional[_Iterable[_Union[ContentPart, _Mapping]]] = ...) -> None: ...

class FunctionCallItem(_message.Message):
    __slots__ = ("id", "call_id", "name", "arguments", "status", "namespace")
    ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    id: str
    call_id: str
    name: str
    arguments: str
    status: ItemStatus
    namespace: str
    def __init__(self, id: _Optional[str] = ..., call_id: _Optional[str] = ..., name: _Optional[str] = ..., arguments: _Optional[str] = ..., status: _Optional[_Union[ItemStatus, str]] = ..., namespace: _Optional[str] = ...) -> None: ...

class FunctionCallOutputItem(_message.Message):
    __slots__ = ("id", "call_id", "output", "status")
    ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    id: str
    call_id: str
    output: str
    status: ItemStatus
    def __init__(self, id: _Optional[str] = ..., call_id: _Optional[str] = ..., output: _Optional[str] = ..., status: _Optional[_Union[ItemStatus, str]] = ...) -> None: ...

class ReasoningItem(_message.Message):
    __slots__ = ("id", "content", "summary", "encrypted_content", "status")
    ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTED_CONTENT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    id: str
    content: _containers.RepeatedCompositeFieldContainer[ReasoningText]
    summary: _containers.RepeatedCompositeFieldContainer[SummaryText]
    encrypted_content: str
    status: ItemStatus
    def __init__(self, id: _Optional[str] = ..., content: _Optional[_Iterable[_Union[ReasoningText, _Mapping]]] = ..., summary: _Optional[_Iterable[_Union[SummaryText, _Mapping]]] = ..., encrypted_content: _Optional[str] = ..., status: _Optional[_Union[ItemStatus, str]] = ...) -> None: ...

class CompactionItem(_message.Message):
    __slots__ = ("id", "encrypted_content")
    ID_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTED_CONTENT_FIELD_NUMBER: _ClassVar[int]
    id: str
    encrypted_content: str
    def __init__(self, id: _Optional[str] = ..., encrypted_content: _Optional[str] = ...) -> None: ...

class ItemReference(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class CustomToolCallItem(_message.Message):
    __slots__ = ("id", "call_id", "name", "input", "status", "namespace")
    ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    id: str
    call_id: str
    name: str
    input: str
    status: ItemStatus
    namespace: str
    def __init__(self, id: _Optional[str] = ..., call_id: _Optional[str] = ..., name: _Optional[str] = ..., input: _Optional[str] = ..., status: _Optional[_Union[ItemStatus, str]] = ..., namespace: _Optional[str] = ...) -> None: ...

class CustomToolCallOutputItem(_message.Message):
    __slots__ = ("id", "call_id", "output", "status")
    ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    id: str
    call_id: str
    output: str
    status: ItemStatus
    def __init__(self, id: _Optional[str] = ..., call_id: _Optional[str] = ..., output: _Optional[str] = ..., status: _Optional[_Union[ItemStatus, str]] = ...) -> None: ...

class CompactionTriggerItem(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ShellCallAction(_message.Message):
    __slots__ = ("commands", "timeout_ms", "max_output_length")
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_LENGTH_FIELD_NUMBER: _ClassVar[int]
    commands: _containers.RepeatedScalarFieldContainer[str]
    timeout_ms: int
    max_output_length: int
    def __init__(self, commands: _Optional[_Iterable[str]] = ..., timeout_ms: _Optional[int] = ..., max_output_length: _Optional[int] = ...) -> None: ...

class ShellCallItem(_message.Message):
    __slots__ = ("id", "call_id", "action", "status")
    ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    id: str
    call_id: str
    action: ShellCallAction
    status: ItemStatus
    def __init__(self, id: _Optional[str] = ..., call_id: _Optional[str] = ..., action: _Optional[_Union[ShellCallAction, _Mapping]] = ..., status: _Optional[_Union[ItemStatus, str]] = ...) -> None: ...

class ShellCallOutcome(_message.Message):
    __slots__ = ("exit_code", "timeout")
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    exit_code: int
    timeout: bool
    def __init__(self, exit_code: _Optional[int] = ..., timeout: _Optional[bool] = ...) -> None: ...

class ShellCallOutputContent(_message.Message):
    __slots__ = ("stdout", "stderr", "outcome")
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    stdout: str
    stderr: str
    outcome: ShellCallOutcome
    def __init__(self, stdout: _Optional[str] = ..., stderr: _Optional[str] = ..., outcome: _Optional[_Union[ShellCallOutcome, _Mapping]] = ...) -> None: ...

class ShellCallOutputItem(_message.Message):
    __slots__ = ("id", "call_id", "output", "max_output_length", "status")
    ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_LENGTH_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    id: str
    call_id: str
    output: _containers.RepeatedCompositeFieldContainer[ShellCallOutputContent]
    max_output_length: int
    status: ItemStatus
    def __init__(self, id: _Optional[str] = ..., call_id: _Optional[str] = ..., output: _Optional[_Iterable[_Union[ShellCallOutputContent, _Mapping]]] = ..., max_output_length: _Optional[int] = ..., status: _Optional[_Union[ItemStatus, str]] = ...) -> None: ...

class LocalShellExecAction(_message.Message):
    __slots__ = ("command", "env", "timeout_ms", "user", "working_directory")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    command: _containers.RepeatedScalarFieldContainer[str]
    env: _containers.ScalarMap[str, str]
    timeout_ms: int
    user: str
    working_directory: str
    def __init__(self, command: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ..., timeout_ms: _Optional[int] = ..., user: _Optional[str] = ..., working_directory: _Optional[str] = ...) -> None: ...

class LocalShellCallItem(_message.Message):
    __slots__ = ("id", "call_id", "action", "status")
    ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    id: str
    call_id: str
    action: LocalShellExecAction
    status: ItemStatus
    def __init__(self, id: _Optional[str] = ..., call_id: _Optional[str] = ..., action: _Optional[_Union[LocalShellExecAction, _Mapping]] = ..., status: _Optional[_Union[ItemStatus, str]] = ...) -> None: ...

class LocalShellCallOutputItem(_message.Message):
    __slots__ = ("id", "call_id", "output", "status")
    ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    id: str
    call_id: str
    output: str
    status: ItemStatus
    def __init__(self, id: _Optional[str] = ..., call_id: _Optional[str] = ..., output: _Optional[str] = ..., status: _Optional[_Union[ItemStatus, str]] = ...) -> None: ...

class ApplyPatchOperation(_message.Message):
    __slots__ = ("type", "path", "diff")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    DIFF_FIELD_NUMBER: _ClassVar[int]
    type: ApplyPatchOperationType
    path: str
    diff: str
    def __init__(self, type: _Optional[_Union[ApplyPatchOperationType, str]] = ..., path: _Optional[str] = ..., diff: _Optional[str] = ...) -> None: ...

class ApplyPatchCallItem(_message.Message):
    __slots__ = ("id", "call_id", "operation", "status")
    ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    id: str
    call_id: str
    operation: ApplyPatchOperation
    status: ItemStatus
    def __init__(self, id: _Optional[str] = ..., call_id: _Optional[str] = ..., operation: _Optional[_Union[ApplyPatchOperation, _Mapping]] = ..., status: _Optional[_Union[ItemStatus, str]] = ...) -> None: ...

class ApplyPatchCallOutputItem(_message.Message):
    __slots__ = ("id", "call_id", "status", "output")
    ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    id: str
    call_id: str
    status: ApplyPatchOutputStatus
    output: str
    def __init__(self, id: _Optional[str] = ..., call_id: _Optional[str] = ..., status: _Optional[_Union[ApplyPatchOutputStatus, str]] = ..., output: _Optional[str] = ...) -> None: ...

class Item(_message.Message):
    __slots__ = ("message", "function_call", "function_call_output", "reasoning", "compaction", "item_reference", "custom_tool_call", "custom_tool_call_output", "compaction_trigger", "shell_call", "shell_call_output", "local_shell_call", "local_shell_call_output", "apply_patch_call", "apply_patch_call_output")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_CALL_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_CALL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    ITEM_REFERENCE_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_TOOL_CALL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_TRIGGER_FIELD_NUMBER: _ClassVar[int]
    SHELL_CALL_FIELD_NUMBER: _ClassVar[int]
    SHELL_CALL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    LOCAL_SHELL_CALL_FIELD_NUMBER: _ClassVar[int]
    LOCAL_SHELL_CALL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    APPLY_PATCH_CALL_FIELD_NUMBER: _ClassVar[int]
    APPLY_PATCH_CALL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    message: MessageItem
    function_call: FunctionCallItem
    function_call_output: FunctionCallOutputItem
    reasoning: ReasoningItem
    compaction: CompactionItem
    item_reference: ItemReference
    custom_tool_call: CustomToolCallItem
    custom_tool_call_output: CustomToolCallOutputItem
    compaction_trigger: CompactionTriggerItem
    shell_call: ShellCallItem
    shell_call_output: ShellCallOutputItem
    local_shell_call: LocalShellCallItem
    local_shell_call_output: LocalShellCallOutputItem
    apply_patch_call: ApplyPatchCallItem
    apply_patch_call_output: ApplyPatchCallOutputItem
    def __init__(self, message: _Optional[_Union[MessageItem, _Mapping]] = ..., function_call: _Optional[_Union[FunctionCallItem, _Mapping]] = ..., function_call_output: _Optional[_Union[FunctionCallOutputItem, _Mapping]] = ..., reasoning: _Optional[_Union[ReasoningItem, _Mapping]] = ..., compaction: _Optional[_Union[CompactionItem, _Mapping]] = ..., item_reference: _Optional[_Union[ItemReference, _Mapping]] = ..., custom_tool_call: _Optional[_Union[CustomToolCallItem, _Mapping]] = ..., custom_tool_call_output: _Optional[_Union[CustomToolCallOutputItem, _Mapping]] = ..., compaction_trigger: _Optional[_Union[CompactionTriggerItem, _Mapping]] = ..., shell_call: _Optional[_Union[ShellCallItem, _Mapping]] = ..., shell_call_output: _Optional[_Union[ShellCallOutputItem, _Mapping]] = ..., local_shell_call: _Optional[_Union[LocalShellCallItem, _Mapping]] = ..., local_shell_call_output: _Optional[_Union[LocalShellCallOutputItem, _Mapping]] = ..., apply_patch_call: _Optional[_Union[ApplyPatchCallItem, _Mapping]] = ..., apply_patch_call_output: _Optional[_Union[ApplyPatchCallOutputItem, _Mapping]] = ...) -> None: ...

class FunctionTool(_message.Message):
    __slots__ = ("name", "description", "parameters_json", "strict")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_JSON_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters_json: str
    strict: bool
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters_json: _Optional[str] = ..., strict: _Optional[bool] = ...) -> None: ...

class HostedTool(_message.Message):
    __slots__ = ("type",)
    TYPE_FIELD_NUMBER: _ClassVar[int]
    type: str
    def __init__(self, type: _Optional[str] = ...) -> None: ...

class NamespaceTool(_message.Message):
    __slots__ = ("name", "description", "tools")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ...) -> None: ...

class CustomToolGrammar(_message.Message):
    __slots__ = ("syntax", "definition")
    SYNTAX_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    syntax: str
    definition: str
    def __init__(self, syntax: _Optional[str] = ..., definition: _Optional[str] = ...) -> None: ...

class CustomToolText(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CustomTool(_message.Message):
    __slots__ = ("name", "description", "text", "grammar")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    GRAMMAR_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    text: CustomToolText
    grammar: CustomToolGrammar
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., text: _Optional[_Union[CustomToolText, _Mapping]] = ..., grammar: _Optional[_Union[CustomToolGrammar, _Mapping]] = ...) -> None: ...

class ShellTool(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LocalShellTool(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ApplyPatchTool(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Tool(_message.Message):
    __slots__ = ("function", "hosted", "namespace", "custom", "shell", "local_shell", "apply_patch")
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    HOSTED_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_FIELD_NUMBER: _ClassVar[int]
    SHELL_FIELD_NUMBER: _ClassVar[int]
    LOCAL_SHELL_FIELD_NUMBER: _ClassVar[int]
    APPLY_PATCH_FIELD_NUMBER: _ClassVar[int]
    function: FunctionTool
    hosted: HostedTool
    namespace: NamespaceTool
    custom: CustomTool
    shell: ShellTool
    local_shell: LocalShellTool
    apply_patch: ApplyPatchTool
    def __init__(self, function: _Optional[_Union[FunctionTool, _Mapping]] = ..., hosted: _Optional[_Union[HostedTool, _Mapping]] = ..., namespace: _Optional[_Union[NamespaceTool, _Mapping]] = ..., custom: _Optional[_Union[CustomTool, _Mapping]] = ..., shell: _Optional[_Union[ShellTool, _Mapping]] = ..., local_shell: _Optional[_Union[LocalShellTool, _Mapping]] = ..., apply_patch: _Optional[_Union[ApplyPatchTool, _Mapping]] = ...) -> None: ...

class ToolChoice(_message.Message):
    __slots__ = ("mode", "function_name", "allowed_tools", "custom_name", "builtin_type")
    MODE_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_NAME_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_NAME_FIELD_NUMBER: _ClassVar[int]
    BUILTIN_TYPE_FIELD_NUMBER: _ClassVar[int]
    mode: ToolChoiceMode
    function_name: str
    allowed_tools: AllowedTools
    custom_name: str
    builtin_type: str
    def __init__(self, mode: _Optional[_Union[ToolChoiceMode, str]] = ..., function_name: _Optional[str] = ..., allowed_tools: _Optional[_Union[AllowedTools, _Mapping]] = ..., custom_name: _Optional[str] = ..., builtin_type: _Optional[str] = ...) -> None: ...

class AllowedTools(_message.Message):
    __slots__ = ("mode", "names")
    MODE_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    mode: ToolChoiceMode
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, mode: _Optional[_Union[ToolChoiceMode, str]] = ..., names: _Optional[_Iterable[str]] = ...) -> None: ...

class TextFormatText(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TextFormatJsonObject(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TextFormatJsonSchema(_message.Message):
    __slots__ = ("name", "schema_json", "description", "strict")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    name: str
    schema_json: str
    description: str
    strict: bool
    def __init__(self, name: _Optional[str] = ..., schema_json: _Optional[str] = ..., description: _Optional[str] = ..., strict: _Optional[bool] = ...) -> None: ...

class TextConfig(_message.Message):
    __slots__ = ("text", "json_schema", "json_object", "verbosity")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    JSON_OBJECT_FIELD_NUMBER: _ClassVar[int]
    VERBOSITY_FIELD_NUMBER: _ClassVar[int]
    text: TextFormatText
    json_schema: TextFormatJsonSchema
    json_object: TextFormatJsonObject
    verbosity: str
    def __init__(self, text: _Optional[_Union[TextFormatText, _Mapping]] = ..., json_schema: _Optional[_Union[TextFormatJsonSchema, _Mapping]] = ..., json_object: _Optional[_Union[TextFormatJsonObject, _Mapping]] = ..., verbosity: _Optional[str] = ...) -> None: ...

class ReasoningConfig(_message.Message):
    __slots__ = ("effort", "summary")
    EFFORT_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    effort: str
    summary: str
    def __init__(self, effort: _Optional[str] = ..., summary: _Optional[str] = ...) -> None: ...

class ContextManagement(_message.Message):
    __slots__ = ("type", "compact_threshold")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    COMPACT_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    type: str
    compact_threshold: int
    def __init__(self, type: _Optional[str] = ..., compact_threshold: _Optional[int] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "total_tokens", "cached_tokens", "reasoning_tokens", "cache_write_tokens", "breakpoint_write_tokens", "draft_tokens", "accepted_draft_tokens")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    BREAKPOINT_WRITE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    DRAFT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_DRAFT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cache_write_tokens: int
    breakpoint_write_tokens: int
    draft_tokens: int
    accepted_draft_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., cached_tokens: _Optional[int] = ..., reasoning_tokens: _Optional[int] = ..., cache_write_tokens: _Optional[int] = ..., breakpoint_write_tokens: _Optional[int] = ..., draft_tokens: _Optional[int] = ..., accepted_draft_tokens: _Optional[int] = ...) -> None: ...

class IncompleteDetails(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class ResponseError(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class CreateResponseParams(_message.Message):
    __slots__ = ("model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "text", "reasoning", "previous_response_id", "conversation", "context_management", "store", "background", "max_output_tokens", "temperature", "top_p", "top_logprobs", "truncation", "metadata", "chat_template_kwargs_json", "user", "service_tier", "safety_identifier", "prompt_cache_key", "stream", "include", "presence_penalty", "frequency_penalty", "stop", "seed", "top_k", "prompt", "reasoning_budget", "generate", "cache_breakpoints", "keep_alive_seconds", "prompt_cache_ttl_seconds", "prompt_cache_memory_only")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_MANAGEMENT_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATION_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CHAT_TEMPLATE_KWARGS_JSON_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    SERVICE_TIER_FIELD_NUMBER: _ClassVar[int]
    SAFETY_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_KEY_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    REASONING_BUDGET_FIELD_NUMBER: _ClassVar[int]
    GENERATE_FIELD_NUMBER: _ClassVar[int]
    CACHE_BREAKPOINTS_FIELD_NUMBER: _ClassVar[int]
    KEEP_ALIVE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_MEMORY_ONLY_FIELD_NUMBER: _ClassVar[int]
    model: str
    input: _containers.RepeatedCompositeFieldContainer[Item]
    instructions: str
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    tool_choice: ToolChoice
    parallel_tool_calls: bool
    text: TextConfig
    reasoning: ReasoningConfig
    previous_response_id: str
    conversation: str
    context_management: _containers.RepeatedCompositeFieldContainer[ContextManagement]
    store: bool
    background: bool
    max_output_tokens: int
    temperature: float
    top_p: float
    top_logprobs: int
    truncation: str
    metadata: _containers.ScalarMap[str, str]
    chat_template_kwargs_json: str
    user: str
    service_tier: str
    safety_identifier: str
    prompt_cache_key: str
    stream: bool
    include: _containers.RepeatedScalarFieldContainer[str]
    presence_penalty: float
    frequency_penalty: float
    stop: _containers.RepeatedScalarFieldContainer[str]
    seed: int
    top_k: int
    prompt: str
    reasoning_budget: int
    generate: bool
    cache_breakpoints: _containers.RepeatedCompositeFieldContainer[CacheBreakpoint]
    keep_alive_seconds: float
    prompt_cache_ttl_seconds: int
    prompt_cache_memory_only: bool
    def __init__(self, model: _Optional[str] = ..., input: _Optional[_Iterable[_Union[Item, _Mapping]]] = ..., instructions: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., tool_choice: _Optional[_Union[ToolChoice, _Mapping]] = ..., parallel_tool_calls: _Optional[bool] = ..., text: _Optional[_Union[TextConfig, _Mapping]] = ..., reasoning: _Optional[_Union[ReasoningConfig, _Mapping]] = ..., previous_response_id: _Optional[str] = ..., conversation: _Optional[str] = ..., context_management: _Optional[_Iterable[_Union[ContextManagement, _Mapping]]] = ..., store: _Optional[bool] = ..., background: _Optional[bool] = ..., max_output_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., top_logprobs: _Optional[int] = ..., truncation: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., chat_template_kwargs_json: _Optional[str] = ..., user: _Optional[str] = ..., service_tier: _Optional[str] = ..., safety_identifier: _Optional[str] = ..., prompt_cache_key: _Optional[str] = ..., stream: _Optional[bool] = ..., include: _Optional[_Iterable[str]] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., stop: _Optional[_Iterable[str]] = ..., seed: _Optional[int] = ..., top_k: _Optional[int] = ..., prompt: _Optional[str] = ..., reasoning_budget: _Optional[int] = ..., generate: _Optional[bool] = ..., cache_breakpoints: _Optional[_Iterable[_Union[CacheBreakpoint, _Mapping]]] = ..., keep_alive_seconds: _Optional[float] = ..., prompt_cache_ttl_seconds: _Optional[int] = ..., prompt_cache_memory_only: _Optional[bool] = ...) -> None: ...

class CacheBreakpoint(_message.Message):
    __slots__ = ("tool", "input", "ttl_seconds")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    tool: str
    input: InputPoint
    ttl_seconds: int
    def __init__(self, tool: _Optional[str] = ..., input: _Optional[_Union[InputPoint, _Mapping]] = ..., ttl_seconds: _Optional[int] = ...) -> None: ...

class InputPoint(_message.Message):
    __slots__ = ("item", "chars")
    ITEM_FIELD_NUMBER: _ClassVar[int]
    CHARS_FIELD_NUMBER: _ClassVar[int]
    item: int
    chars: int
    def __init__(self, item: _Optional[int] = ..., chars: _Optional[int] = ...) -> None: ...

class Response(_message.Message):
    __slots__ = ("id", "created_at", "completed_at", "status", "incomplete_details", "error", "instructions", "model", "output", "usage", "tools", "tool_choice", "text", "reasoning", "temperature", "top_p", "top_logprobs", "parallel_tool_calls", "max_output_tokens", "previous_response_id", "conversation", "truncation", "store", "background", "service_tier", "metadata", "user", "safety_identifier", "prompt_cache_key", "presence_penalty", "frequency_penalty", "stop_sequence")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    INCOMPLETE_DETAILS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    TRUNCATION_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    SERVICE_TIER_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    SAFETY_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_KEY_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    STOP_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    id: str
    created_at: int
    completed_at: int
    status: ResponseStatus
    incomplete_details: IncompleteDetails
    error: ResponseError
    instructions: str
    model: str
    output: _containers.RepeatedCompositeFieldContainer[Item]
    usage: Usage
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    tool_choice: ToolChoice
    text: TextConfig
    reasoning: ReasoningConfig
    temperature: float
    top_p: float
    top_logprobs: int
    parallel_tool_calls: bool
    max_output_tokens: int
    previous_response_id: str
    conversation: str
    truncation: str
    store: bool
    background: bool
    service_tier: str
    metadata: _containers.ScalarMap[str, str]
    user: str
    safety_identifier: str
    prompt_cache_key: str
    presence_penalty: float
    frequency_penalty: float
    stop_sequence: str
    def __init__(self, id: _Optional[str] = ..., created_at: _Optional[int] = ..., completed_at: _Optional[int] = ..., status: _Optional[_Union[ResponseStatus, str]] = ..., incomplete_details: _Optional[_Union[IncompleteDetails, _Mapping]] = ..., error: _Optional[_Union[ResponseError, _Mapping]] = ..., instructions: _Optional[str] = ..., model: _Optional[str] = ..., output: _Optional[_Iterable[_Union[Item, _Mapping]]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., tool_choice: _Optional[_Union[ToolChoice, _Mapping]] = ..., text: _Optional[_Union[TextConfig, _Mapping]] = ..., reasoning: _Optional[_Union[ReasoningConfig, _Mapping]] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., top_logprobs: _Optional[int] = ..., parallel_tool_calls: _Optional[bool] = ..., max_output_tokens: _Optional[int] = ..., previous_response_id: _Optional[str] = ..., conversation: _Optional[str] = ..., truncation: _Optional[str] = ..., store: _Optional[bool] = ..., background: _Optional[bool] = ..., service_tier: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., user: _Optional[str] = ..., safety_identifier: _Optional[str] = ..., prompt_cache_key: _Optional[str] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., stop_sequence: _Optional[str] = ...) -> None: ...
