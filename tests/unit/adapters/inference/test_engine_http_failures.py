"""What no real server can be made to do on demand: 503s, 429s, dropped connections, garbage.

``httpx.MockTransport`` stands in for the network here and only here; everything else about
the engines is tested against real servers in ``tests/integration``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from jarvis.adapters.inference._retry import RetryPolicy, parse_retry_after
from jarvis.adapters.inference.ollama import OllamaEngine
from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine
from jarvis.adapters.inference.vllm import VllmEngine
from jarvis.domain.errors import (
    ContextTooLongError,
    EngineProtocolError,
    EngineTimeoutError,
    EngineUnavailableError,
    InferenceError,
    ModelNotFoundError,
    RateLimitedError,
    ToolsNotSupportedError,
)
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message
from jarvis.domain.tools.specs import ToolSpec

Handler = Callable[[httpx.Request], httpx.Response]
BASE = "http://engine.test/v1"
REQUEST = InferenceRequest(messages=(Message.user("hi"),), model="m", max_tokens=8)
TOOL = ToolSpec(name="lookup", description="Look something up.")

COMPLETION = {
    "id": "c1",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}


class Recorder:
    """A scripted transport: one handler per request, in order; records every request."""

    def __init__(self, *handlers: Handler) -> None:
        self.handlers = list(handlers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        handler = self.handlers.pop(0) if len(self.handlers) > 1 else self.handlers[0]
        return handler(request)

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def status(code: int, body: object = None, headers: dict[str, str] | None = None) -> Handler:
    return lambda _: httpx.Response(code, json=body if body is not None else {}, headers=headers)


def ok(body: object = COMPLETION) -> Handler:
    return status(200, body)


def raises(error: Exception) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        raise error

    return handler


def openai(recorder: Recorder, **kwargs: object) -> OpenAICompatibleEngine:
    return OpenAICompatibleEngine(
        BASE,
        transport=recorder.transport,
        backoff=0.001,
        **kwargs,  # type: ignore[arg-type]
    )


# --- retries -------------------------------------------------------------------------------


async def test_a_503_is_retried_with_backoff_then_succeeds() -> None:
    recorder = Recorder(status(503, {"error": "loading"}), status(503), ok())
    completion = await openai(recorder).generate(REQUEST)
    assert completion.content == "hello"
    assert len(recorder.requests) == 3


async def test_503_after_the_last_retry_is_engine_unavailable() -> None:
    recorder = Recorder(status(503, {"error": {"message": "overloaded"}}))
    with pytest.raises(EngineUnavailableError, match="overloaded"):
        await openai(recorder, max_retries=2).generate(REQUEST)
    assert len(recorder.requests) == 3


async def test_a_429_waits_as_long_as_retry_after_says() -> None:
    recorder = Recorder(status(429, headers={"Retry-After": "0.2"}), ok())
    started = time.monotonic()
    completion = await openai(recorder).generate(REQUEST)
    assert time.monotonic() - started >= 0.2
    assert completion.content == "hello"


async def test_retry_after_is_capped() -> None:
    recorder = Recorder(status(429, headers={"Retry-After": "3600"}), ok())
    started = time.monotonic()
    await openai(recorder, backoff_cap=0.05).generate(REQUEST)
    assert time.monotonic() - started < 60  # not the hour asked for (a margin for load)


async def test_a_retry_whose_wait_would_pass_the_request_deadline_is_not_made() -> None:
    # the engine timeout bounds the whole request, its retries and their waits included
    recorder = Recorder(status(429, {"error": {"message": "slow down"}}, {"Retry-After": "30"}))
    engine = openai(recorder, timeout=1.0, backoff_cap=60.0, max_retries=5)
    async with asyncio.timeout(10):
        with pytest.raises(RateLimitedError, match="slow down"):
            await engine.generate(REQUEST)
    assert len(recorder.requests) == 1


async def test_429_after_the_last_retry_is_rate_limited() -> None:
    recorder = Recorder(status(429, {"error": {"message": "slow down"}}))
    with pytest.raises(RateLimitedError, match="slow down"):
        await openai(recorder, max_retries=1).generate(REQUEST)
    assert len(recorder.requests) == 2


async def test_connect_errors_are_retried_then_engine_unavailable_with_a_hint() -> None:
    recorder = Recorder(raises(httpx.ConnectError("refused")))
    with pytest.raises(EngineUnavailableError) as raised:
        await openai(recorder, max_retries=2).generate(REQUEST)
    assert len(recorder.requests) == 3
    assert raised.value.url == BASE + "/chat/completions"
    assert "openai" in raised.value.message
    assert raised.value.hint


async def test_a_connect_error_then_success_is_invisible() -> None:
    recorder = Recorder(raises(httpx.ConnectError("refused")), ok())
    assert (await openai(recorder).generate(REQUEST)).content == "hello"


async def test_a_read_timeout_is_engine_timeout_without_retry() -> None:
    recorder = Recorder(raises(httpx.ReadTimeout("slow")))
    with pytest.raises(EngineTimeoutError, match="did not answer within 5 s"):
        await openai(recorder, timeout=5.0).generate(REQUEST)
    assert len(recorder.requests) == 1


BROKEN_CONNECTIONS = [
    httpx.ReadError("connection reset by peer"),
    httpx.WriteError("broken pipe"),
    httpx.RemoteProtocolError("Server disconnected without sending a response."),
]


@pytest.mark.parametrize("error", BROKEN_CONNECTIONS, ids=lambda e: type(e).__name__)
async def test_a_connection_broken_before_any_answer_is_retried_at_once(error: Exception) -> None:
    # the stale keep-alive connection case: no wait, however long the backoff
    recorder = Recorder(raises(error), ok())
    engine = OpenAICompatibleEngine(BASE, transport=recorder.transport, backoff=30.0)
    started = time.monotonic()
    completion = await engine.generate(REQUEST)
    assert time.monotonic() - started < 5
    assert completion.content == "hello"
    assert len(recorder.requests) == 2


MALFORMED_ANSWERS = [
    httpx.RemoteProtocolError("illegal status line: bytearray(b'garbage')"),
    httpx.RemoteProtocolError("Receive buffer too long"),
    httpx.RemoteProtocolError("Received server _SWITCH_UPGRADE event without a pending proposal"),
]


@pytest.mark.parametrize("error", MALFORMED_ANSWERS, ids=["garbage", "oversize", "switch"])
async def test_a_malformed_answer_is_a_protocol_error_and_never_asked_again(
    error: Exception,
) -> None:
    # what httpcore raises for bytes that do not parse: the engine did answer
    recorder = Recorder(raises(error), ok())
    with pytest.raises(EngineProtocolError, match="malformed HTTP answer"):
        await openai(recorder, max_retries=2).generate(REQUEST)
    assert len(recorder.requests) == 1


async def test_a_malformed_answer_is_quoted_masked_and_cut() -> None:
    line = b"X-Echo: http://admin:Hunter2Secret@db.internal/ " + b"x" * 500
    recorder = Recorder(raises(httpx.RemoteProtocolError(f"illegal header line: {line!r}")))
    with pytest.raises(EngineProtocolError) as raised:
        await openai(recorder).generate(REQUEST)
    assert "Hunter2Secret" not in raised.value.message
    assert "illegal header line" in raised.value.message
    assert len(raised.value.message) < 400


async def test_a_stream_broken_before_its_headers_is_retried_too() -> None:
    done = b"data: [DONE]\n\n"
    final = {"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    recorder = Recorder(
        raises(httpx.ReadError("reset")),
        lambda _: httpx.Response(200, content=sse(delta("Hi"), final) + done),
    )
    chunks = [chunk async for chunk in openai(recorder).stream(REQUEST)]
    assert [chunk.content for chunk in chunks] == ["Hi", ""]
    assert chunks[-1].finish_reason == "stop"
    assert len(recorder.requests) == 2


async def test_broken_connections_again_and_again_back_off_and_count_against_max_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sleeps: list[float] = []
    recorder = Recorder(raises(httpx.ReadError("reset")))
    engine = openai(recorder, max_retries=3)

    real_sleep, this_task = asyncio.sleep, asyncio.current_task()

    async def fake_sleep(seconds: float) -> None:
        if asyncio.current_task() is not this_task:  # a loop an earlier test left running
            await real_sleep(seconds)
            return
        sleeps.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    with pytest.raises(EngineUnavailableError, match="ReadError") as raised:
        await engine.generate(REQUEST)
    monkeypatch.undo()
    assert len(recorder.requests) == 4
    assert len(sleeps) == 2  # the first retry went at once, the two after it waited
    assert raised.value.hint


async def test_without_retries_a_broken_connection_is_engine_unavailable_at_once() -> None:
    recorder = Recorder(raises(httpx.RemoteProtocolError("Server disconnected")), ok())
    with pytest.raises(EngineUnavailableError, match="RemoteProtocolError"):
        await openai(recorder, max_retries=0).generate(REQUEST)
    assert len(recorder.requests) == 1


def test_backoff_grows_exponentially_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(backoff=1.0, backoff_cap=4.0)
    for attempt, ceiling in [(0, 1.0), (1, 2.0), (2, 4.0), (5, 4.0)]:
        delay = policy.delay(attempt)
        assert ceiling / 2 <= delay <= ceiling
    assert policy.delay(0, retry_after=2.5) == 2.5
    assert policy.delay(0, retry_after=99) == 4.0


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


# --- streams that break ----------------------------------------------------------------------


class DroppingStream(httpx.AsyncByteStream):
    """Sends ``parts`` and then loses the connection."""

    def __init__(self, *parts: bytes) -> None:
        self.parts = parts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            yield part
        raise httpx.ReadError("connection reset by peer")


def sse(*events: object) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)


def delta(text: str) -> dict[str, object]:
    return {"model": "m", "choices": [{"index": 0, "delta": {"content": text}}]}


async def test_a_connection_dropped_mid_stream_is_reported_after_the_content() -> None:
    stream = DroppingStream(sse(delta("Hel"), delta("lo")))
    recorder = Recorder(lambda _: httpx.Response(200, stream=stream))
    received: list[str] = []

    async def read() -> None:
        async for chunk in openai(recorder).stream(REQUEST):
            received.append(chunk.content)

    with pytest.raises(EngineUnavailableError, match="dropped mid-stream"):
        await read()
    assert received == ["Hel", "lo"]
    assert len(recorder.requests) == 1  # never replayed behind the reader's back


async def test_an_ollama_stream_dropped_mid_answer_is_reported() -> None:
    line = json.dumps(
        {"model": "m", "message": {"role": "assistant", "content": "Hi"}, "done": False}
    )
    stream = DroppingStream((line + "\n").encode())
    recorder = Recorder(lambda _: httpx.Response(200, stream=stream))
    engine = OllamaEngine("http://ollama.test", transport=recorder.transport)
    with pytest.raises(EngineUnavailableError, match="dropped"):
        async for _ in engine.stream(REQUEST):
            pass


async def test_a_stream_without_finish_or_done_marker_is_a_protocol_error() -> None:
    recorder = Recorder(lambda _: httpx.Response(200, content=sse(delta("Hel"))))
    with pytest.raises(EngineProtocolError, match="before the answer was complete"):
        async for _ in openai(recorder).stream(REQUEST):
            pass


async def test_a_stream_accepted_then_ended_without_any_event_is_asked_for_whole() -> None:
    # what llama.cpp's server does with an automatic tool choice it cannot stream
    def handler(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content)["stream"]:
            return httpx.Response(200, content=b"", headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json=COMPLETION)

    recorder = Recorder(handler)
    chunks = [chunk async for chunk in openai(recorder).stream(REQUEST)]
    assert [chunk.content for chunk in chunks] == ["hello", ""]
    assert chunks[-1].finish_reason == "stop"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 1
    assert [json.loads(r.content)["stream"] for r in recorder.requests] == [True, False]


async def test_a_stream_cut_after_an_event_is_never_asked_again() -> None:
    recorder = Recorder(lambda _: httpx.Response(200, content=sse({"model": "m", "choices": []})))
    with pytest.raises(EngineProtocolError, match="before the answer was complete"):
        async for _ in openai(recorder).stream(REQUEST):
            pass
    assert len(recorder.requests) == 1


# --- garbage --------------------------------------------------------------------------------


async def test_a_body_that_is_not_json_is_a_protocol_error() -> None:
    recorder = Recorder(lambda _: httpx.Response(200, text="<html>proxy login</html>"))
    with pytest.raises(EngineProtocolError, match="not JSON") as raised:
        await openai(recorder).generate(REQUEST)
    assert raised.value.engine == "openai"


@pytest.mark.parametrize(
    "body", [[1, 2], {"choices": []}, {"choices": [{"index": 0}]}, {"choices": ["x"]}]
)
async def test_json_of_the_wrong_shape_is_a_protocol_error(body: object) -> None:
    with pytest.raises(EngineProtocolError):
        await openai(Recorder(ok(body))).generate(REQUEST)


async def test_a_garbage_stream_event_is_a_protocol_error() -> None:
    recorder = Recorder(lambda _: httpx.Response(200, content=b"data: {not json\n\n"))
    with pytest.raises(EngineProtocolError, match="not a JSON object"):
        async for _ in openai(recorder).stream(REQUEST):
            pass


async def test_ollama_garbage_is_a_protocol_error() -> None:
    engine = OllamaEngine(
        "http://ollama.test",
        transport=Recorder(lambda _: httpx.Response(200, text="nope")).transport,
    )
    with pytest.raises(EngineProtocolError):
        await engine.generate(REQUEST)
    with pytest.raises(EngineProtocolError, match="not a JSON object"):
        async for _ in engine.stream(REQUEST):
            pass


async def test_an_ollama_stream_without_a_done_line_is_a_protocol_error() -> None:
    line = json.dumps(
        {"model": "m", "message": {"role": "assistant", "content": "Hi"}, "done": False}
    )
    engine = OllamaEngine(
        "http://ollama.test",
        transport=Recorder(lambda _: httpx.Response(200, text=line + "\n")).transport,
    )
    with pytest.raises(EngineProtocolError, match="without a final"):
        async for _ in engine.stream(REQUEST):
            pass


# --- error bodies a test server cannot be made to produce ------------------------------------


async def test_a_400_about_tools_is_tools_not_supported_and_never_retried_without_them() -> None:
    message = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser'
    recorder = Recorder(status(400, {"object": "error", "message": message}))
    request = InferenceRequest(messages=REQUEST.messages, model="m", tools=(TOOL,))
    with pytest.raises(ToolsNotSupportedError, match="enable-auto-tool-choice"):
        await openai(recorder).generate(request)
    assert len(recorder.requests) == 1


async def test_a_400_about_something_else_with_tools_is_not_blamed_on_tools() -> None:
    recorder = Recorder(status(400, {"error": {"message": "temperature must be <= 2"}}))
    request = InferenceRequest(messages=REQUEST.messages, model="m", tools=(TOOL,))
    with pytest.raises(InferenceError, match="temperature") as raised:
        await openai(recorder).generate(request)
    assert not isinstance(raised.value, ToolsNotSupportedError)


async def test_a_404_model_lists_the_models_the_server_has() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "qwen3"}, {"id": "llama3"}]})
        return httpx.Response(404, json={"message": "The model `m` does not exist."})

    with pytest.raises(ModelNotFoundError) as raised:
        await openai(Recorder(handler)).generate(REQUEST)
    assert raised.value.available == ["qwen3", "llama3"]
    assert "qwen3, llama3" in str(raised.value)


async def test_a_context_overflow_in_a_stream_event_is_context_too_long() -> None:
    event = {"error": {"message": "This model's maximum context length is 4096 tokens."}}
    recorder = Recorder(lambda _: httpx.Response(200, content=sse(event)))
    with pytest.raises(ContextTooLongError):
        async for _ in openai(recorder).stream(REQUEST):
            pass


async def test_vllm_health_asks_the_health_route_at_the_server_root() -> None:
    recorder = Recorder(
        lambda request: httpx.Response(200 if request.url.path == "/health" else 500)
    )
    engine = VllmEngine("http://vllm.test:8000/v1", transport=recorder.transport)
    assert await engine.health() is True
    assert [str(r.url) for r in recorder.requests] == ["http://vllm.test:8000/health"]


async def test_health_never_raises() -> None:
    recorder = Recorder(raises(httpx.ConnectError("refused")))
    assert await openai(recorder).health() is False
    engine = OllamaEngine("http://ollama.test", transport=recorder.transport)
    assert await engine.health() is False
