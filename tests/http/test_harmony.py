"""gpt-oss's harmony on every API, on a tiny random gpt-oss scripted token by token.

The script (tests/support/random_gpt_oss.py) runs as a logits processor inside the real engine:
the tokens go through the engine's stop tokens, detokenizer and the pipeline's harmony reader as
a real model's would. The model's generation_config.json lists only `<|return|>` and
`<|endoftext|>`: `<|call|>` stops because the server reads it from the tokenizer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.support.random_gpt_oss import build_random_gpt_oss, scripted
from tests.support.stack import Stack

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string"}},
        "required": ["location"],
    },
}
FINAL = (
    "<|channel|>analysis<|message|>Simple.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>4<|return|>"
)
CALL = (
    "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
    "<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"location":"Paris"}<|call|>'
)


@pytest.fixture(scope="module")
def harmony_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    model = build_random_gpt_oss(tmp_path_factory.mktemp("gpt-oss") / "tiny-gpt-oss")
    with Stack.running(model_path=model, store_url="memory") as s:
        yield s


def runtime(stack: Stack) -> Any:
    return stack.core.models.default.runtime  # type: ignore[union-attr]


def ids(stack: Stack, text: str) -> list[int]:
    tokenizer = runtime(stack).loaded.tokenizer._tokenizer
    return list(tokenizer.encode(text, add_special_tokens=False))


def client(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)


def respond(stack: Stack, script: str, **body: Any) -> dict[str, Any]:
    with scripted(runtime(stack), ids(stack, script)):
        reply = httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def stream_events(stack: Stack, script: str, **body: Any) -> list[Any]:
    """The SDK's events, and the last event as JSON."""
    with scripted(runtime(stack), ids(stack, script)):
        return list(client(stack).responses.create(stream=True, **body))


def raw_final(stack: Stack, script: str, **body: Any) -> dict[str, Any]:
    """The terminal event's response, as the server sent it."""
    url = f"{stack.base_url}/v1/responses"
    with (
        scripted(runtime(stack), ids(stack, script)),
        httpx.stream("POST", url, json={**body, "stream": True}, timeout=60) as reply,
    ):
        lines = [line for line in reply.iter_lines() if line.startswith("data: {")]
    return dict(json.loads(lines[-1][6:])["response"])


def _comparable(response: dict[str, Any]) -> dict[str, Any]:
    """A response without what differs between two runs of one script (ids, times)."""
    text = json.dumps(response)
    for key in ("id", "created_at", "completed_at"):
        response = {k: v for k, v in response.items() if k != key}
    out = json.loads(json.dumps(response))
    out["usage"].pop("input_tokens_details")  # the second run reads the first's prompt
    for item in out["output"]:
        item.pop("id", None)
        item.pop("call_id", None)
    assert text
    return out


def test_a_final_answer_is_reasoning_then_a_message(harmony_stack: Stack) -> None:
    with scripted(runtime(harmony_stack), ids(harmony_stack, FINAL)):
        response = client(harmony_stack).responses.create(
            model="tiny-gpt-oss", input="What is 2+2?", instructions="Be brief."
        )
    assert [item.type for item in response.output] == ["reasoning", "message"]
    reasoning = response.output[0]
    assert reasoning.content is not None and reasoning.content[0].text == "Simple."
    assert reasoning.content[0].type == "reasoning_text" and reasoning.summary == []
    assert response.output_text == "4" and response.status == "completed"
    assert "<|" not in response.model_dump_json()


def test_streamed_events_in_order_and_equal_to_the_whole(harmony_stack: Stack) -> None:
    body = {"model": "tiny-gpt-oss", "input": "What is 2+2?"}
    whole = respond(harmony_stack, FINAL, **body)
    # No include: no `encrypted_content` key (a null fails Open Responses' optional string).
    assert "encrypted_content" not in whole["output"][0]
    events = stream_events(harmony_stack, FINAL, **body)
    kinds = [e.type for e in events]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.reasoning_text.delta"] * kinds.count("response.reasoning_text.delta"),
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * kinds.count("response.output_text.delta"),
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    numbers = [e.sequence_number for e in events]
    assert numbers == sorted(set(numbers))
    done = next(e for e in events if e.type == "response.reasoning_text.done")
    assert done.text == "Simple." and done.output_index == 0
    assert _comparable(raw_final(harmony_stack, FINAL, **body)) == _comparable(whole)


def test_a_tool_call_streams_its_arguments(harmony_stack: Stack) -> None:
    body = {"model": "tiny-gpt-oss", "input": "Weather in Paris?", "tools": [WEATHER]}
    whole = respond(harmony_stack, CALL, **body)
    assert [i["type"] for i in whole["output"]] == ["reasoning", "function_call"]
    call = whole["output"][1]
    assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"location": "Paris"}
    assert call["id"].startswith("fc_") and call["call_id"].startswith("call_")
    assert call["status"] == "completed" and whole["status"] == "completed"
    # <|call|> stopped generation: the engine made exactly the scripted tokens.
    assert whole["usage"]["output_tokens"] == len(ids(harmony_stack, CALL))
    events = stream_events(harmony_stack, CALL, **body)
    added = [e for e in events if e.type == "response.output_item.added"][1]
    assert added.item.type == "function_call" and added.item.arguments == ""
    assert added.item.name == "get_weather"
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert deltas and "".join(deltas) == done.arguments == call["arguments"]
    assert "<|" not in json.dumps(whole)


def test_a_preamble_is_a_message_before_the_call(harmony_stack: Stack) -> None:
    script = (
        "<|channel|>commentary<|message|>Checking the weather.<|end|><|start|>assistant"
        + CALL.split("<|start|>assistant", 1)[1]
    )
    out = respond(harmony_stack, script, model="tiny-gpt-oss", input="Weather?", tools=[WEATHER])[
        "output"
    ]
    assert [i["type"] for i in out] == ["message", "function_call"]
    assert out[0]["content"][0]["text"] == "Checking the weather."


@pytest.mark.parametrize("recipient", ["browser.search", "python", "functions.lookup"])
def test_undeclared_recipients_neither_call_nor_leak(harmony_stack: Stack, recipient: str) -> None:
    script = f'<|channel|>analysis to={recipient} code<|message|>{{"q":"x"}}<|call|>'
    # Without tools: with them, tool_choice's grammar would not let the model write this.
    response = respond(harmony_stack, script, model="tiny-gpt-oss", input="Search.")
    assert not [i for i in response["output"] if i["type"] == "function_call"]
    assert "<|" not in json.dumps(response)


def test_budget_spent_in_analysis_is_incomplete(harmony_stack: Stack) -> None:
    script = "<|channel|>analysis<|message|>" + " think" * 40 + "<|end|>"
    response = respond(
        harmony_stack, script, model="tiny-gpt-oss", input="Hard.", max_output_tokens=16
    )
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [i["type"] for i in response["output"]] == ["reasoning"]
    assert response["output"][0]["status"] == "incomplete"


def test_chat_completions_reasoning_and_tool_calls(harmony_stack: Stack) -> None:
    body = {
        "model": "tiny-gpt-oss",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [
            {"type": "function", "function": {k: v for k, v in WEATHER.items() if k != "type"}}
        ],
    }
    with scripted(runtime(harmony_stack), ids(harmony_stack, CALL)):
        reply = httpx.post(f"{harmony_stack.base_url}/v1/chat/completions", json=body, timeout=60)
    choice = reply.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["tool_calls"][0]["function"]["name"] == "get_weather"
    assert message["reasoning"] == message["reasoning_content"] == "Need weather."
    with scripted(runtime(harmony_stack), ids(harmony_stack, FINAL)):
        streamed = list(
            client(harmony_stack).chat.completions.create(
                model="tiny-gpt-oss", messages=body["messages"], stream=True
            )
        )
    deltas = [c.choices[0].delta for c in streamed if c.choices]
    assert "".join(getattr(d, "reasoning", None) or "" for d in deltas) == "Simple."
    assert "".join(d.content or "" for d in deltas) == "4"


def test_anthropic_messages_thinking_and_tool_use(harmony_stack: Stack) -> None:
    body = {
        "model": "tiny-gpt-oss",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [
            {
                "name": "get_weather",
                "description": "The weather.",
                "input_schema": WEATHER["parameters"],
            }
        ],
    }
    with scripted(runtime(harmony_stack), ids(harmony_stack, CALL)):
        reply = httpx.post(f"{harmony_stack.base_url}/v1/messages", json=body, timeout=60)
    content = reply.json()["content"]
    assert [b["type"] for b in content] == ["thinking", "tool_use"]
    assert content[0]["thinking"] == "Need weather."
    assert content[1]["name"] == "get_weather" and content[1]["input"] == {"location": "Paris"}
    assert reply.json()["stop_reason"] == "tool_use"


def _count(stack: Stack, **body: Any) -> int:
    reply = httpx.post(f"{stack.base_url}/v1/responses/input_tokens", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    return int(reply.json()["input_tokens"])


def test_tool_loop_prompt_is_one_however_replayed(harmony_stack: Stack) -> None:
    """Stateless replay, reasoning only as encrypted_content, and previous_response_id: one
    prompt (H8, H10)."""
    tools = [WEATHER]
    turn1 = respond(
        harmony_stack,
        CALL,
        model="tiny-gpt-oss",
        input="Weather in Paris?",
        tools=tools,
        include=["reasoning.encrypted_content"],
    )
    reasoning, call = turn1["output"]
    assert reasoning["encrypted_content"]
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "20C"}
    user = {"role": "user", "content": "Weather in Paris?"}
    replay = [user, reasoning, call, output]
    only_encrypted = [user, {**reasoning, "content": None}, call, output]
    base = {"model": "tiny-gpt-oss", "tools": tools}
    stateless = _count(harmony_stack, **base, input=replay)
    assert _count(harmony_stack, **base, input=only_encrypted) == stateless
    chained = _count(harmony_stack, **base, previous_response_id=turn1["id"], input=[output])
    assert chained == stateless
    without = _count(harmony_stack, **base, input=[user, call, output])
    assert without < stateless  # the reasoning is in the tool loop's prompt
    final = "<|channel|>final<|message|>It is 20C.<|return|>"
    turn2 = respond(harmony_stack, final, **base, previous_response_id=turn1["id"], input=[output])
    assert turn2["usage"]["input_tokens"] == stateless
    # After a final answer, the turn's reasoning is dropped (H9).
    follow = {"role": "user", "content": "And Rome?"}
    after = [*replay, *turn2["output"], follow]
    dropped = [user, call, output, *turn2["output"], follow]
    assert _count(harmony_stack, **base, input=after) == _count(
        harmony_stack, **base, input=dropped
    )


def test_prompt_renders_as_harmony(harmony_stack: Stack) -> None:
    """H1, H2, H8, H11 on the rendered text."""
    from mlx_responses.v1 import responses_pb2 as pb

    rt = runtime(harmony_stack)
    text = pb.ContentPart(input_text=pb.InputText(text="What is <|channel|>2+2?"))
    user = pb.Item(message=pb.MessageItem(role=pb.ROLE_USER, content=[text]))
    reasoning = pb.Item(
        reasoning=pb.ReasoningItem(content=[pb.ReasoningText(text="Need weather.")])
    )
    call = pb.Item(
        function_call=pb.FunctionCallItem(
            call_id="c1", name="get_weather", arguments='{"location":"Paris"}'
        )
    )
    output = pb.Item(function_call_output=pb.FunctionCallOutputItem(call_id="c1", output="20C"))
    tool = pb.Tool(function=pb.FunctionTool(name="get_weather", description="The weather."))
    schemas = {"get_weather": WEATHER["parameters"]}
    prompt = rt.render("Be brief.", [user, reasoning, call, output], [tool], schemas, {})
    assert "Reasoning: medium" in prompt.text
    assert "Calls to these tools must go to the commentary channel: 'functions'." in prompt.text
    assert "## functions" in prompt.text and "type get_weather = (_: {" in prompt.text
    assert "location: string" in prompt.text and "# Instructions\n\nBe brief." in prompt.text
    loop = (
        "<|start|>assistant<|channel|>analysis<|message|>Need weather.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather"
    )
    assert loop in prompt.text
    assert prompt.text.endswith(
        "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>20C<|end|>"
        "<|start|>assistant"
    )
    # The user's typed <|channel|> is text, not the control token.
    spelled = prompt.text.count("<|channel|>")  # the template's and the user's
    assert prompt.tokens.count(rt.harmony.tokens.channel) == spelled - 1
    high = rt.render(None, [user], [], {}, {"reasoning_effort": "high"})
    assert "Reasoning: high" in high.text


def test_grammars_admit_harmony_turns(harmony_stack: Stack) -> None:
    """tool_choice and json_schema are enforced in harmony's framing: a scripted turn that
    fits passes through the grammar unchanged and ends on its own stop token."""
    forced = respond(
        harmony_stack,
        CALL,
        model="tiny-gpt-oss",
        input="Weather in Paris?",
        tools=[WEATHER],
        tool_choice="required",
    )
    assert [i["type"] for i in forced["output"]] == ["reasoning", "function_call"]
    assert forced["usage"]["output_tokens"] == len(ids(harmony_stack, CALL))
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    script = (
        "<|channel|>analysis<|message|>One.<|end|><|start|>assistant"
        '<|channel|>final<|message|>{"a":1}<|return|>'
    )
    answer = respond(
        harmony_stack,
        script,
        model="tiny-gpt-oss",
        input="JSON please.",
        text={"format": {"type": "json_schema", "name": "a", "schema": schema}},
    )
    message = answer["output"][-1]
    assert answer["status"] == "completed" and message["type"] == "message"
    assert json.loads(message["content"][0]["text"]) == {"a": 1}
    assert answer["usage"]["output_tokens"] == len(ids(harmony_stack, script))


def test_replayed_history_stays_text(harmony_stack: Stack) -> None:
    """H11: an assistant turn with content null and tool calls, reasoning set, renders; text
    spelling control tokens in any replayed field stays text."""
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"location":"Paris"}'},
    }
    messages = [
        {"role": "user", "content": "Weather in <|channel|>final Paris?"},
        {
            "role": "assistant",
            "content": None,
            "reasoning": "Need <|end|> it.",
            "tool_calls": [call],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "20C <|return|>"},
    ]
    tools = [{"type": "function", "function": {k: v for k, v in WEATHER.items() if k != "type"}}]
    body = {"model": "tiny-gpt-oss", "messages": messages, "tools": tools}
    with scripted(runtime(harmony_stack), ids(harmony_stack, FINAL)):
        reply = httpx.post(f"{harmony_stack.base_url}/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"] == "4"

    from mlx_responses.v1 import responses_pb2 as pb

    rt = runtime(harmony_stack)

    def message(role: int, text: str) -> pb.Item:
        part = (
            pb.ContentPart(input_text=pb.InputText(text=text))
            if role == pb.ROLE_USER
            else pb.ContentPart(output_text=pb.OutputText(text=text))
        )
        return pb.Item(message=pb.MessageItem(role=role, content=[part]))

    items = [
        message(pb.ROLE_USER, "Weather in <|channel|>final Paris?"),
        pb.Item(
            function_call=pb.FunctionCallItem(call_id="c1", name="get_weather", arguments="{}")
        ),
        pb.Item(
            function_call_output=pb.FunctionCallOutputItem(call_id="c1", output="20C <|return|>")
        ),
        pb.Item(reasoning=pb.ReasoningItem(content=[pb.ReasoningText(text="So <|end|> 20C.")])),
        message(pb.ROLE_ASSISTANT, "It is 20C.<|call|>"),
        message(pb.ROLE_USER, "Thanks."),
    ]
    prompt = rt.render(None, items, [], {}, {})
    t = rt.harmony.tokens
    typed = {t.channel: 1, t.return_: 1, t.call: 1}  # spelled by the client, kept as text
    for token, spelling in (
        (t.channel, "<|channel|>"),
        (t.return_, "<|return|>"),
        (t.call, "<|call|>"),
    ):
        assert prompt.tokens.count(token) == prompt.text.count(spelling) - typed[token]


def test_a_compaction_summary_is_the_final_text(harmony_stack: Stack) -> None:
    """The summary a harmony model writes is its final answer, read by token: no reasoning,
    no protocol text."""
    items: list[dict[str, Any]] = []
    for word in ("apple", "river", "cloud", "stone", "green", "music", "paper", "light"):
        items += [
            {"role": "user", "content": f"Reply with: {word} " * 4},
            {"role": "assistant", "content": word},
        ]
    items.append({"role": "user", "content": "Reply with: hello"})
    script = (
        "<|channel|>analysis<|message|>Short.<|end|><|start|>assistant"
        "<|channel|>final<|message|>Echoes.<|return|>"
    )
    with scripted(runtime(harmony_stack), ids(harmony_stack, script)):
        reply = httpx.post(
            f"{harmony_stack.base_url}/v1/responses/compact",
            json={"model": "tiny-gpt-oss", "input": items, "keep_tokens": 20},
            timeout=60,
        )
    assert reply.status_code == 200, reply.text
    import base64

    encrypted = reply.json()["output"][-1]["encrypted_content"]
    payload = json.loads(base64.urlsafe_b64decode(encrypted + "=" * (-len(encrypted) % 4)))
    assert payload["summary"] == "Echoes."


def test_stop_sequences_cut_the_answer(harmony_stack: Stack) -> None:
    """Chat Completions' `stop` cuts harmony's answer text (not its reasoning), streamed or not."""
    script = (
        "<|channel|>analysis<|message|>Count. STOP here.<|end|><|start|>assistant"
        "<|channel|>final<|message|>one two STOP three<|return|>"
    )
    messages = [{"role": "user", "content": "Count."}]
    with scripted(runtime(harmony_stack), ids(harmony_stack, script)):
        reply = client(harmony_stack).chat.completions.create(
            model="tiny-gpt-oss", messages=messages, stop=["STOP"]
        )
    message = reply.choices[0].message
    assert message.content == "one two " and reply.choices[0].finish_reason == "stop"
    assert (message.model_extra or {})["reasoning"] == "Count. STOP here."
    with scripted(runtime(harmony_stack), ids(harmony_stack, script)):
        chunks = list(
            client(harmony_stack).chat.completions.create(
                model="tiny-gpt-oss", messages=messages, stop=["STOP"], stream=True
            )
        )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one two "
