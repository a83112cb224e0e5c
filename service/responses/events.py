"""The Responses streaming state machine: turns generation progress into typed events.

Pure: no model, no I/O. It owns the response's output items, so the stream, the final object
and the stored object share their ids.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from mlx_responses.service.ids import IdFactory, new_id
from mlx_responses.service.text.builtin_tools import (
    CALL_PREFIX,
    SHELL,
    CommandStream,
    partial_strings,
    typed_call,
)
from mlx_responses.service.text.reasoning_content import encode_reasoning

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb

# The event that ends a response of each terminal status (a cancelled one ends `failed`).
TERMINAL_EVENT = {
    pb.RESPONSE_STATUS_COMPLETED: ev.EVENT_TYPE_RESPONSE_COMPLETED,
    pb.RESPONSE_STATUS_INCOMPLETE: ev.EVENT_TYPE_RESPONSE_INCOMPLETE,
    pb.RESPONSE_STATUS_FAILED: ev.EVENT_TYPE_RESPONSE_FAILED,
    pb.RESPONSE_STATUS_CANCELLED: ev.EVENT_TYPE_RESPONSE_FAILED,
}


class EventAssembler:
    """Builds the event sequence and the output items of one response."""

    def __init__(
        self,
        response: pb.Response,
        ids: IdFactory = new_id,
        namespaced: Mapping[str, tuple[str, str]] | None = None,
        custom: Collection[str] = (),
        *,
        builtin: Mapping[str, str] | None = None,
        summary: bool = False,
        encrypted: bool = False,
    ) -> None:
        self.response = response
        self._ids = ids
        # `include: ["reasoning.encrypted_content"]`: reasoning items also carry their text
        # there (service/text/reasoning_content.py), for clients that replay only that field.
        self._encrypted = encrypted
        # `reasoning.summary` set: reasoning items also carry (and stream) a summary, which is
        # the reasoning text itself (this server has no summarizer).
        self._summary = summary
        # The model calls flattened namespace tools; the call leaves as namespace + name.
        self._namespaced = namespaced or {}
        # Calls to these names leave as custom_tool_call items carrying their input.
        self._custom = custom
        # Calls to these names (built-in tool -> kind) leave as typed items: the call is held
        # back while it streams and added once it reads as its item, except a shell call, added
        # at once, whose commands stream (`_commands`) as they are written.
        self._builtin = builtin or {}
        self._held = False
        self._commands: CommandStream | None = None
        self._typed_id = ""
        self._sequence = 0
        self._open: str | None = None  # "message" | "reasoning" while an item is open
        self._text = ""
        self._logprobs: list[pb.Logprob] = []

    # --- helpers ---------------------------------------------------------------------------
    def _event(self, kind: int, **payload: object) -> ev.ResponseEvent:
        event = ev.ResponseEvent(type=kind, sequence_number=self._sequence, **payload)  # type: ignore[arg-type]
        self._sequence += 1
        return event

    def _snapshot(self, kind: int) -> ev.ResponseEvent:
        copy = pb.Response()
        copy.CopyFrom(self.response)
        return self._event(kind, snapshot=ev.ResponseSnapshotEvent(response=copy))

    @property
    def _index(self) -> int:
        return len(self.response.output) - 1

    def _item(self) -> pb.Item:
        return self.response.output[self._index]

    def _item_event(self, kind: int) -> ev.ResponseEvent:
        item = pb.Item()
        item.CopyFrom(self._item())
        return self._event(
            kind, output_item=ev.OutputItemEvent(output_index=self._index, item=item)
        )

    def _part_event(self, kind: int, item_id: str, part: pb.ContentPart) -> ev.ResponseEvent:
        return self._event(
            kind,
            content_part=ev.ContentPartEvent(
                item_id=item_id, output_index=self._index, content_index=0, part=part
            ),
        )

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> list[ev.ResponseEvent]:
        """`response.created` then `response.in_progress`."""
        self.response.status = pb.RESPONSE_STATUS_IN_PROGRESS
        return [
            self._snapshot(ev.EVENT_TYPE_RESPONSE_CREATED),
            self._snapshot(ev.EVENT_TYPE_RESPONSE_IN_PROGRESS),
        ]

    def in_progress(self) -> list[ev.ResponseEvent]:
        """`response.in_progress` alone (a queued background job starting)."""
        self.response.status = pb.RESPONSE_STATUS_IN_PROGRESS
        return [self._snapshot(ev.EVENT_TYPE_RESPONSE_IN_PROGRESS)]

    def compaction(
        self, item: pb.Item, tokens_before: int, tokens_after: int
    ) -> list[ev.ResponseEvent]:
        """`mlx.compaction.started` and `.completed`, then the compaction item at its index.

        Compaction ran before the stream opened (a failure is an HTTP error); its events
        still follow `response.in_progress`, as the seed orders them.
        """
        response_id = self.response.id
        started = ev.CompactionStartedEvent(response_id=response_id, input_tokens=tokens_before)
        completed = ev.CompactionCompletedEvent(
            response_id=response_id,
            input_tokens_before=tokens_before,
            input_tokens_after=tokens_after,
        )
        events = [
            self._event(ev.EVENT_TYPE_COMPACTION_STARTED, compaction_started=started),
            self._event(ev.EVENT_TYPE_COMPACTION_COMPLETED, compaction_completed=completed),
        ]
        events += self._close(pb.ITEM_STATUS_COMPLETED)
        self.response.output.append(item)
        events.append(self._item_event(ev.EVENT_TYPE_OUTPUT_ITEM_ADDED))
        events.append(self._item_event(ev.EVENT_TYPE_OUTPUT_ITEM_DONE))
        return events

    def whole_item(self, item: pb.Item) -> list[ev.ResponseEvent]:
        """A finished item (a compaction): `response.output_item.added`, then `.done`."""
        events = self._close(pb.ITEM_STATUS_COMPLETED)
        self.response.output.append(item)
        events.append(self._item_event(ev.EVENT_TYPE_OUTPUT_ITEM_ADDED))
        events.append(self._item_event(ev.EVENT_TYPE_OUTPUT_ITEM_DONE))
        return events

    # --- content ---------------------------------------------------------------------------
    def _open_item(self, kind: str) -> list[ev.ResponseEvent]:
        if self._open == kind:
            return []
        events = self._close(pb.ITEM_STATUS_COMPLETED)
        item = pb.Item()
        if kind == "message":
            item.message.CopyFrom(
                pb.MessageItem(
                    id=self._ids("msg"),
                    role=pb.ROLE_ASSISTANT,
                    status=pb.ITEM_STATUS_IN_PROGRESS,
                )
            )
            part = pb.ContentPart(output_text=pb.OutputText(text=""))
            item_id = item.message.id
        else:
            item.reasoning.CopyFrom(
                pb.ReasoningItem(id=self._ids("rs"), status=pb.ITEM_STATUS_IN_PROGRESS)
            )
            part = pb.ContentPart(reasoning_text=pb.ReasoningText(text=""))
            item_id = item.reasoning.id
        self.response.output.append(item)
        self._open = kind
        self._text = ""
        events.append(self._item_event(ev.EVENT_TYPE_OUTPUT_ITEM_ADDED))
        if kind == "reasoning" and self._summary:
            events.append(self._summary_part_event(ev.EVENT_TYPE_REASONING_SUMMARY_PART_ADDED))
        events.append(self._part_event(ev.EVENT_TYPE_CONTENT_PART_ADDED, item_id, part))
        return events

    def _summary_part_event(self, kind: int, text: str = "") -> ev.ResponseEvent:
        part = ev.ReasoningSummaryPartEvent(
            item_id=self._item().reasoning.id,
            output_index=self._index,
            summary_index=0,
            part=pb.SummaryText(text=text),
        )
        return self._event(kind, summary_part=part)

    def _summary_text_event(self, kind: int, text: str) -> ev.ResponseEvent:
        """Summary text delta/done; `content_index` carries the summary index."""
        item_id = self._item().reasoning.id
        if kind == ev.EVENT_TYPE_REASONING_SUMMARY_TEXT_DELTA:
            delta = ev.TextDeltaEvent(item_id=item_id, output_index=self._index, delta=text)
            return self._event(kind, text_delta=delta)
        done = ev.TextDoneEvent(item_id=item_id, output_index=self._index, text=text)
        return self._event(kind, text_done=done)

    def _delta(
        self, kind: str, event_type: int, delta: str, logprobs: list[pb.Logprob] | None = None
    ) -> list[ev.ResponseEvent]:
        if not delta:
            return []
        events = self._open_item(kind)
        self._text += delta
        self._logprobs += logprobs or []
        item = self._item()
        item_id = item.message.id if kind == "message" else item.reasoning.id
        delta_event = ev.TextDeltaEvent(
            item_id=item_id,
            output_index=self._index,
            content_index=0,
            delta=delta,
            logprobs=logprobs or [],
        )
        events.append(self._event(event_type, text_delta=delta_event))
        if kind == "reasoning" and self._summary:
            summary_delta = ev.EVENT_TYPE_REASONING_SUMMARY_TEXT_DELTA
            events.append(self._summary_text_event(summary_delta, delta))
        return events

    def text_delta(
        self, delta: str, logprobs: list[pb.Logprob] | None = None
    ) -> list[ev.ResponseEvent]:
        """`response.output_text.delta` in the open message (opened if needed)."""
        return self._delta("message", ev.EVENT_TYPE_OUTPUT_TEXT_DELTA, delta, logprobs)

    def reasoning_delta(self, delta: str) -> list[ev.ResponseEvent]:
        """`response.reasoning_text.delta` in the open reasoning item (opened if needed)."""
        return self._delta("reasoning", ev.EVENT_TYPE_REASONING_TEXT_DELTA, delta)

    def function_call(
        self, name: str, arguments: str, status: pb.ItemStatus = pb.ITEM_STATUS_COMPLETED
    ) -> list[ev.ResponseEvent]:
        """A whole function call: item added, arguments delta and done, item done."""
        return (
            self.function_call_start(name)
            + self.function_call_delta(arguments)
            + self.function_call_done(arguments, status)
        )

    def function_call_start(self, name: str) -> list[ev.ResponseEvent]:
        """`response.output_item.added` of a call whose arguments (or custom input) will stream.

        A call to a custom tool is a `custom_tool_call` item.
        """
        events = self._close(pb.ITEM_STATUS_COMPLETED)
        item = pb.Item()
        call: pb.FunctionCallItem | pb.CustomToolCallItem
        if name in self._custom:
            call = item.custom_tool_call
            call.id = self._ids("ctc")
        else:
            call = item.function_call
            call.id = self._ids("fc")
        call.call_id = self._ids("call")
        call.name = name
        call.status = pb.ITEM_STATUS_IN_PROGRESS
        if name in self._namespaced:
            call.namespace, call.name = self._namespaced[name]
        self.response.output.append(item)
        self._held = name in self._builtin
        if not self._held:
            events.append(self._item_event(ev.EVENT_TYPE_OUTPUT_ITEM_ADDED))
        elif self._builtin[name] == SHELL:
            self._commands = CommandStream()
            self._typed_id = self._ids(CALL_PREFIX["shell_call"])
            shell = pb.ShellCallItem(
                id=self._typed_id,
                call_id=call.call_id,
                action=pb.ShellCallAction(),
                status=pb.ITEM_STATUS_IN_PROGRESS,
            )
            added = ev.OutputItemEvent(output_index=self._index, item=pb.Item(shell_call=shell))
            events.append(self._event(ev.EVENT_TYPE_OUTPUT_ITEM_ADDED, output_item=added))
        return events

    def _open_call(self) -> tuple[pb.FunctionCallItem | pb.CustomToolCallItem, str]:
        """The open call and the field its payload grows in."""
        item = self._item()
        if item.WhichOneof("item") == "custom_tool_call":
            return item.custom_tool_call, "input"
        return item.function_call, "arguments"

    def function_call_delta(self, delta: str) -> list[ev.ResponseEvent]:
        """`response.function_call_arguments.delta` (`custom_tool_call_input.delta`)."""
        if not delta:
            return []
        call, field_name = self._open_call()
        setattr(call, field_name, getattr(call, field_name) + delta)
        if self._held:
            if self._commands is None:
                return []
            update = self._commands.update(*partial_strings(call.arguments, "commands"))
            return self._command_events(update)
        kind = (
            ev.EVENT_TYPE_CUSTOM_TOOL_CALL_INPUT_DELTA
            if field_name == "input"
            else ev.EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DELTA
        )
        return [
            self._event(
                kind,
                text_delta=ev.TextDeltaEvent(
                    item_id=call.id, output_index=self._index, delta=delta
                ),
            )
        ]

    def function_call_done(
        self, arguments: str, status: pb.ItemStatus = pb.ITEM_STATUS_COMPLETED
    ) -> list[ev.ResponseEvent]:
        """The authoritative arguments (custom input): the unsent rest, then done events.

        A call cut short by `max_output_tokens` is done as `incomplete`."""
        call, field_name = self._open_call()
        events = []
        sent = getattr(call, field_name)
        if arguments.startswith(sent):
            events += self.function_call_delta(arguments[len(sent) :])
        setattr(call, field_name, arguments)
        call.status = status
        if self._held:
            return events + self._builtin_call_done(call.name, call.call_id, arguments, status)
        kind = (
            ev.EVENT_TYPE_CUSTOM_TOOL_CALL_INPUT_DONE
            if field_name == "input"
            else ev.EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DONE
        )
        events.append(
            self._event(
                kind,
                text_done=ev.TextDoneEvent(
                    item_id=call.id, output_index=self._index, text=arguments, name=call.name
                ),
            )
        )
        events.append(self._item_event(ev.EVENT_TYPE_OUTPUT_ITEM_DONE))
        return events

    def _builtin_call_done(
        self, name: str, call_id: str, payload: str, status: pb.ItemStatus
    ) -> list[ev.ResponseEvent]:
        """A held built-in call, now whole: its typed item added (in progress, unless a shell
        call's was at its start) and done.

        A call that does not read as its item (cut short) stays the function or custom call
        the model wrote; a shell call, announced already, is an incomplete one."""
        self._held = False
        commands, self._commands = self._commands, None
        try:
            item = typed_call(self._builtin[name], call_id, payload, status)
            kind = item.WhichOneof("item")
            getattr(item, kind).id = self._typed_id or self._ids(CALL_PREFIX[kind])
        except ValueError:
            item = pb.Item()
            if commands is not None:
                whole = commands.sent[: commands.done]
                item.shell_call.CopyFrom(
                    pb.ShellCallItem(
                        id=self._typed_id,
                        call_id=call_id,
                        action=pb.ShellCallAction(commands=whole),
                        status=pb.ITEM_STATUS_INCOMPLETE,
                    )
                )
            else:
                item.CopyFrom(self._item())
            kind = item.WhichOneof("item")
        self._typed_id = ""
        call = getattr(item, kind)
        final = call.status
        call.status = pb.ITEM_STATUS_IN_PROGRESS
        self.response.output[self._index].CopyFrom(item)
        events = []
        if commands is None:
            events.append(self._item_event(ev.EVENT_TYPE_OUTPUT_ITEM_ADDED))
        else:
            events += self._command_events(commands.update(item.shell_call.action.commands, None))
        getattr(self._item(), kind).status = final
        events.append(self._item_event(ev.EVENT_TYPE_OUTPUT_ITEM_DONE))
        return events

    def _command_events(self, update: Sequence[tuple[str, int, str]]) -> list[ev.ResponseEvent]:
        """`response.shell_call_command.added`, `.delta`, `.done` (the command's index in
        `content_index`)."""
        events = []
        for step, index, text in update:
            place = ev.TextDoneEvent(output_index=self._index, content_index=index, text=text)
            if step == "added":
                events.append(self._event(ev.EVENT_TYPE_SHELL_CALL_COMMAND_ADDED, text_done=place))
            elif step == "done":
                events.append(self._event(ev.EVENT_TYPE_SHELL_CALL_COMMAND_DONE, text_done=place))
            else:
                delta = ev.TextDeltaEvent(output_index=self._index, content_index=index, delta=text)
                events.append(self._event(ev.EVENT_TYPE_SHELL_CALL_COMMAND_DELTA, text_delta=delta))
        return events

    def close_item(self) -> list[ev.ResponseEvent]:
        """Ends the open message or reasoning item (a harmony message ended): the next text
        opens another."""
        return self._close(pb.ITEM_STATUS_COMPLETED)

    def _close(self, status: pb.ItemStatus) -> list[ev.ResponseEvent]:
        if self._open is None:
            return []
        item = self._item()
        if self._open == "message":
            item_id = item.message.id
            part = pb.ContentPart(
                output_text=pb.OutputText(text=self._text, logprobs=self._logprobs)
            )
            done_kind = ev.EVENT_TYPE_OUTPUT_TEXT_DONE
            item.message.content.append(part)
            item.message.status = status
        else:
            item_id = item.reasoning.id
            part = pb.ContentPart(reasoning_text=pb.ReasoningText(text=self._text))
            done_kind = ev.EVENT_TYPE_REASONING_TEXT_DONE
            item.reasoning.content.append(part.reasoning_text)
            item.reasoning.status = status
            if self._encrypted:
                item.reasoning.encrypted_content = encode_reasoning(self._text)
        events = [
            self._event(
                done_kind,
                text_done=ev.TextDoneEvent(
                    item_id=item_id,
                    output_index=self._index,
                    content_index=0,
                    text=self._text,
                    logprobs=self._logprobs,
                ),
            ),
            self._part_event(ev.EVENT_TYPE_CONTENT_PART_DONE, item_id, part),
        ]
        if self._open == "reasoning" and self._summary:
            item.reasoning.summary.append(pb.SummaryText(text=self._text))
            events += [
                self._summary_text_event(ev.EVENT_TYPE_REASONING_SUMMARY_TEXT_DONE, self._text),
                self._summary_part_event(ev.EVENT_TYPE_REASONING_SUMMARY_PART_DONE, self._text),
            ]
        events.append(self._item_event(ev.EVENT_TYPE_OUTPUT_ITEM_DONE))
        self._open = None
        self._text = ""
        self._logprobs = []
        return events

    def finish(
        self,
        status: pb.ResponseStatus,
        usage: pb.Usage,
        completed_at: int,
        *,
        incomplete_reason: str | None = None,
        error: pb.ResponseError | None = None,
    ) -> list[ev.ResponseEvent]:
        """Closes the open item and ends with the terminal snapshot event."""
        item_status = (
            pb.ITEM_STATUS_COMPLETED
            if status == pb.RESPONSE_STATUS_COMPLETED
            else pb.ITEM_STATUS_INCOMPLETE
        )
        events = self._close(item_status)
        r = self.response
        r.status = status
        r.usage.CopyFrom(usage)
        r.completed_at = completed_at
        if incomplete_reason is not None:
            r.incomplete_details.CopyFrom(pb.IncompleteDetails(reason=incomplete_reason))
        if error is not None:
            r.error.CopyFrom(error)
        events.append(self._snapshot(TERMINAL_EVENT[status]))
        return events
