"""Every engine reply is bounded: in time, in size, by what was asked, and in what is believed.

Each HTTP adapter (OpenAI-compatible, vLLM, Ollama) is run against a real loopback server
that misbehaves on purpose (``tests/support/hostile_engine.py``): endless token streams at a
pace no per-read timeout notices, floods, endless bodies, absurd usage, deep nesting, bad
text. The endless answers go on until the client hangs up, so each test waits for an
outcome, never for a clock; ``GUARD`` only turns a client that never ends (the old
behaviour) into a failure instead of a hung suite.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Literal

import pytest

from jarvis.adapters.inference._bounds import ReplyBounds
from jarvis.adapters.inference._wire import EngineTransport
from jarvis.adapters.inference.ollama import OllamaEngine
from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine
from jarvis.adapters.inference.probe import ollama_reachable
from jarvis.adapters.inference.vllm import VllmEngine
from jarvis.domain.errors import EngineProtocolError, EngineTimeoutError
from jarvis.domain.llm.completion import StreamChunk
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message
from jarvis.domain.ports import InferencePort
from jarvis.domain.tools.specs import ToolSpec
from tests.support.hostile_engine import HUGE_BODY, HostileEngine

pytestmark = pytest.mark.integration

GUARD = 60.0
Kind = Literal["openai", "vllm", "ollama"]
KINDS: tuple[Kind, ...] = ("openai", "vllm", "ollama")
CLEAN_TEXT = "café \ufffd\ufffd ok \ufffd end"


@pytest.fixture
async def server() -> AsyncIterator[HostileEngine]:
    async with HostileEngine() as running:
        yield running


def make(
    kind: Kind,
    server: HostileEngine,
    wire: EngineTransport,
    *,
    timeout: float = GUARD,
    honours_max_tokens: bool | None = None,
) -> InferencePort:
    if kind == "ollama":
        return OllamaEngine(server.root_url, timeout=timeout, max_retries=0, wire=wire)
    if kind == "vllm":
        return VllmEngine(
            server.openai_url,
            timeout=timeout,
            max_retries=0,
            wire=wire,
            honours_max_tokens=honours_max_tokens,
        )
    return OpenAICompatibleEngine(
        server.openai_url,
        timeout=timeout,
        max_retries=0,
        wire=wire,
        honours_max_tokens=honours_max_tokens,
    )


def ask(model: str, *, max_tokens: int = 16) -> InferenceRequest:
    return InferenceRequest(
        messages=(Message.user("Tell me everything."),), model=model, max_tokens=max_tokens
    )


async def collect(engine: InferencePort, request: InferenceRequest) -> list[StreamChunk]:
    async with asyncio.timeout(GUARD):
        return [chunk async for chunk in engine.stream(request)]


async def whole(engine: InferencePort, request: InferenceRequest) -> str:
    async with asyncio.timeout(GUARD):
        return (await engine.generate(request)).content


# --- time: the engine timeout bounds the whole request, streams included ----------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("model", ["endless-tokens", "endless-pings"])
async def test_an_endless_slow_stream_ends_at_the_request_timeout(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind, model: str
) -> None:
    # a token (or a ping) every 50 ms: no read ever waits long, the stream never ends
    engine = make(kind, server, engine_wire, timeout=1.0)
    loop = asyncio.get_running_loop()
    try:
        started = loop.time()
        with pytest.raises(EngineTimeoutError, match=r"within 1 s .*as a whole"):
            await collect(engine, ask(model, max_tokens=100_000))
        assert loop.time() - started < GUARD / 2
    finally:
        await engine.aclose()
    await server.wait_finished()  # the client hung up: the server's loop has ended


# --- size and length: bounded by what was asked and by a byte cap ----------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_a_flood_of_content_far_beyond_max_tokens_is_a_protocol_error(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind
) -> None:
    engine = make(kind, server, engine_wire)
    received: list[str] = []

    async def read() -> None:
        async with asyncio.timeout(GUARD):
            async for chunk in engine.stream(ask("flood", max_tokens=16)):
                received.append(chunk.content)

    try:
        with pytest.raises(EngineProtocolError, match="max_tokens allows"):
            await read()
    finally:
        await engine.aclose()
    assert len("".join(received)) <= ReplyBounds.for_tokens(16).max_chars
    await server.wait_finished()


@pytest.mark.parametrize("kind", KINDS)
async def test_endless_events_without_content_are_a_protocol_error(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind
) -> None:
    engine = make(kind, server, engine_wire)
    try:
        with pytest.raises(EngineProtocolError, match="stream events"):
            await collect(engine, ask("empty-events", max_tokens=16))
    finally:
        await engine.aclose()
    await server.wait_finished()


@pytest.mark.parametrize("kind", KINDS)
async def test_an_endless_stream_of_filler_is_cut_at_the_byte_cap(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind
) -> None:
    engine = make(kind, server, engine_wire)
    try:
        with pytest.raises(EngineProtocolError, match="stream larger than"):
            await collect(engine, ask("comments", max_tokens=16))
    finally:
        await engine.aclose()
    await server.wait_finished()
    assert server.sent < 4 * ReplyBounds.for_tokens(16).max_bytes


@pytest.mark.parametrize("kind", KINDS)
async def test_a_huge_body_is_cut_at_the_byte_cap(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind
) -> None:
    engine = make(kind, server, engine_wire)
    try:
        with pytest.raises(EngineProtocolError, match="body larger than"):
            await whole(engine, ask("huge-body", max_tokens=16))
    finally:
        await engine.aclose()
    await server.wait_finished()
    assert server.sent < HUGE_BODY / 2  # the client stopped reading, long before the end


@pytest.mark.parametrize("kind", KINDS)
async def test_a_whole_answer_far_beyond_max_tokens_is_a_protocol_error(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind
) -> None:
    engine = make(kind, server, engine_wire)
    try:
        with pytest.raises(EngineProtocolError, match="max_tokens allows"):
            await whole(engine, ask("long-content", max_tokens=8))
        # the same answer is fine when it was asked for
        assert len(await whole(engine, ask("long-content", max_tokens=4096))) == 200_000
    finally:
        await engine.aclose()


@pytest.mark.parametrize("kind", ["openai", "vllm"])
async def test_a_whole_tool_turn_of_a_server_said_to_honour_max_tokens_keeps_its_bounds(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind
) -> None:
    """A tool-using turn asked for whole (the server is said to stop at ``max_tokens``)
    is bounded all the same: a body past the byte cap and an answer past ``max_tokens``
    are protocol errors."""
    tool = ToolSpec(name="search", description="Search.", parameters={"type": "object"})
    engine = make(kind, server, engine_wire, honours_max_tokens=True)
    try:
        with pytest.raises(EngineProtocolError, match="body larger than"):
            await whole(engine, replace(ask("huge-body", max_tokens=16), tools=(tool,)))
        with pytest.raises(EngineProtocolError, match="max_tokens allows"):
            await whole(engine, replace(ask("long-content", max_tokens=8), tools=(tool,)))
    finally:
        await engine.aclose()
    await server.wait_finished()
    assert server.sent < HUGE_BODY / 2


@pytest.mark.parametrize("kind", KINDS)
async def test_a_compressed_bomb_is_refused(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind
) -> None:
    engine = make(kind, server, engine_wire)
    try:
        with pytest.raises(EngineProtocolError, match="compressed"):
            await whole(engine, ask("gzip-bomb"))
    finally:
        await engine.aclose()
    assert all(r.get("model") == "gzip-bomb" for r in server.requests)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_health_check_reads_no_endless_body(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind
) -> None:
    engine = make(kind, server, engine_wire)
    try:
        async with asyncio.timeout(GUARD):
            assert await engine.health()  # the status says it; the body is never read
    finally:
        await engine.aclose()
    await server.wait_finished()


@pytest.mark.parametrize("kind", KINDS)
async def test_an_endless_model_list_is_cut_at_the_byte_cap(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind
) -> None:
    engine = make(kind, server, engine_wire)
    try:
        with pytest.raises(EngineProtocolError, match="body larger than"):
            async with asyncio.timeout(GUARD):
                await engine.list_models()
    finally:
        await engine.aclose()
    await server.wait_finished()


@pytest.mark.parametrize("drip", [False, True])
async def test_the_ollama_probe_gives_up_on_an_endless_or_dripping_answer(
    server: HostileEngine, drip: bool
) -> None:
    server.version_drip = drip
    async with asyncio.timeout(GUARD):
        assert not await ollama_reachable(server.root_url, timeout=0.5)
    await server.wait_finished()


# --- what is believed: nesting, usage, text ---------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("streamed", [False, True])
async def test_deeply_nested_json_is_a_protocol_error(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind, streamed: bool
) -> None:
    engine = make(kind, server, engine_wire)

    async def read() -> object:
        if streamed:
            return await collect(engine, ask("nested"))
        return await whole(engine, ask("nested"))

    try:
        with pytest.raises(EngineProtocolError, match="nested deeper"):
            await read()
    finally:
        await engine.aclose()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_quoted_body_keeps_no_password_its_cut_falls_in(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind, streamed: bool
) -> None:
    engine = make(kind, server, engine_wire)
    read = collect if streamed else whole
    try:
        with pytest.raises(EngineProtocolError) as raised:
            await read(engine, ask("echo-secret"))
    finally:
        await engine.aclose()
    message = str(raised.value)
    assert "xxxx" in message  # the body is quoted
    assert "Hunter" not in message
    assert "admin" not in message


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("figures", ["negative", "huge", "float", "text"])
async def test_usage_figures_that_cannot_be_true_are_dropped(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind, figures: str
) -> None:
    engine = make(kind, server, engine_wire)
    try:
        async with asyncio.timeout(GUARD):
            completion = await engine.generate(ask(f"bad-usage-{figures}"))
        chunks = await collect(engine, ask(f"bad-usage-{figures}"))
    finally:
        await engine.aclose()
    assert completion.content == "hello"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (0, 0)
    assert "".join(c.content for c in chunks) == "hello"
    assert chunks[-1].finish_reason == "stop"
    assert chunks[-1].usage is None


@pytest.mark.parametrize("kind", KINDS)
async def test_honest_usage_figures_are_kept(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind
) -> None:
    engine = make(kind, server, engine_wire)
    try:
        async with asyncio.timeout(GUARD):
            completion = await engine.generate(ask("bad-usage-none"))
        chunks = await collect(engine, ask("bad-usage-none"))
    finally:
        await engine.aclose()
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (3, 1)
    final = chunks[-1].usage
    assert final is not None
    assert (final.prompt_tokens, final.completion_tokens) == (3, 1)


@pytest.mark.parametrize("kind", KINDS)
async def test_invalid_utf8_and_lone_surrogates_do_not_cost_the_answer(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind
) -> None:
    engine = make(kind, server, engine_wire)
    try:
        content = await whole(engine, ask("bad-text"))
        streamed = "".join(c.content for c in await collect(engine, ask("bad-text")))
    finally:
        await engine.aclose()
    assert content == CLEAN_TEXT
    assert streamed == CLEAN_TEXT
    content.encode("utf-8")  # printable: nothing left that UTF-8 cannot encode


# --- through the command line -------------------------------------------------------------


async def run_cli(home: Path, *args: str) -> tuple[int, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"OLLAMA_HOST", "VLLM_HOST", "OPENAI_BASE_URL", "OPENAI_API_KEY"}
    }
    env["OPENJARVIS_HOME"] = str(home)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "jarvis",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        async with asyncio.timeout(GUARD * 2):
            _, err = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, err.decode("utf-8", "replace")


@pytest.mark.parametrize("engine", ["openai", "ollama"])
async def test_the_cli_reports_deeply_nested_json_as_an_engine_error(
    server: HostileEngine, tmp_path: Path, engine: str
) -> None:
    where = server.openai_url if engine == "openai" else server.root_url
    code, err = await run_cli(
        tmp_path, "ask", "--engine", engine, "--base-url", where, "-m", "nested", "Hi"
    )
    assert code == 5, err
    assert "nested deeper" in err
    assert "Traceback" not in err


async def test_the_cli_ends_an_endless_stream_at_the_configured_timeout(
    server: HostileEngine, tmp_path: Path
) -> None:
    (tmp_path / "config.toml").write_text("[engine]\ntimeout = 2\n", encoding="utf-8")
    code, err = await run_cli(
        tmp_path, "ask", "--base-url", server.openai_url, "-m", "endless-tokens", "Hi"
    )
    assert code == 5, err
    assert "within 2 s" in err


# --- what is sent: text the model gave back earlier never breaks the next request --------


@pytest.mark.parametrize("kind", KINDS)
async def test_a_lone_surrogate_in_the_conversation_does_not_break_the_request(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind
) -> None:
    # a model may answer with a lone surrogate escape; the next turn carries it back
    request = InferenceRequest(
        messages=(Message.user("Tell me everything."), Message.assistant("half \ud83d pair")),
        model="plain",
        max_tokens=16,
    )
    assert await whole(make(kind, server, engine_wire), request) == "hello"


# --- max_tokens: held from jarvis's side, whatever the engine does with it ---------------


@pytest.mark.parametrize(
    ("kind", "how"),
    # (Ollama honours num_predict with tools: its whole answers are not made as streams)
    [(kind, "stream") for kind in KINDS] + [("openai", "whole"), ("vllm", "whole")],
)
async def test_a_reply_past_max_tokens_is_cut_there_and_the_engine_stopped(
    engine_wire: EngineTransport, server: HostileEngine, kind: Kind, how: str
) -> None:
    """An engine that ignores ``max_tokens`` (llama-cpp-python's server does when tools
    are offered) sends tokens forever: the reply ends after ``max_tokens`` of them with
    the finish reason ``length``, and the connection is closed, so the engine stops.
    (vLLM honours max_tokens and is asked whole by default: here it is told otherwise.)"""
    engine = make(kind, server, engine_wire, honours_max_tokens=False)
    request = ask("endless-tokens", max_tokens=5)
    try:
        if how == "stream":
            chunks = await collect(engine, request)
            content = "".join(chunk.content for chunk in chunks)
            finish = chunks[-1].finish_reason
        else:  # a whole answer with tools is read as a stream, so it can be cut too
            tool = ToolSpec(name="search", description="Search.", parameters={"type": "object"})
            async with asyncio.timeout(GUARD):
                completion = await engine.generate(replace(request, tools=(tool,)))
            content, finish = completion.content, completion.finish_reason
    finally:
        await engine.aclose()
    assert content == "tok " * 5
    assert finish == "length"
    async with asyncio.timeout(GUARD):
        await server.wait_finished()  # the client hung up: the endless answer has ended
