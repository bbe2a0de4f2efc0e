"""Any server that speaks the OpenAI Chat Completions API (OpenAI, vLLM, llama.cpp, ...).

What this adapter guarantees beyond the wire format:

* tools are never dropped: a 4xx that mentions tools while tools were offered is a
  ``ToolsNotSupportedError`` (no tool-less retry behind the caller's back);
* ``tool_choice="required"`` with one tool is sent as that tool by name (same meaning;
  servers that cannot force "any tool" can force a named one);
* structured output is sent as the standard ``response_format`` ``json_schema``; a server
  that rejects that shape (llama.cpp's server only knows ``json_object`` with an inline
  ``schema``) is asked again, once, in its own dialect, which is then remembered. The
  schema constraint is never dropped;
* a reply is never longer than ``max_tokens`` allows, whatever the server does with it:
  a stream is read up to ``max_tokens`` events carrying text (servers send one per token,
  or fewer) and then closed, which makes the server stop generating, and the answer so far
  ends with the finish reason ``length``. A whole request with tools is made as a stream
  for that reason (llama-cpp-python's server ignores ``max_tokens`` when tools are
  offered), and gathered into one completion, unless the server is known to honour
  ``max_tokens`` (``honours_max_tokens``: vLLM and the OpenAI API do), when it is asked
  for whole, which costs the client less than reading a stream; a whole reply is bounded
  all the same, in bytes, in length and in time;
* streams request ``stream_options.include_usage``; tool-call fragments are assembled and
  delivered, complete, in the one final chunk with the finish reason and the usage. A
  stream that is accepted and then ends without a single event (llama.cpp's server cannot
  stream an automatic tool choice that chose a call) is asked for again: streamed with
  the tool named when a single tool was offered, otherwise without streaming; a stream cut
  after content arrived is an ``EngineProtocolError`` (or ``EngineUnavailableError`` when
  the connection dropped), never a shortened answer;
* every reply is bounded (:mod:`._bounds`): its size, its length against ``max_tokens``
  and the number of its stream events; and every request ends by the engine's
  ``timeout``, counted for the request as a whole (a stream included). Usage figures that
  cannot be true are dropped;
* errors are typed: context overflow (from the error body's wording), unknown model
  (listing ``/models``), rate limiting, unreachable engine (with how to start one),
  timeouts, and answers that are not the documented JSON.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Literal, TypeVar
from urllib.parse import urlsplit

import httpx

from jarvis.adapters.inference._bounds import ReplyBounds, ReplyMeter, ReplyTooLarge
from jarvis.adapters.inference._chunks import collected, completion_chunks
from jarvis.adapters.inference._error_bodies import (
    error_message,
    is_context_overflow,
    mentions_missing_model,
    mentions_tools,
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
from jarvis.adapters.inference._json import as_object, loads
from jarvis.adapters.inference._missing_model import model_not_found
from jarvis.adapters.inference._openai_wire import (
    OPENAI_OPTION_KEYS,
    ChunkReader,
    WireError,
    WireRenderer,
    carries_text,
    chat_body,
    parse_completion,
    response_format_to_openai,
    response_format_with_inline_schema,
)
from jarvis.adapters.inference._sse import sse_data
from jarvis.domain.cut_text import masked_prefix
from jarvis.domain.errors import (
    ContextTooLongError,
    EngineProtocolError,
    InferenceError,
    StructuredOutputNotSupportedError,
    ToolsNotSupportedError,
)
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import Completion, StreamChunk
from jarvis.domain.llm.inference import InferenceRequest

T = TypeVar("T")

StructuredDialect = Literal["json_schema", "inline_schema", "guided_json"]
"""How a JSON schema is asked for: OpenAI's ``response_format`` ``json_schema``; the
``json_object`` + ``schema`` form of llama.cpp's server; vLLM's ``guided_json`` extra."""

HEALTH_TIMEOUT = 2.0

_OPENAI_HINT = (
    "Start an OpenAI-compatible server there (for example "
    "`python -m llama_cpp.server --model <file.gguf>` or `vllm serve <model>`), "
    "or point --base-url / OPENAI_BASE_URL at a running one."
)


class OpenAICompatibleEngine:
    """An :class:`~jarvis.domain.ports.InferencePort` over the OpenAI Chat Completions API.

    ``base_url`` includes the API prefix (``https://api.openai.com/v1``,
    ``http://localhost:8000/v1``). ``backoff`` / ``backoff_cap`` tune the retry waits.
    """

    structured_dialects: tuple[StructuredDialect, ...] = ("json_schema", "inline_schema")
    """Tried in order until the server accepts one; the accepted one is remembered."""

    option_keys: frozenset[str] = OPENAI_OPTION_KEYS

    honours_max_tokens_by_default: bool = False
    """Whether a server of this kind stops at ``max_tokens`` with tools offered, when the
    caller does not say (any OpenAI-compatible server: not known; the OpenAI API: yes)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        engine_id: str = "openai",
        timeout: float = 120.0,
        max_retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
        wire: EngineTransport = "httptools",
        backoff: float = 0.5,
        backoff_cap: float = 8.0,
        start_hint: str = _OPENAI_HINT,
        honours_max_tokens: bool | None = None,
    ) -> None:
        self._engine_id = engine_id
        self._http = EngineHttp(
            engine_id=engine_id,
            base_url=base_url,
            start_hint=start_hint,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries, backoff=backoff, backoff_cap=backoff_cap),
            headers={"Authorization": f"Bearer {api_key}"} if api_key else None,
            transport=transport,
            wire=wire,
        )
        self._dialect: StructuredDialect = self.structured_dialects[0]
        self._renderer = WireRenderer()
        self._whole_tool_turns = (
            _known_to_honour_max_tokens(self._http.base_url, self.honours_max_tokens_by_default)
            if honours_max_tokens is None
            else honours_max_tokens
        )
        """Whether a whole request with tools is sent whole (the server stops at
        ``max_tokens``) rather than as a stream read up to that bound."""

    @property
    def engine_id(self) -> str:
        return self._engine_id

    @property
    def base_url(self) -> str:
        return self._http.base_url

    # --- requests ------------------------------------------------------------------------

    def _dialect_order(self) -> list[StructuredDialect]:
        order = [self._dialect]
        order.extend(d for d in self.structured_dialects if d != self._dialect)
        return order

    def apply_structured_output(
        self, body: JSONObject, request: InferenceRequest, dialect: StructuredDialect
    ) -> None:
        """Add the request's response format to ``body`` in ``dialect``."""
        response_format = request.response_format
        if response_format is None:
            return
        if dialect == "inline_schema":
            body["response_format"] = response_format_with_inline_schema(response_format)
        elif dialect == "guided_json" and response_format.schema is not None:
            body["guided_json"] = response_format.schema
        else:
            body["response_format"] = response_format_to_openai(response_format)

    async def _post_chat(
        self,
        request: InferenceRequest,
        *,
        stream: bool,
        send: Callable[[JSONObject], Awaitable[T]],
    ) -> T:
        """POST the chat request through ``send`` (streaming or whole) and return its result."""
        if request.response_format is None:
            body = chat_body(
                request, stream=stream, option_keys=self.option_keys, renderer=self._renderer
            )
            try:
                return await send(body)
            except EngineStatusError as exc:
                raise await self._status_error(exc, request) from None
        dialects = self._dialect_order()
        for position, dialect in enumerate(dialects):
            body = chat_body(
                request, stream=stream, option_keys=self.option_keys, renderer=self._renderer
            )
            self.apply_structured_output(body, request, dialect)
            try:
                sent = await send(body)
            except EngineStatusError as exc:
                if position + 1 < len(dialects) and _rejects_structured_output(exc):
                    continue
                if _rejects_structured_output(exc):
                    raise StructuredOutputNotSupportedError(
                        "The engine refused every form of structured output it was asked in "
                        f"({', '.join(dialects)}): {error_message(exc.body)}",
                        engine=self._engine_id,
                        url=exc.url,
                    ) from None
                raise await self._status_error(exc, request) from None
            self._dialect = dialect
            return sent
        raise AssertionError("the dialect list is never empty")

    async def _status_error(
        self, exc: EngineStatusError, request: InferenceRequest
    ) -> InferenceError:
        message = error_message(exc.body)
        engine, url = self._engine_id, exc.url
        if is_context_overflow(message) or is_context_overflow(exc.body):
            return ContextTooLongError(
                f"The conversation does not fit the context window of '{request.model}' "
                f"on the {engine} engine: {message}",
                engine=engine,
                url=url,
                hint="Shorten the conversation, lower max_tokens, or raise the server's "
                "context size.",
            )
        if mentions_missing_model(message) or (exc.status == 404 and "model" in message.lower()):
            return await model_not_found(self, request.model, url)
        if exc.status == 404:
            return InferenceError(
                f"The {engine} engine has no chat endpoint at {url} (HTTP 404).",
                engine=engine,
                url=url,
                hint="Check the base URL: OpenAI-compatible servers usually serve under /v1 "
                "(for example http://localhost:8000/v1).",
            )
        if exc.status in (400, 422) and request.tools and mentions_tools(message):
            return ToolsNotSupportedError(
                f"The {engine} engine refused the tools offered to '{request.model}': {message}",
                engine=engine,
                url=url,
                hint="Use a model and server with tool calling enabled (vLLM needs "
                "--enable-auto-tool-choice and --tool-call-parser), or an agent without tools.",
            )
        return default_status_error(engine, exc.status, exc.body, url)

    # --- the port ------------------------------------------------------------------------

    async def generate(self, request: InferenceRequest) -> Completion:
        deadline = self._http.deadline()
        if not request.tools or self._whole_tool_turns:
            return await self._generate(request, deadline)
        # Tools offered: some servers stop honouring max_tokens then (llama-cpp-python's
        # function-calling handler generates to the end of its context), and a whole reply
        # cannot be cut short. Streamed, it can: read up to the bound, then hang up.
        return await collected(self._stream(request, deadline), model=request.model)

    async def _generate(self, request: InferenceRequest, deadline: float) -> Completion:
        bounds = ReplyBounds.for_tokens(request.max_tokens)

        def send(body: JSONObject) -> Awaitable[Reply]:
            return self._http.request(
                "POST",
                "/chat/completions",
                json=body,
                deadline=deadline,
                max_bytes=bounds.max_bytes,
            )

        reply = await self._post_chat(request, stream=False, send=send)
        try:
            data = loads(reply.body)
        except ValueError as exc:
            raise self._http.protocol_error(
                reply.url, f"a body that is not JSON ({exc}): {masked_prefix(reply.text, 200)!r}"
            ) from exc
        body = as_object(data)
        if body is not None and "error" in body and "choices" not in body:
            raise await self._status_error(
                EngineStatusError(reply.status, reply.text, reply.url), request
            )
        try:
            completion = parse_completion(data, model=request.model, bounds=bounds)
        except WireError as exc:
            raise self._http.protocol_error(reply.url, str(exc)) from exc
        return completion

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        async for chunk in self._stream(request, self._http.deadline()):
            yield chunk

    async def _stream(
        self, request: InferenceRequest, deadline: float
    ) -> AsyncIterator[StreamChunk]:
        bounds = ReplyBounds.for_tokens(request.max_tokens)

        def send(body: JSONObject) -> Awaitable[Streamed]:
            return self._http.open("POST", "/chat/completions", json=body, deadline=deadline)

        response = await self._post_chat(request, stream=True, send=send)
        url = str(response.url)
        events = self._http.lines(
            response, deadline=deadline, max_bytes=bounds.max_bytes, split=sse_data
        )
        reader = ChunkReader(request.model, meter=ReplyMeter(bounds))
        received = done = reusable = cut = False
        generated = 0
        try:
            async for data in events:
                if data == "[DONE]" or data.strip() == "[DONE]":
                    done = True
                    reusable = await self._http.drain(events)
                    break
                received = True
                try:
                    chunk = as_object(loads(data))
                    why = ""
                except ValueError as exc:
                    chunk, why = None, f" ({exc})"
                if chunk is None:
                    raise self._http.protocol_error(
                        url,
                        f"a stream event that is not a JSON object{why}: "
                        f"{masked_prefix(data, 200)!r}",
                    )
                if "error" in chunk and "choices" not in chunk:
                    raise await self._status_error(
                        EngineStatusError(response.status_code, data, url), request
                    )
                if carries_text(chunk):
                    generated += 1
                    if generated > request.max_tokens:
                        # past max_tokens (a server that ignores it): stop reading; closing
                        # the connection below makes the server stop generating
                        cut = True
                        break
                try:
                    piece = reader.feed(chunk)
                except ReplyTooLarge as exc:
                    raise self._http.protocol_error(url, str(exc)) from None
                if piece is not None:
                    yield piece
        finally:
            await events.aclose()
            await self._http.release(response, reusable=reusable)
        if cut:
            reader.finish = "length"
            yield reader.final()
            return
        if not received and not done:
            # Accepted, then ended without a single event: llama.cpp's server does that
            # when it cannot stream the answer (an automatic tool choice that chose a call,
            # a prompt longer than its context). Nothing was delivered, so ask once more,
            # under the same deadline: with a single tool, streamed with that tool named
            # (what the server had chosen; a named call streams and honours max_tokens);
            # otherwise whole, where the answer, or the error it was hiding, arrives.
            if len(request.tools) == 1 and request.tool_choice == "auto":
                async for again in self._stream(replace(request, tool_choice="required"), deadline):
                    yield again
                return
            completion = await self._generate(request, deadline)
            for whole in completion_chunks(completion):
                yield whole
            return
        if not done and reader.finish is None:
            raise EngineProtocolError(
                f"The {self._engine_id} engine at {url} ended the stream before the "
                "answer was complete (no finish reason, no [DONE]).",
                engine=self._engine_id,
                url=url,
            )
        yield reader.final()

    async def list_models(self) -> list[str]:
        return await self._http.model_names("/models", "data", "id")

    async def health(self) -> bool:
        return await self._http.probe("/models", timeout=HEALTH_TIMEOUT)

    async def aclose(self) -> None:
        await self._http.aclose()


OPENAI_API_HOSTS = frozenset({"api.openai.com"})
"""Hosts of servers known to stop at ``max_tokens`` whatever else the request asks."""


def _known_to_honour_max_tokens(base_url: str, default: bool) -> bool:
    """Whether the server at ``base_url`` is known to stop at ``max_tokens`` with tools."""
    return default or (urlsplit(base_url).hostname or "") in OPENAI_API_HOSTS


def _rejects_structured_output(exc: EngineStatusError) -> bool:
    """Did the server refuse the shape of the structured-output request (not the prompt)?"""
    if exc.status not in (400, 422, 500):
        return False
    body = exc.body.lower()
    return "response_format" in body or "json_schema" in body or "guided_json" in body
