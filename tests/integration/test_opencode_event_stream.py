"""The server's one ``/event`` stream, shared by the runs on it, for real (the pinned
``opencode serve`` on the scripted engine): two runs at once each stream only their own
text, a stream dropped mid-run neither hangs the run nor loses its answer, a run given up
half-way leaves no reader behind, and the next run reopens the stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from contracts.external_runtime_contract import collect, done, request_factory
from jarvis.adapters.opencode_server import OpenCodeRuntime
from jarvis.domain.external_runtime import ExternalEvent, ExternalRunRequest, ExternalTextDelta
from tests.support.opencode import opencode_runtime, require_opencode
from tests.support.own_temp import own_temp_dir
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine

ANSWER = "The capital of France is Paris."
HELD = "Held answer from the first run."


@pytest.fixture(autouse=True)
def _own_temp_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from own_temp_dir(monkeypatch)


@pytest.fixture
def engine() -> Iterator[ScriptedEngine]:
    with ScriptedEngine([Reply(ANSWER)]) as scripted:
        yield scripted


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[OpenCodeRuntime]:
    async with opencode_runtime(tmp_path) as opened:
        yield opened


@pytest.fixture
def request_for(engine: ScriptedEngine) -> Callable[..., ExternalRunRequest]:
    return request_factory(model=MODEL, base_url=engine.url, timeout=120)


def streamed(events: list[ExternalEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, ExternalTextDelta))


async def held_until_first_word(
    runtime: OpenCodeRuntime, engine: ScriptedEngine, request: ExternalRunRequest
) -> asyncio.Task[list[ExternalEvent]]:
    """A run whose answer stops after its first word until ``engine.release()``."""
    engine.script = [Reply(HELD, hold=True), Reply(ANSWER)]
    task = asyncio.create_task(collect(runtime, request))
    assert await asyncio.to_thread(engine.first_word_sent.wait, 120)
    return task


async def test_two_runs_at_once_on_one_server_each_stream_only_their_own_text(
    runtime: OpenCodeRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    workspace = str(tmp_path)
    held = await held_until_first_word(runtime, engine, request_for("first", workspace))
    try:
        server = runtime.server
        other = await collect(runtime, request_for("second", workspace, new_session=True))
    finally:
        engine.release()
    first = await held
    assert runtime.server is server  # one server, one stream for both
    connection = runtime.connection
    assert connection is not None
    assert connection.events(workspace).subscribers == 0
    assert streamed(other) == ANSWER
    assert done(other).content == ANSWER
    assert streamed(first) == HELD
    assert done(first).content == HELD
    assert done(first).session_id != done(other).session_id


async def test_a_stream_dropped_mid_run_still_finishes_the_run_with_its_answer(
    runtime: OpenCodeRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    workspace = str(tmp_path)
    held = await held_until_first_word(runtime, engine, request_for("first", workspace))
    connection = runtime.connection
    assert connection is not None
    stream = connection.events(workspace)
    try:
        assert stream.subscribers == 1  # subscribed before its prompt was sent
        await stream.aclose()  # the stream ends under the run
        assert not stream.is_open()
    finally:
        engine.release()
    result = done(await asyncio.wait_for(held, 120))
    assert result.content == HELD  # read back from the session: nothing lost
    assert result.usage.completion_tokens > 0
    again = await collect(runtime, request_for("again", workspace))
    assert stream.is_open()  # reopened by the next run
    assert streamed(again) == ANSWER
    assert done(again).session_id == result.session_id


async def test_a_run_given_up_half_way_leaves_no_reader_and_the_next_run_streams(
    runtime: OpenCodeRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    workspace = str(tmp_path)
    engine.script = [Reply(HELD, hold=True), Reply(ANSWER)]
    run = runtime.run(request_for("first", workspace))
    assert isinstance(run, AsyncGenerator)
    try:
        async for event in run:
            if isinstance(event, ExternalTextDelta):
                break  # the first word: the rest is held
        await run.aclose()
    finally:
        engine.release()
    connection = runtime.connection
    assert connection is not None
    assert connection.events(workspace).subscribers == 0
    again = await collect(runtime, request_for("second", workspace, new_session=True))
    assert streamed(again) == ANSWER
    assert done(again).content == ANSWER


def test_a_runtime_asked_again_on_another_event_loop_makes_its_client_again(
    engine: ScriptedEngine, request_for: Callable[..., ExternalRunRequest], tmp_path: Path
) -> None:
    """An application that calls ``asyncio.run`` once per question with one runtime: the
    server is kept, its client and event stream (bound to the first loop, closed since)
    are made again on the second, whose run streams and answers whole."""
    engine.script = [Reply(ANSWER), Reply(ANSWER)]
    runtime = OpenCodeRuntime(data_dir=tmp_path / "data", binary=require_opencode())
    request = request_for("What is the capital of France?", str(tmp_path))

    async def first() -> list[ExternalEvent]:
        return await collect(runtime, request)

    async def second() -> tuple[list[ExternalEvent], object]:
        try:
            return await collect(runtime, request), runtime.server
        finally:
            await runtime.aclose()

    events = asyncio.run(first())
    server = runtime.server
    again, server_again = asyncio.run(second())
    assert done(events).content == done(again).content == ANSWER
    assert streamed(again) == ANSWER
    assert server_again is server  # the same opencode process
