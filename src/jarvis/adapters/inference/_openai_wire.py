"""The OpenAI Chat Completions wire format: request bodies out, completions and chunks in.

Shared by the HTTP adapters (OpenAI-compatible servers, vLLM) and the embedded llama.cpp
engine, whose Python API takes and returns the same shapes. Everything here is pure:
no I/O, no third-party imports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

from jarvis.adapters.inference._bounds import (
    MAX_USAGE,
    ReplyBounds,
    ReplyMeter,
    ReplyTooLarge,
    trusted_count,
)
from jarvis.adapters.inference._json import (
    as_json_object,
    as_object,
    get_int,
    get_list,
    get_object,
    get_str,
)
from jarvis.adapters.inference._tool_assembly import ToolCallAssembler
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.llm.completion import (
    Completion,
    FinishReason,
    ResponseFormat,
    StreamChunk,
    ToolChoice,
    Usage,
)
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message, Role, ToolCall
from jarvis.domain.tools.specs import ToolSpec, openai_function

T = TypeVar("T")

OPENAI_OPTION_KEYS = frozenset(
    {
        "seed",
        "top_p",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "user",
        "parallel_tool_calls",
        "reasoning_effort",
    }
)
"""``InferenceRequest.options`` keys forwarded to any OpenAI-compatible server."""

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "eos_token": "stop",
    "stop_sequence": "stop",
    "end_turn": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "error": "error",
}


class WireError(ValueError):
    """The engine's answer does not have the documented shape."""


def finish_reason(raw: str | None, *, has_tool_calls: bool) -> FinishReason:
    """Map an engine's finish reason; tool calls with a plain "stop" mean "tool_calls"."""
    reason = _FINISH_REASONS.get((raw or "").lower(), "stop")
    if has_tool_calls and reason == "stop":
        return "tool_calls"
    return reason


# --- requests ----------------------------------------------------------------------------


def tool_call_to_openai(call: ToolCall) -> JSONObject:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments_json()},
    }


def message_to_openai(message: Message) -> JSONObject:
    if message.role is Role.TOOL:
        return {
            "role": "tool",
            "content": message.content,
            "tool_call_id": message.tool_call_id or "",
        }
    if message.role is Role.ASSISTANT and message.tool_calls:
        # "" rather than null: OpenAI and vLLM take both, llama.cpp's server only a string
        return {
            "role": "assistant",
            "content": message.content,
            "tool_calls": [tool_call_to_openai(call) for call in message.tool_calls],
        }
    return {"role": message.role.value, "content": message.content}


def messages_to_openai(messages: Iterable[Message]) -> list[JSONValue]:
    return [message_to_openai(message) for message in messages]


def tool_to_openai(spec: ToolSpec) -> JSONObject:
    """The OpenAI function-calling rendering of a tool spec (Ollama's ``tools`` too)."""
    return openai_function(spec)


def tools_to_openai(tools: Iterable[ToolSpec]) -> list[JSONValue]:
    return [tool_to_openai(tool) for tool in tools]


def tool_choice_to_openai(choice: ToolChoice, tools: tuple[ToolSpec, ...]) -> JSONValue:
    """``required`` with exactly one tool is sent as that tool by name.

    The two mean the same thing, and servers that cannot force "any tool" (llama.cpp's
    function-calling chat formats) can force a named one.
    """
    if choice == "required" and len(tools) == 1:
        return {"type": "function", "function": {"name": tools[0].name}}
    return choice


def response_format_to_openai(response_format: ResponseFormat) -> JSONObject:
    """The standard OpenAI shape: ``json_schema`` with a named schema, or ``json_object``."""
    if response_format.type == "json_object" or response_format.schema is None:
        return {"type": "json_object"}
    spec: JSONObject = {"name": response_format.name, "schema": response_format.schema}
    if response_format.strict:
        spec["strict"] = True
    return {"type": "json_schema", "json_schema": spec}


def response_format_with_inline_schema(response_format: ResponseFormat) -> JSONObject:
    """The older ``json_object`` + ``schema`` shape (llama.cpp's server, Anyscale)."""
    if response_format.schema is None:
        return {"type": "json_object"}
    return {"type": "json_object", "schema": response_format.schema}


class WireRenderer:
    """Renders messages and tool lists, reusing what an earlier request already rendered.

    An agent sends its whole conversation again on every turn, one or two messages longer
    each time, with the same tools. The renderer remembers the last rendering of each
    conversation (recognised by its first message object) and of each tool tuple; a request
    whose messages begin with the very same objects renders only the ones after them.
    Messages and specs are immutable, so identity is proof enough. At most ``capacity``
    conversations and tool lists are remembered, the least recently used forgotten first;
    the rendered dicts are shared between bodies and must never be modified.
    """

    __slots__ = ("_capacity", "_conversations", "_tools")

    def __init__(self, capacity: int = 64) -> None:
        self._capacity = max(1, capacity)
        self._conversations: dict[int, tuple[tuple[Message, ...], list[JSONValue]]] = {}
        self._tools: dict[int, tuple[tuple[ToolSpec, ...], list[JSONValue]]] = {}

    def messages(self, messages: tuple[Message, ...]) -> list[JSONValue]:
        if not messages:
            return []
        key = id(messages[0])
        known = self._conversations.pop(key, None)  # (held there, so the same first message)
        same = 0
        if known is not None:
            previous, rendered = known
            for old, new in zip(previous, messages, strict=False):
                if old is not new:
                    break
                same += 1
            result = rendered[:same]
        else:
            result = []
        result.extend(message_to_openai(message) for message in messages[same:])
        _remember(self._conversations, key, (messages, result), self._capacity)
        return result.copy()

    def tools(self, tools: tuple[ToolSpec, ...]) -> list[JSONValue]:
        key = id(tools)
        known = self._tools.pop(key, None)
        # the entry holds its tuple, so an id found here is that very tuple
        rendered = known[1] if known is not None else tools_to_openai(tools)
        _remember(self._tools, key, (tools, rendered), self._capacity)
        return rendered.copy()


def _remember(cache: dict[int, T], key: int, entry: T, capacity: int) -> None:
    """Store ``entry`` as the most recently used; forget the oldest beyond ``capacity``."""
    cache[key] = entry
    if len(cache) > capacity:
        del cache[next(iter(cache))]


def chat_body(
    request: InferenceRequest,
    *,
    stream: bool,
    option_keys: frozenset[str] = OPENAI_OPTION_KEYS,
    renderer: WireRenderer | None = None,
) -> JSONObject:
    """The request body for ``POST /chat/completions`` (without structured output)."""
    body: JSONObject = {
        "model": request.model,
        "messages": renderer.messages(request.messages)
        if renderer is not None
        else messages_to_openai(request.messages),
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        body["tools"] = (
            renderer.tools(request.tools)
            if renderer is not None
            else tools_to_openai(request.tools)
        )
        body["tool_choice"] = tool_choice_to_openai(request.tool_choice, request.tools)
    for key, value in request.options.items():
        if key in option_keys:
            body[key] = value
    return body


# --- responses ---------------------------------------------------------------------------


def parse_usage(
    data: Mapping[str, object] | None, *, max_completion: int = MAX_USAGE
) -> Usage | None:
    """The usage figures, or ``None`` when there are none or any of them cannot be true
    (not an int, negative, beyond ``MAX_USAGE``, or more completion tokens than the reply
    could hold): figures an engine got wrong are dropped, never passed on."""
    if data is None:
        return None
    raw_prompt, raw_completion = data.get("prompt_tokens"), data.get("completion_tokens")
    if raw_prompt is None and raw_completion is None:
        return None
    prompt = trusted_count(raw_prompt if raw_prompt is not None else 0)
    completion = trusted_count(
        raw_completion if raw_completion is not None else 0, min(max_completion, MAX_USAGE)
    )
    if prompt is None or completion is None:
        return None
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


def parse_tool_call(data: object, index: int) -> ToolCall:
    call = as_object(data)
    if call is None:
        raise WireError(f"a tool call that is not an object: {data!r}")
    function = get_object(call, "function") or {}
    call_id = get_str(call, "id") or f"call_{index}"
    name = get_str(function, "name") or ""
    arguments = function.get("arguments")
    as_dict = as_json_object(arguments)
    if as_dict is not None:
        return ToolCall(id=call_id, name=name, arguments=as_dict)
    text = arguments if isinstance(arguments, str) else None
    return ToolCall.from_json_text(id=call_id, name=name, text=text)


def parse_completion(data: object, *, model: str, bounds: ReplyBounds | None = None) -> Completion:
    """A non-streamed ``chat.completion`` object as a :class:`Completion`.

    With ``bounds``, an answer far longer than its request allowed is a :class:`WireError`
    and usage figures beyond them are dropped.
    """
    body = as_object(data)
    if body is None:
        raise WireError("a completion that is not a JSON object")
    choices = get_list(body, "choices")
    choice = as_object(choices[0]) if choices else None
    if choice is None:
        raise WireError("a completion without choices")
    message = get_object(choice, "message")
    if message is None:
        raise WireError("a choice without a message")
    raw_calls = get_list(message, "tool_calls")
    content = get_str(message, "content") or ""
    if bounds is not None:
        _check_reply_text(bounds, content, raw_calls)
    calls = tuple(parse_tool_call(raw, index) for index, raw in enumerate(raw_calls))
    max_completion = bounds.max_events if bounds is not None else MAX_USAGE
    return Completion(
        content=content,
        tool_calls=calls,
        finish_reason=finish_reason(get_str(choice, "finish_reason"), has_tool_calls=bool(calls)),
        usage=parse_usage(get_object(body, "usage"), max_completion=max_completion) or Usage(),
        model=get_str(body, "model") or model,
    )


def _check_reply_text(bounds: ReplyBounds, content: str, raw_calls: list[object]) -> None:
    chars = len(content)
    for raw in raw_calls:
        function = get_object(as_object(raw) or {}, "function") or {}
        arguments = function.get("arguments")
        chars += len(get_str(function, "name") or "")
        chars += len(arguments) if isinstance(arguments, str) else 0
    try:
        bounds.check_text(chars, len(raw_calls))
    except ReplyTooLarge as exc:
        raise WireError(str(exc)) from None


def carries_text(chunk: Mapping[str, object]) -> bool:
    """Whether a ``chat.completion.chunk`` carries generated text (content or a tool-call
    fragment): servers send one such event per generated token, or fewer, so counting them
    bounds the reply by ``max_tokens`` even when the server itself does not."""
    for raw in get_list(chunk, "choices"):
        choice = as_object(raw)
        delta = get_object(choice, "delta") if choice is not None else None
        if delta is not None and (get_str(delta, "content") or get_list(delta, "tool_calls")):
            return True
    return False


class ChunkReader:
    """Reads ``chat.completion.chunk`` objects; content goes out at once, the rest at the end.

    The finish reason and the usage arrive in different chunks (usage last, with empty
    ``choices``, when ``stream_options.include_usage`` is honoured), and tool calls arrive
    as fragments, so the one final chunk is built by :meth:`final` after the stream ended.
    """

    def __init__(self, model: str, *, meter: ReplyMeter | None = None) -> None:
        self.model = model
        self.finish: str | None = None
        self.usage: Usage | None = None
        self._tools = ToolCallAssembler()
        self._meter = meter
        self._max_completion = meter.bounds.max_events if meter is not None else MAX_USAGE

    def feed(self, chunk: Mapping[str, object]) -> StreamChunk | None:
        """Take one chunk; its content, if any. With a meter, a chunk that takes the reply
        past its bounds raises :class:`~._bounds.ReplyTooLarge`."""
        self.model = get_str(chunk, "model") or self.model
        usage = parse_usage(get_object(chunk, "usage"), max_completion=self._max_completion)
        if usage is not None:
            self.usage = usage
        content = ""
        generated = 0
        for raw in get_list(chunk, "choices"):
            choice = as_object(raw)
            if choice is None or (get_int(choice, "index") or 0) != 0:
                continue
            delta = get_object(choice, "delta") or {}
            content += get_str(delta, "content") or ""
            fragments = get_list(delta, "tool_calls")
            if fragments:
                generated += self._tools.add(fragments)
            self.finish = get_str(choice, "finish_reason") or self.finish
        if self._meter is not None:
            self._meter.event(len(content) + generated)
            while self._meter.calls < self._tools.count:
                self._meter.call()
        return StreamChunk(content=content, model=self.model) if content else None

    def final(self) -> StreamChunk:
        calls = self._tools.calls()
        return StreamChunk(
            tool_calls=calls,
            finish_reason=finish_reason(self.finish, has_tool_calls=bool(calls)),
            usage=self.usage,
            model=self.model,
        )
