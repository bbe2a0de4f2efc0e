"""Ollama through its native API (``/api/chat``, ``/api/tags``), not the ``/v1`` shim.

The native API is the one that reports ``done_reason`` (so a cut-off answer is "length",
not "stop"), takes ``options.num_ctx``, ``think`` and a JSON schema in ``format``, and
streams NDJSON. Mapping:

* request: ``options`` = ``temperature``, ``num_predict`` (= ``max_tokens``), ``num_ctx``
  (request option, else the engine's), plus the Ollama options named in
  ``InferenceRequest.options``; ``think: false`` unless the request asks for it;
  ``format`` = the JSON schema (``"json"`` for ``json_object``); tools as OpenAI function
  specs. ``tool_choice="none"`` sends no tools (the caller asked for none); ``"required"``
  cannot be enforced by Ollama and is sent as plain tools.
* messages: assistant tool calls with *object* arguments (unparsed argument text, which
  Ollama cannot take, becomes ``{}``), TOOL messages with ``tool_name`` and
  ``tool_call_id``.
* answers: tool calls with object (or, from some versions, string) arguments become
  :class:`ToolCall` values, ids ``call_<n>`` when Ollama gives none; ``done_reason``
  "length" → "length", tool calls → "tool_calls", otherwise "stop"; usage from
  ``prompt_eval_count`` / ``eval_count``.
* bounds: every reply is bounded (:mod:`._bounds`) by size, by its length against
  ``num_predict`` and by the number of its NDJSON lines; every request ends by the
  engine's ``timeout``, counted for the whole request (the stream included); usage
  figures that cannot be true are dropped (zeros for a whole answer, none for a stream).
  A stream is read up to ``num_predict`` lines carrying text and then closed (which stops
  the generation): the answer so far ends with the finish reason ``length``.
* errors (``{"error": "..."}``, also as an NDJSON line mid-stream): "model ... not found" →
  ``ModelNotFoundError`` listing ``/api/tags``; "does not support tools" →
  ``ToolsNotSupportedError``; context wording → ``ContextTooLongError``.

The host is taken as ``OLLAMA_HOST`` takes it: ``127.0.0.1:11434``, ``localhost`` (port
11434 implied) or a full URL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from urllib.parse import urlsplit

import httpx

from jarvis.adapters.inference._bounds import (
    ReplyBounds,
    ReplyMeter,
    ReplyTooLarge,
    trusted_count,
)
from jarvis.adapters.inference._error_bodies import (
    error_message,
    is_context_overflow,
    mentions_missing_model,
)
from jarvis.adapters.inference._http import (
    EngineHttp,
    EngineStatusError,
    EngineTransport,
    Reply,
    RetryPolicy,
    Streamed,
    default_status_error,
)
from jarvis.adapters.inference._json import (
    as_json_object,
    as_object,
    get_list,
    get_object,
    get_str,
    loads,
)
from jarvis.adapters.inference._missing_model import model_not_found
from jarvis.adapters.inference._openai_wire import tools_to_openai
from jarvis.domain.cut_text import masked_prefix
from jarvis.domain.errors import (
    ContextTooLongError,
    EngineProtocolError,
    InferenceError,
    ToolsNotSupportedError,
)
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.llm.completion import Completion, FinishReason, StreamChunk, Usage
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message, Role, ToolCall

DEFAULT_PORT = 11434
HEALTH_TIMEOUT = 2.0

OLLAMA_OPTION_KEYS = frozenset(
    {
        "seed",
        "top_k",
        "top_p",
        "min_p",
        "typical_p",
        "stop",
        "repeat_penalty",
        "repeat_last_n",
        "presence_penalty",
        "frequency_penalty",
        "num_keep",
        "num_batch",
        "num_gpu",
        "main_gpu",
        "num_thread",
        "mirostat",
        "mirostat_tau",
        "mirostat_eta",
    }
)
"""``InferenceRequest.options`` keys that go into Ollama's ``options`` object."""

_START_HINT = (
    "Start Ollama with `ollama serve` (and fetch a model with `ollama pull <model>`), "
    "or point OLLAMA_HOST at a running server."
)


def normalize_host(host: str) -> str:
    """``OLLAMA_HOST`` semantics: a bare host gets ``http://`` and port 11434."""
    host = host.strip().rstrip("/") or "127.0.0.1"
    if "://" not in host:
        parts = urlsplit("http://" + host)
        netloc = parts.netloc if parts.port is not None else f"{parts.netloc}:{DEFAULT_PORT}"
        return f"http://{netloc}{parts.path}".rstrip("/")
    return host


class OllamaEngine:
    """An :class:`~jarvis.domain.ports.InferencePort` over Ollama's native API."""

    def __init__(
        self,
        host: str = "http://localhost:11434",
        *,
        timeout: float = 120.0,
        max_retries: int = 2,
        num_ctx: int | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        wire: EngineTransport = "httptools",
        backoff: float = 0.5,
        backoff_cap: float = 8.0,
    ) -> None:
        self._num_ctx = num_ctx
        self._http = EngineHttp(
            engine_id="ollama",
            base_url=normalize_host(host),
            start_hint=_START_HINT,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries, backoff=backoff, backoff_cap=backoff_cap),
            transport=transport,
            wire=wire,
        )

    @property
    def engine_id(self) -> str:
        return "ollama"

    @property
    def base_url(self) -> str:
        return self._http.base_url

    # --- requests ------------------------------------------------------------------------

    def chat_body(self, request: InferenceRequest, *, stream: bool) -> JSONObject:
        """The ``POST /api/chat`` body for ``request``."""
        options: JSONObject = {
            "temperature": request.temperature,
            "num_predict": request.max_tokens,
        }
        num_ctx = request.options.get("num_ctx", self._num_ctx)
        if num_ctx is not None:
            options["num_ctx"] = num_ctx
        for key, value in request.options.items():
            if key in OLLAMA_OPTION_KEYS:
                options[key] = value
        think = request.options.get("think", False)
        body: JSONObject = {
            "model": request.model,
            "messages": [_message(message) for message in request.messages],
            "stream": stream,
            "options": options,
            "think": think,
        }
        keep_alive = request.options.get("keep_alive")
        if keep_alive is not None:
            body["keep_alive"] = keep_alive
        if request.tools and request.tool_choice != "none":
            body["tools"] = tools_to_openai(request.tools)
        if request.response_format is not None:
            schema = request.response_format.schema
            body["format"] = (
                schema
                if request.response_format.type == "json_schema" and schema is not None
                else "json"
            )
        return body

    async def _post_stream(self, request: InferenceRequest, deadline: float) -> Streamed:
        body = self.chat_body(request, stream=True)
        try:
            return await self._http.open("POST", "/api/chat", json=body, deadline=deadline)
        except EngineStatusError as exc:
            raise await self._error(exc.status, exc.body, exc.url, request) from None

    async def _post_whole(self, request: InferenceRequest, bounds: ReplyBounds) -> Reply:
        body = self.chat_body(request, stream=False)
        try:
            return await self._http.request(
                "POST", "/api/chat", json=body, max_bytes=bounds.max_bytes
            )
        except EngineStatusError as exc:
            raise await self._error(exc.status, exc.body, exc.url, request) from None

    async def _error(
        self, status: int, body: str, url: str, request: InferenceRequest
    ) -> InferenceError:
        message = error_message(body)
        lowered = message.lower()
        if "does not support tools" in lowered:
            return ToolsNotSupportedError(
                f"The Ollama model '{request.model}' does not support tools: {message}",
                engine="ollama",
                url=url,
                hint="Pick a model with tool support (`ollama list`; tools are listed under "
                "capabilities by `ollama show <model>`), or an agent without tools.",
            )
        if is_context_overflow(message):
            return ContextTooLongError(
                f"The conversation does not fit the context window of '{request.model}': {message}",
                engine="ollama",
                url=url,
                hint="Shorten the conversation or raise num_ctx ([engine.ollama] num_ctx).",
            )
        if mentions_missing_model(message) or (status == 404 and "model" in lowered):
            return await model_not_found(self, request.model, url)
        if status == 404:
            return InferenceError(
                f"There is no Ollama API at {url} (HTTP 404).",
                engine="ollama",
                url=url,
                hint="Check the Ollama host: it is the server root (http://localhost:11434), "
                "without /api or /v1.",
            )
        return default_status_error("ollama", status, body, url)

    # --- the port ------------------------------------------------------------------------

    async def generate(self, request: InferenceRequest) -> Completion:
        bounds = ReplyBounds.for_tokens(request.max_tokens)
        reply = await self._post_whole(request, bounds)
        url = reply.url
        try:
            data = as_object(loads(reply.body))
            why = ""
        except ValueError as exc:
            data, why = None, f" ({exc})"
        if data is None:
            raise self._http.protocol_error(
                url, f"a body that is not a JSON object{why}: {masked_prefix(reply.text, 200)!r}"
            )
        if get_str(data, "error"):
            raise await self._error(reply.status, reply.text, url, request)
        message = get_object(data, "message")
        if message is None:
            raise self._http.protocol_error(url, "a chat answer without a message")
        calls = _tool_calls(message, start=0)
        content = get_str(message, "content") or ""
        try:
            bounds.check_text(_generated_chars(message), len(calls))
        except ReplyTooLarge as exc:
            raise self._http.protocol_error(url, str(exc)) from None
        return Completion(
            content=content,
            tool_calls=calls,
            finish_reason=_finish_reason(get_str(data, "done_reason"), bool(calls)),
            usage=_usage(data, bounds) or Usage(),
            model=get_str(data, "model") or request.model,
        )

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        deadline = self._http.deadline()
        bounds = ReplyBounds.for_tokens(request.max_tokens)
        response = await self._post_stream(request, deadline)
        url = str(response.url)
        model = request.model
        calls: list[ToolCall] = []
        lines = self._http.lines(response, deadline=deadline, max_bytes=bounds.max_bytes)
        meter = ReplyMeter(bounds)
        final: StreamChunk | None = None
        reusable = False
        generated = 0
        try:
            async for line in lines:
                if not line.strip():
                    continue
                try:
                    data = as_object(loads(line))
                    why = ""
                except ValueError as exc:
                    data, why = None, f" ({exc})"
                if data is None:
                    raise self._http.protocol_error(
                        url,
                        f"a stream line that is not a JSON object{why}: "
                        f"{masked_prefix(line, 200)!r}",
                    )
                if get_str(data, "error"):
                    raise await self._error(response.status_code, line, url, request)
                model = get_str(data, "model") or model
                message = get_object(data, "message") or {}
                if _generated_chars(message) or get_list(message, "tool_calls"):
                    generated += 1
                    if generated > request.max_tokens:
                        # past max_tokens (one line per token at most): stop reading; the
                        # connection is closed below, which stops the generation
                        final = StreamChunk(
                            tool_calls=tuple(calls), finish_reason="length", model=model
                        )
                        break
                new_calls = _tool_calls(message, start=len(calls))
                calls.extend(new_calls)
                try:
                    meter.event(_generated_chars(message))
                    for _ in new_calls:
                        meter.call()
                except ReplyTooLarge as exc:
                    raise self._http.protocol_error(url, str(exc)) from None
                content = get_str(message, "content") or ""
                if content:
                    yield StreamChunk(content=content, model=model)
                if data.get("done") is True:
                    final = StreamChunk(
                        tool_calls=tuple(calls),
                        finish_reason=_finish_reason(get_str(data, "done_reason"), bool(calls)),
                        usage=_usage(data, bounds),
                        model=model,
                    )
                    reusable = await self._http.drain(lines)
                    break
        finally:
            await lines.aclose()
            await self._http.release(response, reusable=reusable)
        if final is None:
            raise EngineProtocolError(
                f"The Ollama engine at {url} ended the stream without a final (done) line.",
                engine="ollama",
                url=url,
            )
        yield final

    async def list_models(self) -> list[str]:
        return await self._http.model_names("/api/tags", "models", "name", "model")

    async def health(self) -> bool:
        return await self._http.probe("/api/tags", timeout=HEALTH_TIMEOUT)

    async def aclose(self) -> None:
        await self._http.aclose()


def _message(message: Message) -> JSONObject:
    if message.role is Role.TOOL:
        wire: JSONObject = {"role": "tool", "content": message.content}
        if message.name:
            wire["tool_name"] = message.name
        if message.tool_call_id:
            wire["tool_call_id"] = message.tool_call_id
        return wire
    wire = {"role": message.role.value, "content": message.content}
    if message.role is Role.ASSISTANT and message.tool_calls:
        calls: list[JSONValue] = []
        for index, call in enumerate(message.tool_calls):
            calls.append(
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"index": index, "name": call.name, "arguments": call.arguments},
                }
            )
        wire["tool_calls"] = calls
    return wire


def _tool_calls(message: Mapping[str, object], *, start: int) -> tuple[ToolCall, ...]:
    calls: list[ToolCall] = []
    for offset, raw in enumerate(get_list(message, "tool_calls")):
        entry = as_object(raw)
        if entry is None:
            continue
        function = get_object(entry, "function") or {}
        call_id = get_str(entry, "id") or f"call_{start + offset}"
        name = get_str(function, "name") or ""
        arguments = function.get("arguments")
        as_dict = as_json_object(arguments)
        if as_dict is not None:
            calls.append(ToolCall(id=call_id, name=name, arguments=as_dict))
        else:
            text = arguments if isinstance(arguments, str) else None
            calls.append(ToolCall.from_json_text(id=call_id, name=name, text=text))
    return tuple(calls)


def _finish_reason(done_reason: str | None, has_tool_calls: bool) -> FinishReason:
    if done_reason == "length":
        return "length"
    if has_tool_calls:
        return "tool_calls"
    return "stop"


def _generated_chars(message: Mapping[str, object]) -> int:
    """Characters of generated text in one message (content, thinking, tool-call names and
    string arguments), for the bounds of the reply."""
    chars = len(get_str(message, "content") or "") + len(get_str(message, "thinking") or "")
    for raw in get_list(message, "tool_calls"):
        function = get_object(as_object(raw) or {}, "function") or {}
        arguments = function.get("arguments")
        chars += len(get_str(function, "name") or "")
        chars += len(arguments) if isinstance(arguments, str) else 0
    return chars


def _usage(data: Mapping[str, object], bounds: ReplyBounds) -> Usage | None:
    """``prompt_eval_count`` / ``eval_count``, or ``None`` when either cannot be true."""
    raw_prompt, raw_eval = data.get("prompt_eval_count", 0), data.get("eval_count", 0)
    prompt = trusted_count(raw_prompt)
    completion = trusted_count(raw_eval, bounds.max_events)
    if prompt is None or completion is None:
        return None
    return Usage(prompt_tokens=prompt, completion_tokens=completion)
