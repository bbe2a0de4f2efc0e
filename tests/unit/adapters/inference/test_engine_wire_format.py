"""The exact requests the engines send, and how fragments and events are read back."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jarvis.adapters.inference._bodies import BodyTooLarge
from jarvis.adapters.inference._openai_wire import (
    WireRenderer,
    messages_to_openai,
    tool_to_openai,
)
from jarvis.adapters.inference._sse import ServerSentEvent, server_sent_events, sse_data
from jarvis.adapters.inference._tool_assembly import ToolCallAssembler
from jarvis.adapters.inference.ollama import OllamaEngine
from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine
from jarvis.adapters.inference.vllm import VllmEngine
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import ResponseFormat
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message, ToolCall
from jarvis.domain.tools.specs import ToolSpec

SEARCH = ToolSpec(
    name="search",
    description="Search the web.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)
CLOCK = ToolSpec(name="clock", description="The time.")
SCHEMA: JSONObject = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
CONVERSATION = (
    Message.system("Be brief."),
    Message.user("Find cats"),
    Message.assistant(
        "",
        (
            ToolCall(id="c1", name="search", arguments={"q": "cats"}),
            ToolCall(id="c2", name="search", raw_arguments='{"q": "dogs'),
        ),
    ),
    Message.tool("3 results", tool_call_id="c1", name="search"),
)
COMPLETION = {
    "model": "m",
    "choices": [{"index": 0, "message": {"content": "ok"}, "finish_reason": "stop"}],
}


class Capture:
    def __init__(self, reply: object = COMPLETION) -> None:
        self.bodies: list[dict[str, object]] = []
        self.headers: list[httpx.Headers] = []
        self.reply = reply

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        self.headers.append(request.headers)
        if body.get("stream") and self.reply is COMPLETION:
            event = {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
            return httpx.Response(
                200,
                text=f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n",
                headers={"content-type": "text/event-stream"},
            )
        return httpx.Response(200, json=self.reply)


async def test_the_openai_request_carries_tools_choice_format_and_tool_messages() -> None:
    capture = Capture()
    engine = OpenAICompatibleEngine(
        "http://e.test/v1", api_key="sk-test", transport=httpx.MockTransport(capture)
    )
    request = InferenceRequest(
        messages=CONVERSATION,
        model="gpt",
        temperature=0.2,
        max_tokens=50,
        tools=(SEARCH,),
        tool_choice="required",
        response_format=ResponseFormat(schema=SCHEMA, name="verdict"),
        options={"seed": 1, "top_p": 0.9, "num_ctx": 4096},
    )
    await engine.generate(request)
    # with tools, a whole request is made as a stream (so it can be held to max_tokens)
    [body] = capture.bodies
    assert body == {
        "model": "gpt",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Find cats"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "search", "arguments": '{"q":"cats"}'},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "search", "arguments": '{"q": "dogs'},
                    },
                ],
            },
            {"role": "tool", "content": "3 results", "tool_call_id": "c1"},
        ],
        "temperature": 0.2,
        "max_tokens": 50,
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [tool_to_openai(SEARCH)],
        "tool_choice": {"type": "function", "function": {"name": "search"}},
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "verdict", "schema": SCHEMA},
        },
        "seed": 1,
        "top_p": 0.9,
    }
    assert capture.headers[0]["authorization"] == "Bearer sk-test"


async def test_required_with_several_tools_and_auto_are_sent_as_such() -> None:
    capture = Capture()
    engine = OpenAICompatibleEngine("http://e.test/v1", transport=httpx.MockTransport(capture))
    for choice in ("required", "auto", "none"):
        request = InferenceRequest(
            messages=(Message.user("x"),), model="m", tools=(SEARCH, CLOCK), tool_choice=choice
        )
        await engine.generate(request)
    assert [body["tool_choice"] for body in capture.bodies] == ["required", "auto", "none"]
    assert "authorization" not in capture.headers[0]


async def test_streaming_asks_for_usage_and_json_object_needs_no_schema() -> None:
    bodies: list[dict[str, object]] = []
    events = [
        {"choices": [{"index": 0, "delta": {"content": "{}"}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}},
    ]
    stream = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, text=stream)

    engine = OpenAICompatibleEngine("http://e.test/v1", transport=httpx.MockTransport(handler))
    request = InferenceRequest(
        messages=(Message.user("x"),),
        model="m",
        response_format=ResponseFormat(type="json_object"),
    )
    chunks = [chunk async for chunk in engine.stream(request)]
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 6  # the usage-only chunk after the finish reason
    [body] = bodies
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["response_format"] == {"type": "json_object"}


async def test_a_refused_json_schema_is_asked_again_inline_and_remembered() -> None:
    bodies: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        if body.get("response_format", {}).get("type") == "json_schema":
            return httpx.Response(500, json={"error": {"message": "response_format.type: literal"}})
        return httpx.Response(200, json=COMPLETION)

    engine = OpenAICompatibleEngine("http://e.test/v1", transport=httpx.MockTransport(handler))
    request = InferenceRequest(
        messages=(Message.user("x"),), model="m", response_format=ResponseFormat(schema=SCHEMA)
    )
    await engine.generate(request)
    await engine.generate(request)
    assert [b["response_format"] for b in bodies] == [
        {"type": "json_schema", "json_schema": {"name": "response", "schema": SCHEMA}},
        {"type": "json_object", "schema": SCHEMA},
        {"type": "json_object", "schema": SCHEMA},
    ]


async def test_vllm_falls_back_to_guided_json_and_forwards_its_sampling_options() -> None:
    bodies: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        if "response_format" in body:
            return httpx.Response(400, json={"message": "extra fields: response_format.schema"})
        return httpx.Response(200, json=COMPLETION)

    engine = VllmEngine("http://v.test/v1", transport=httpx.MockTransport(handler))
    request = InferenceRequest(
        messages=(Message.user("x"),),
        model="m",
        response_format=ResponseFormat(schema=SCHEMA),
        options={"top_k": 5, "min_p": 0.1, "num_ctx": 1},
    )
    await engine.generate(request)
    assert len(bodies) == 3
    assert bodies[-1]["guided_json"] == SCHEMA
    assert "response_format" not in bodies[-1]
    assert (bodies[-1]["top_k"], bodies[-1]["min_p"]) == (5, 0.1)
    assert "num_ctx" not in bodies[-1]


WITH_TOOLS = InferenceRequest(messages=(Message.user("x"),), model="m", tools=(SEARCH,))


@pytest.mark.parametrize(
    ("make", "whole"),
    [
        # any OpenAI-compatible server: not known to stop at max_tokens with tools
        (lambda t: OpenAICompatibleEngine("http://e.test/v1", transport=t), False),
        (lambda t: OpenAICompatibleEngine("https://api.openai.com/v1", transport=t), True),
        (lambda t: VllmEngine("http://v.test/v1", transport=t), True),
        (
            lambda t: OpenAICompatibleEngine(
                "http://e.test/v1", transport=t, honours_max_tokens=True
            ),
            True,
        ),
        (lambda t: VllmEngine("http://v.test/v1", transport=t, honours_max_tokens=False), False),
    ],
)
async def test_a_tool_turn_is_asked_whole_only_of_a_server_that_honours_max_tokens(
    make: Callable[[httpx.MockTransport], OpenAICompatibleEngine], whole: bool
) -> None:
    capture = Capture()
    engine = make(httpx.MockTransport(capture))
    completion = await engine.generate(WITH_TOOLS)
    assert completion.content == "ok"
    [body] = capture.bodies
    assert body["stream"] is not whole
    assert ("stream_options" in body) is not whole


async def test_the_ollama_request_is_the_native_shape() -> None:
    reply = {
        "model": "m",
        "message": {"role": "assistant", "content": "ok"},
        "done": True,
        "done_reason": "stop",
    }
    capture = Capture(reply)
    engine = OllamaEngine("ollama.test", num_ctx=8192, transport=httpx.MockTransport(capture))
    request = InferenceRequest(
        messages=CONVERSATION,
        model="qwen3",
        temperature=0.1,
        max_tokens=64,
        tools=(SEARCH,),
        response_format=ResponseFormat(type="json_object"),
        options={"top_k": 10, "keep_alive": "10m", "parallel_tool_calls": True},
    )
    await engine.generate(request)
    [body] = capture.bodies
    assert body == {
        "model": "qwen3",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Find cats"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"index": 0, "name": "search", "arguments": {"q": "cats"}},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"index": 1, "name": "search", "arguments": {}},
                    },
                ],
            },
            {"role": "tool", "content": "3 results", "tool_name": "search", "tool_call_id": "c1"},
        ],
        "stream": False,
        "options": {"temperature": 0.1, "num_predict": 64, "num_ctx": 8192, "top_k": 10},
        "think": False,
        "keep_alive": "10m",
        "tools": [tool_to_openai(SEARCH)],
        "format": "json",
    }


async def test_ollama_tool_calls_get_ids_and_string_arguments_are_parsed() -> None:
    reply = {
        "model": "m",
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"function": {"name": "search", "arguments": {"q": "cats"}}},
                {"id": "given", "function": {"name": "search", "arguments": '{"q": "dogs"}'}},
                {"function": {"name": "search", "arguments": "{broken"}},
            ],
        },
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 12,
        "eval_count": 7,
    }
    engine = OllamaEngine("http://o.test", transport=httpx.MockTransport(Capture(reply)))
    completion = await engine.generate(InferenceRequest(messages=(Message.user("x"),), model="m"))
    assert completion.finish_reason == "tool_calls"
    assert [(c.id, c.arguments, c.raw_arguments) for c in completion.tool_calls] == [
        ("call_0", {"q": "cats"}, None),
        ("given", {"q": "dogs"}, None),
        ("call_2", {}, "{broken"),
    ]
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (12, 7)


# --- fragments and events ----------------------------------------------------------------------


def test_fragments_are_assembled_by_index_with_names_never_doubled() -> None:
    assembler = ToolCallAssembler()
    assembler.add([{"index": 0, "id": "a", "function": {"name": "search", "arguments": ""}}])
    assembler.add([{"index": 1, "id": "b", "function": {"name": "clock", "arguments": "{}"}}])
    assembler.add([{"index": 0, "id": "a", "function": {"name": "search", "arguments": '{"q":'}}])
    assembler.add([{"index": 0, "function": {"arguments": ' "cats"}'}}])
    first, second = assembler.calls()
    assert (first.id, first.name, first.arguments) == ("a", "search", {"q": "cats"})
    assert (second.id, second.name, second.arguments) == ("b", "clock", {})


def test_malformed_assembled_arguments_are_kept_raw() -> None:
    assembler = ToolCallAssembler()
    assembler.add([{"index": 0, "function": {"name": "search", "arguments": '{"q": "ca'}}])
    [call] = assembler.calls()
    assert call.id == "call_0"
    assert call.raw_arguments == '{"q": "ca'
    assert call.arguments == {}


async def _lines(*lines: str) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def test_server_sent_events_join_data_lines_and_skip_comments() -> None:
    events = [
        event
        async for event in server_sent_events(
            _lines(": ping", "event: tool_calls", "data: a", "data: b", "", "data: [DONE]")
        )
    ]
    assert events == [ServerSentEvent(data="a\nb", event="tool_calls"), ServerSentEvent("[DONE]")]


SSE_PIECES = [
    ": ping\n",
    "event: tool_calls\n",
    "data: a\n",
    "data:b\n",
    "data\n",
    "data: caf\u00e9 \u00e9\n",
    "data:  two spaces\n",
    "dataX: not data\n",
    "id: 7\n",
    "\n",
    "\r\n",
    "data: c\r\n",
    "data: [DONE]\n",
    "data: tail",
]


async def _chunks(body: bytes, cuts: list[int]) -> AsyncIterator[bytes]:
    start = 0
    for cut in sorted({c for c in cuts if 0 < c < len(body)}):
        yield body[start:cut]
        start = cut
    yield body[start:]


def _sse_data(body: bytes, cuts: list[int], max_bytes: int = 1 << 20) -> list[str]:
    async def read() -> list[str]:
        deadline = asyncio.get_running_loop().time() + 60
        return [data async for data in sse_data(_chunks(body, cuts), deadline, max_bytes)]

    return asyncio.run(read())


def _reference(text: str) -> list[str]:
    async def read() -> list[str]:
        lines = _lines(*text.split("\n"))
        return [event.data async for event in server_sent_events(lines)]

    return asyncio.run(read())


@settings(max_examples=150, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(SSE_PIECES), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8),
)
def test_events_read_from_bytes_are_the_events_read_from_lines(
    pieces: list[str], cuts: list[int]
) -> None:
    """However the body is cut into chunks, reading it straight from its bytes gives the
    data the line-by-line reader gives."""
    text = "".join(pieces)
    assert _sse_data(text.encode(), cuts) == _reference(text)


def test_events_read_from_bytes_keep_the_byte_cap_and_replace_bad_bytes() -> None:
    body = b"data: caf\xe9\n\ndata: " + b"x" * 100 + b"\n\n"
    assert _sse_data(body[:14], []) == ["caf\ufffd"]
    with pytest.raises(BodyTooLarge):
        _sse_data(body, [20, 40], max_bytes=60)


# --- rendering a growing conversation once ------------------------------------------------------


def test_a_growing_conversation_renders_like_the_plain_renderer_turn_after_turn() -> None:
    renderer = WireRenderer()
    call = ToolCall(id="c1", name="lookup", arguments={"q": "x"})
    conversation: list[Message] = [Message.system("sys"), Message.user("hi")]
    for turn in range(3):
        rendered = renderer.messages(tuple(conversation))
        assert rendered == messages_to_openai(conversation)
        conversation += [
            Message.assistant("", (call,)),
            Message.tool(f"result {turn}", tool_call_id="c1", name="lookup"),
        ]


def counting_renders(monkeypatch: pytest.MonkeyPatch) -> list[Message]:
    """Every message rendered from now on, in order."""
    import jarvis.adapters.inference._openai_wire as wire

    rendered: list[Message] = []
    plain = wire.message_to_openai

    def counting(message: Message) -> JSONObject:
        rendered.append(message)
        return plain(message)

    monkeypatch.setattr(wire, "message_to_openai", counting)
    return rendered


def test_only_new_messages_are_rendered_again(monkeypatch: pytest.MonkeyPatch) -> None:
    rendered = counting_renders(monkeypatch)
    renderer = WireRenderer()
    first = (Message.system("sys"), Message.user("hi"))
    renderer.messages(first)
    grown = (*first, Message.assistant("hello"), Message.user("and?"))
    renderer.messages(grown)
    assert rendered == [*first, *grown[2:]]


def test_a_conversation_that_changed_midway_is_rendered_from_the_change() -> None:
    renderer = WireRenderer()
    system = Message.system("sys")
    renderer.messages((system, Message.user("a"), Message.assistant("b")))
    # same first message object, different history after it (e.g. a shortened context)
    other = (system, Message.user("c"))
    assert renderer.messages(other) == messages_to_openai(other)
    assert renderer.messages(()) == []


def test_rendered_lists_are_the_callers_own() -> None:
    renderer = WireRenderer()
    tools = (ToolSpec(name="lookup", description="Look up."),)
    renderer.tools(tools).clear()
    assert renderer.tools(tools) == [tool_to_openai(tools[0])]
    conversation = (Message.system("s"), Message.user("u"))
    renderer.messages(conversation).append({"role": "user", "content": "added by the caller"})
    assert renderer.messages(conversation) == messages_to_openai(conversation)


def test_only_the_most_recent_conversations_are_remembered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rendered = counting_renders(monkeypatch)
    renderer = WireRenderer(capacity=2)
    kept, dropped = (Message.system("kept"),), (Message.system("dropped"),)
    renderer.messages(dropped)
    renderer.messages(kept)
    renderer.messages(kept)  # used again: now the most recent
    renderer.messages((Message.system("third"),))  # one too many: "dropped" goes
    rendered.clear()
    renderer.messages(kept)
    renderer.messages(dropped)
    assert rendered == [dropped[0]]


def test_tool_spec_renders_openai_function_format() -> None:
    spec = ToolSpec(
        name="calculator",
        description="Evaluate arithmetic.",
        parameters={"type": "object", "properties": {"expression": {"type": "string"}}},
    )
    assert tool_to_openai(spec) == {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate arithmetic.",
            "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
        },
    }
