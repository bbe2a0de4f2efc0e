"""The SDK on in-memory engines: ``from jarvis import Jarvis``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import jarvis
from jarvis.application.ask import Answer
from jarvis.application.tools import function_tool
from jarvis.domain.approvals import ApprovalRequest
from jarvis.domain.errors import ConfigurationError, UnknownAgentError
from jarvis.domain.llm.completion import Completion, ResponseFormat, StreamChunk
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.entrypoints.composition import AskOptions
from jarvis.entrypoints.sdk import Jarvis as SdkJarvis
from jarvis.testing import InMemoryRepl, ScriptedInference


class SlowStream(ScriptedInference):
    """Streams forever, one chunk per 10 ms, until cancelled; records the cancellation."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelled = threading.Event()

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        try:
            while True:
                yield StreamChunk(content="tick ")
                await asyncio.sleep(0.01)
        finally:
            self.cancelled.set()


class Concurrent(ScriptedInference):
    """Holds every request until ``together`` runs are in flight at once, and records the
    peak: concurrency is proven by the runs meeting, not by a stopwatch (run one after
    another, the first would wait here until the bound and fail)."""

    def __init__(self, together: int) -> None:
        super().__init__()
        self.together = together
        self.met = asyncio.Event()
        self.active = 0
        self.peak = 0

    async def generate(self, request: InferenceRequest) -> Completion:
        self.active += 1
        self.peak = max(self.peak, self.active)
        if self.active == self.together:
            self.met.set()
        try:
            await asyncio.wait_for(self.met.wait(), 60)
        finally:
            self.active -= 1
        return await super().generate(request)


class WhereItRuns(ScriptedInference):
    """Records the event loop and the thread every request runs on."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[asyncio.AbstractEventLoop, threading.Thread]] = []

    def _record(self) -> None:
        self.seen.append((asyncio.get_running_loop(), threading.current_thread()))

    async def generate(self, request: InferenceRequest) -> Completion:
        self._record()
        return await super().generate(request)

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        self._record()
        async for chunk in super().stream(request):
            yield chunk


def test_package_exports_the_sdk_lazily() -> None:
    assert jarvis.Jarvis is SdkJarvis
    assert jarvis.Answer is Answer
    assert jarvis.AskOptions is AskOptions
    assert sorted(jarvis.__all__) == [
        "Answer",
        "ApprovalAnswer",
        "ApprovalRequest",
        "AskOptions",
        "FunctionTool",
        "Jarvis",
        "tool",
    ]
    assert jarvis.ApprovalRequest is ApprovalRequest
    assert jarvis.tool is function_tool.tool
    with pytest.raises(AttributeError):
        _ = jarvis.nothing_here


class TestSync:
    def test_ask_returns_the_text(self) -> None:
        engine = ScriptedInference(["Paris."])
        with jarvis.Jarvis(inference=engine) as j:
            assert j.ask("Capital of France?") == "Paris."
        assert engine.requests[0].messages[-1].content == "Capital of France?"

    def test_ask_full_has_the_json_fields(self) -> None:
        with jarvis.Jarvis(inference=ScriptedInference(["Paris."])) as j:
            answer = j.ask_full("q", temperature=0.3, max_tokens=11, system="S")
        assert isinstance(answer, Answer)
        assert (answer.content, answer.turns, answer.stop_reason) == ("Paris.", 1, "final_answer")
        assert answer.engine == "scripted"
        assert set(answer.to_json()) == {
            "content",
            "turns",
            "tool_results",
            "usage",
            "model",
            "engine",
            "stop_reason",
            "metadata",
        }

    def test_options_reach_the_engine(self) -> None:
        engine = ScriptedInference(["ok"])
        with jarvis.Jarvis(inference=engine, model="m0") as j:
            j.ask("q", temperature=0.3, max_tokens=11, system="S")
            j.ask("q", model="m1")
        first, second = engine.requests
        assert (first.model, first.temperature, first.max_tokens) == ("m0", 0.3, 11)
        assert first.messages[0].content == "S"
        assert second.model == "m1"

    def test_ask_stream_yields_pieces(self) -> None:
        with jarvis.Jarvis(inference=ScriptedInference(["one two three"])) as j:
            pieces = list(j.ask_stream("q"))
        assert len(pieces) == 3
        assert "".join(pieces) == "one two three"

    def test_leaving_a_stream_early_cancels_the_run(self) -> None:
        engine = SlowStream()
        with jarvis.Jarvis(inference=engine) as j:
            stream = j.ask_stream("q")
            assert next(stream) == "tick "
            stream.close()
            assert engine.cancelled.wait(5)
            assert j.ask("again") == "OK"  # the instance is still usable afterwards

    def test_one_engine_for_every_call(self) -> None:
        engine = ScriptedInference(["a", "b"])
        j = jarvis.Jarvis(inference=engine)
        assert [j.ask("1"), j.ask("2")] == ["a", "b"]
        j.close()
        assert not engine.closed  # jarvis does not close an engine it did not build

    def test_closed_instance_refuses_work(self) -> None:
        j = jarvis.Jarvis(inference=ScriptedInference())
        j.ask("q")
        j.close()
        j.close()  # idempotent
        with pytest.raises(RuntimeError, match="closed"):
            j.ask("q")

    def test_default_agent_is_simple(self) -> None:
        with jarvis.Jarvis(inference=ScriptedInference(["x"])) as j:
            assert j.ask_full("q").turns == 1

    def test_instance_agent_and_per_call_agent(self) -> None:
        with jarvis.Jarvis(inference=ScriptedInference(), agent="missing") as j:
            with pytest.raises(UnknownAgentError) as info:
                j.ask("q")
            assert "simple" in info.value.known
            assert j.ask("q", agent="simple") == "OK"

    def test_config_default_agent(self, jarvis_home: Path) -> None:
        (jarvis_home / "config.toml").write_text('[agent]\ndefault = "other"\n', encoding="utf-8")
        with jarvis.Jarvis(inference=ScriptedInference()) as j, pytest.raises(UnknownAgentError):
            j.ask("q")

    def test_tools_on_an_agent_that_takes_none(self) -> None:
        with (
            jarvis.Jarvis(inference=ScriptedInference()) as j,
            pytest.raises(ConfigurationError, match="does not take tools"),
        ):
            j.ask("q", tools=["calculator"])

    @pytest.mark.parametrize("temperature", [float("nan"), float("inf")])
    def test_a_temperature_that_is_not_a_number_is_refused(self, temperature: float) -> None:
        """Not sent: no JSON number holds it, and an engine would read a null as its own
        default."""
        engine = ScriptedInference()
        with jarvis.Jarvis(inference=engine) as j:
            with pytest.raises(ConfigurationError, match="not a finite number"):
                j.ask("q", temperature=temperature)
            assert engine.requests == []

    def test_container_override(self) -> None:
        j = jarvis.Jarvis()
        j.container.inference.override(ScriptedInference(["from override"]))
        with j:
            assert j.ask("q") == "from override"

    def test_invalid_config_path(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigurationError, match="not found"):
            jarvis.Jarvis(config_path=tmp_path / "missing.toml")

    def test_sync_call_inside_a_running_loop_works(self) -> None:
        async def main() -> str:
            with jarvis.Jarvis(inference=ScriptedInference(["inside"])) as j:
                return j.ask("q")  # blocks this loop, but runs on the instance's own loop

        assert asyncio.run(main()) == "inside"


class TestAsync:
    async def test_aask_and_aask_full(self) -> None:
        async with jarvis.Jarvis(inference=ScriptedInference(["a", "b"])) as j:
            assert await j.aask("q") == "a"
            answer = await j.aask_full("q")
        assert answer.content == "b"

    async def test_aask_stream(self) -> None:
        async with jarvis.Jarvis(inference=ScriptedInference(["x y z"])) as j:
            pieces = [piece async for piece in j.aask_stream("q")]
        assert "".join(pieces) == "x y z"

    async def test_aask_stream_errors_reach_the_caller(self) -> None:
        async with jarvis.Jarvis(inference=ScriptedInference()) as j:
            with pytest.raises(UnknownAgentError):
                async for _ in j.aask_stream("q", agent="nope"):
                    pass

    async def test_fifty_concurrent_runs(self) -> None:
        engine = Concurrent(together=50)
        async with jarvis.Jarvis(inference=engine) as j:
            answers = await asyncio.gather(*(j.aask(f"q{i}") for i in range(50)))
        assert answers == ["OK"] * 50
        assert engine.peak == 50  # they really ran at the same time
        assert len(engine.requests) == 50

    async def test_cancelling_aask_cancels_the_run(self) -> None:
        engine = SlowStream()
        async with jarvis.Jarvis(inference=engine) as j:
            streaming = asyncio.Event()

            async def consume() -> None:
                async for _ in j.aask_stream("q"):
                    streaming.set()

            task = asyncio.create_task(consume())
            await asyncio.wait_for(streaming.wait(), 60)  # cancel mid-stream, not before it
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await asyncio.to_thread(engine.cancelled.wait, 60)

    async def test_awaited_calls_run_on_the_callers_loop_and_thread(self) -> None:
        engine = WhereItRuns()
        async with jarvis.Jarvis(inference=engine) as j:
            await j.aask("q")
            await j.aask_full("q")
            assert [piece async for piece in j.aask_stream("q")]
            await asyncio.gather(*(j.aask(f"q{i}") for i in range(5)))
        here = (asyncio.get_running_loop(), threading.current_thread())
        assert len(engine.seen) == 8
        assert set(engine.seen) == {here}  # no hand-off to another thread or loop

    async def test_sync_calls_run_on_the_private_loop_thread(self) -> None:
        engine = WhereItRuns()
        async with jarvis.Jarvis(inference=engine) as j:
            await asyncio.to_thread(j.ask, "q")
            await j.aask("q")
        (sync_loop, sync_thread), (async_loop, async_thread) = engine.seen
        assert sync_thread.name == "jarvis-sdk-loop"
        assert sync_loop is not async_loop
        assert async_thread is threading.current_thread()

    def test_closed_instance_refuses_awaited_calls(self) -> None:
        j = jarvis.Jarvis(inference=ScriptedInference())
        asyncio.run(j.aask("q"))
        j.close()

        async def stream() -> list[str]:
            return [piece async for piece in j.aask_stream("q")]

        with pytest.raises(RuntimeError, match="closed"):
            asyncio.run(j.aask("q"))
        with pytest.raises(RuntimeError, match="closed"):
            asyncio.run(stream())

    def test_sync_and_async_share_one_instance(self) -> None:
        engine = ScriptedInference(["sync", "async"])
        with jarvis.Jarvis(inference=engine) as j:
            assert j.ask("q") == "sync"
            assert asyncio.run(j.aask("q")) == "async"


STRUCTURED_ANSWER = '{"thought": "done", "final_answer": "4"}'

QUESTION_METHODS = ["ask", "ask_full", "ask_stream", "aask", "aask_full", "aask_stream"]


def answer_text(j: jarvis.Jarvis, method: str, options: AskOptions) -> str:
    """The text of one answer to "q" through the question method ``method``."""

    async def collect() -> str:
        return "".join([piece async for piece in j.aask_stream("q", **options)])

    match method:
        case "ask":
            return j.ask("q", **options)
        case "ask_full":
            return j.ask_full("q", **options).content
        case "ask_stream":
            return "".join(j.ask_stream("q", **options))
        case "aask":
            return asyncio.run(j.aask("q", **options))
        case "aask_full":
            return asyncio.run(j.aask_full("q", **options)).content
        case "aask_stream":
            return asyncio.run(collect())
    raise AssertionError(f"not a question method: {method}")


class TestOptions:
    @pytest.mark.parametrize("method", QUESTION_METHODS)
    def test_every_question_method_forwards_every_option(self, method: str) -> None:
        engine = ScriptedInference([STRUCTURED_ANSWER])
        options: AskOptions = {
            "agent": "orchestrator",
            "model": "m1",
            "temperature": 0.3,
            "max_tokens": 11,
            "system": "S",
            "tools": ["calculator"],
            "persona": "none",
            "agent_options": {"mode": "structured"},
        }
        with jarvis.Jarvis(inference=engine, model="m0") as j:
            assert answer_text(j, method, options) == "4"
        [request] = engine.requests
        assert (request.model, request.temperature, request.max_tokens) == ("m1", 0.3, 11)
        assert request.messages[0].content.startswith("S\n")
        assert request.tools == ()
        assert isinstance(request.response_format, ResponseFormat)

    @pytest.mark.parametrize("method", QUESTION_METHODS)
    def test_every_question_method_passes_the_context(self, method: str) -> None:
        engine = ScriptedInference(["```python\nFINAL(len(context))\n```"])
        j = jarvis.Jarvis(inference=engine)
        j.container.repl.override(InMemoryRepl())
        with j:
            assert answer_text(j, method, {"agent": "rlm", "context": "x" * 123}) == "123"

    def test_agent_options_reach_the_agent(self) -> None:
        engine = ScriptedInference([STRUCTURED_ANSWER, "native"])
        with jarvis.Jarvis(inference=engine) as j:
            structured = j.ask(
                "q",
                agent="orchestrator",
                tools=["calculator"],
                agent_options={"mode": "structured"},
            )
            native = j.ask("q", agent="orchestrator", tools=["calculator"])
        assert (structured, native) == ("4", "native")
        first, second = engine.requests
        assert isinstance(first.response_format, ResponseFormat)
        assert first.response_format.type == "json_schema"
        assert first.tools == ()
        assert second.response_format is None  # without the option: native function calling
        assert [spec.name for spec in second.tools] == ["calculator"]

    def test_invalid_agent_options_are_clear_errors(self) -> None:
        with jarvis.Jarvis(inference=ScriptedInference()) as j:
            with pytest.raises(ConfigurationError, match="Unknown orchestrator mode 'bogus'"):
                j.ask("q", agent="orchestrator", agent_options={"mode": "bogus"})
            with pytest.raises(ConfigurationError, match="cannot be built") as info:
                j.ask("q", agent="orchestrator", agent_options={"no_such_option": 1})
            assert info.value.hint == "Options given: no_such_option"

    def test_an_unknown_keyword_is_refused(self) -> None:
        with (
            jarvis.Jarvis(inference=ScriptedInference()) as j,
            pytest.raises(TypeError, match="unexpected keyword argument 'temprature'"),
        ):
            j.ask("q", temprature=0.3)  # type: ignore[call-overload]
