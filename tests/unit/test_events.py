"""The event state machine as a pure function: order, sequence numbers, ids, final object."""

from __future__ import annotations

import itertools

from mlx_responses.http_facade.responses.from_proto import EVENT_NAMES, event_to_json
from mlx_responses.service.responses.events import EventAssembler

from mlx_responses.v1 import responses_pb2 as pb


def _assembler() -> EventAssembler:
    counter = itertools.count()
    return EventAssembler(
        pb.Response(id="resp_1", status=pb.RESPONSE_STATUS_IN_PROGRESS),
        ids=lambda prefix: f"{prefix}_{next(counter)}",
    )


def _names(events: list) -> list[str]:
    return [EVENT_NAMES[e.type] for e in events]


def test_plain_text_sequence_and_final_object() -> None:
    a = _assembler()
    events = a.start() + a.text_delta("hel") + a.text_delta("lo")
    events += a.finish(pb.RESPONSE_STATUS_COMPLETED, pb.Usage(output_tokens=2), 10)
    assert _names(events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    payloads = [event_to_json(e) for e in events]
    final = payloads[-1]["response"]
    assert final["status"] == "completed"
    message = final["output"][0]
    assert message["content"][0]["text"] == "hello"
    assert message["status"] == "completed"
    # Every event keyed on the item carries the same id as the final object.
    for p in payloads[2:-1]:
        item_id = p.get("item_id") or p.get("item", {}).get("id")
        assert item_id == message["id"]
        assert p["output_index"] == 0
    assert payloads[6]["text"] == "hello"
    assert "".join(p["delta"] for p in payloads if p["type"].endswith(".delta")) == "hello"


def test_reasoning_then_message_then_tool_call() -> None:
    a = _assembler()
    events = a.start() + a.reasoning_delta("think") + a.text_delta("ok")
    events += a.function_call("get_weather", '{"city": "paris"}')
    events += a.finish(pb.RESPONSE_STATUS_COMPLETED, pb.Usage(), 1)
    names = _names(events)
    assert names[2:9] == [
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
    ]
    assert names[-6:] == [
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    final = event_to_json(events[-1])["response"]
    kinds = [item["type"] for item in final["output"]]
    assert kinds == ["reasoning", "message", "function_call"]
    assert final["output"][0]["content"] == [{"type": "reasoning_text", "text": "think"}]
    call = final["output"][2]
    assert call["name"] == "get_weather" and call["arguments"] == '{"city": "paris"}'
    assert call["call_id"].startswith("call_")
    indexes = [event_to_json(e).get("output_index") for e in events]
    assert indexes[-5:-1] == [2, 2, 2, 2]


def test_length_stop_marks_items_incomplete() -> None:
    a = _assembler()
    events = a.start() + a.text_delta("abc")
    events += a.finish(
        pb.RESPONSE_STATUS_INCOMPLETE, pb.Usage(), 1, incomplete_reason="max_output_tokens"
    )
    final = event_to_json(events[-1])
    assert final["type"] == "response.incomplete"
    assert final["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["response"]["output"][0]["status"] == "incomplete"


def test_snapshots_are_copies() -> None:
    a = _assembler()
    created = a.start()[0]
    a.text_delta("x")
    assert len(created.snapshot.response.output) == 0


def test_empty_deltas_emit_nothing() -> None:
    a = _assembler()
    a.start()
    assert a.text_delta("") == []
    assert a.reasoning_delta("") == []


def test_compaction_events_follow_in_progress_and_lead_the_output() -> None:
    a = _assembler()
    item = pb.Item(compaction=pb.CompactionItem(id="cmp_9", encrypted_content="e30"))
    events = a.start() + a.compaction(item, 300, 120) + a.text_delta("hi")
    events += a.finish(pb.RESPONSE_STATUS_COMPLETED, pb.Usage(output_tokens=1), 10)
    assert _names(events)[:6] == [
        "response.created",
        "response.in_progress",
        "mlx.compaction.started",
        "mlx.compaction.completed",
        "response.output_item.added",
        "response.output_item.done",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    started, completed, added = (event_to_json(e) for e in events[2:5])
    assert started == {
        "type": "mlx.compaction.started",
        "sequence_number": 2,
        "response_id": "resp_1",
        "input_tokens": 300,
    }
    assert completed["input_tokens_before"] == 300 and completed["input_tokens_after"] == 120
    assert added["output_index"] == 0 and added["item"]["type"] == "compaction"
    final = events[-1].snapshot.response
    assert [o.WhichOneof("item") for o in final.output] == ["compaction", "message"]
    assert event_to_json(events[6])["output_index"] == 1


def test_reasoning_summary_events_nest_around_the_reasoning_text() -> None:
    counter = itertools.count()
    a = EventAssembler(
        pb.Response(id="resp_1", status=pb.RESPONSE_STATUS_IN_PROGRESS),
        ids=lambda prefix: f"{prefix}_{next(counter)}",
        summary=True,
    )
    events = a.start() + a.reasoning_delta("thin") + a.reasoning_delta("king") + a.text_delta("hi")
    events += a.finish(pb.RESPONSE_STATUS_COMPLETED, pb.Usage(output_tokens=3), 10)
    assert _names(events)[2:15] == [
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
    ]
    payloads = [event_to_json(e) for e in events]
    deltas = [p for p in payloads if p["type"] == "response.reasoning_summary_text.delta"]
    assert [d["delta"] for d in deltas] == ["thin", "king"]
    assert all(d["summary_index"] == 0 and "content_index" not in d for d in deltas)
    done = next(p for p in payloads if p["type"] == "response.reasoning_summary_part.done")
    assert done["part"] == {"type": "summary_text", "text": "thinking"}
    reasoning = payloads[-1]["response"]["output"][0]
    assert reasoning["summary"] == [{"type": "summary_text", "text": "thinking"}]
    assert reasoning["content"] == [{"type": "reasoning_text", "text": "thinking"}]


def test_no_summary_unless_asked() -> None:
    a = _assembler()
    events = a.start() + a.reasoning_delta("thinking") + a.text_delta("hi")
    events += a.finish(pb.RESPONSE_STATUS_COMPLETED, pb.Usage(output_tokens=2), 10)
    assert not any("summary" in name for name in _names(events))
    assert event_to_json(events[-1])["response"]["output"][0]["summary"] == []
