"""The tool loop against the loopback stub, each figure beside a raw ``httpx`` baseline.

* client CPU per two-call tool run (call → calculator → answer) through ``Jarvis.aask``
  with ``agent="orchestrator"``, vs raw ``httpx`` making the same two requests;
* 50 concurrent two-call tool runs, runs per second, vs 50 concurrent raw loops;
* a 10-turn orchestrator run (a stub that asks for 9 tool calls in a row) vs 10 raw calls;

The raw loop sends what jarvis sends (the same system prompt, settings, tool definition and
growing conversation: see :class:`RawPayload`), the same number of requests, over one
pooled keep-alive client, so a ratio measures jarvis and nothing else.
* 8 parallel tool calls of one turn, each sleeping 200 ms, must finish in one turn (engine:
  the in-memory scripted one, so only the loop and the executor are timed).

Run alone with ``python -m bench.bench_tool_loop [--quick]``, or with everything else by
``python -m bench.run`` (which discovers ``run``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from bench.common import BenchContext, Row, stub_process

if TYPE_CHECKING:
    from jarvis.domain.ports import ToolPort

QUESTION = "What is 2+2? Use the calculator."


@dataclass(frozen=True, slots=True)
class RawPayload:
    """What the hand-written loop sends: the very request jarvis sends, field for field (its
    system prompt, sampling settings, rendered tool and ``tool_choice``), so that both sides
    move the same bytes over the same kind of pooled keep-alive connection."""

    system: str
    tool: dict[str, object]
    settings: dict[str, object]


def raw_payload(tool: ToolPort) -> RawPayload:
    """The payload the orchestrator sends when ``tool`` is its only tool."""
    from jarvis.adapters.inference._openai_wire import tool_to_openai
    from jarvis.domain.agents.orchestrator import OrchestratorAgent
    from jarvis.testing import ScriptedInference

    agent = OrchestratorAgent(ScriptedInference(), "stub-model", tools=[tool])
    return RawPayload(
        system=agent.effective_system_prompt(),
        tool=dict(tool_to_openai(tool.spec)),
        settings={"temperature": agent.temperature, "max_tokens": agent.max_tokens},
    )


# --- the raw baseline: a hand-written loop over httpx ----------------------------------------


async def raw_tool_run(client: httpx.AsyncClient, payload: RawPayload) -> str:
    """Request, run every returned call, send the results back, until a text answer.

    The conversation grows as the agent's does (assistant message with the calls, one tool
    message per call); the "tool" is computed inline, as a non-blocking tool runs."""
    messages: list[dict[str, object]] = [
        {"role": "system", "content": payload.system},
        {"role": "user", "content": QUESTION},
    ]
    counter = 0
    while True:
        response = await client.post(
            "/chat/completions",
            json={
                "model": "stub-model",
                "messages": messages,
                **payload.settings,
                "stream": False,
                "tools": [payload.tool],
                "tool_choice": "auto",
            },
        )
        message = response.json()["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        if not calls:
            return str(message["content"])
        messages.append({"role": "assistant", "content": "", "tool_calls": calls})
        for call in calls:
            arguments = json.loads(call["function"]["arguments"] or "{}")
            counter += 1
            result = "4" if arguments.get("expression") == "2+2" else str(counter)
            messages.append({"role": "tool", "content": result, "tool_call_id": call["id"]})


# --- measurements -----------------------------------------------------------------------------


async def _per_run(call: Callable[[], Awaitable[object]], n: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        await call()
    return (time.perf_counter() - wall) / n, (time.process_time() - cpu) / n


async def two_call_rows(ctx: BenchContext) -> list[Row]:
    from jarvis import Jarvis
    from jarvis.application.tools.calculator import CalculatorTool

    n, blocks = (20, 3) if ctx.quick else (150, 7)
    width, rounds = 50, (2 if ctx.quick else 4)
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=50)
    payload = raw_payload(CalculatorTool())
    async with (
        httpx.AsyncClient(base_url=ctx.stub_url, limits=limits) as client,
        Jarvis(engine="openai", base_url=ctx.stub_url, model="stub-model") as j,
    ):

        async def raw() -> object:
            return await raw_tool_run(client, payload)

        async def ours() -> object:
            answer = await j.aask_full(QUESTION, agent="orchestrator", tools=["calculator"])
            assert answer.turns == 2, answer
            assert answer.tool_results[0].content == "4", answer.tool_results
            return answer

        await _per_run(raw, 10)
        await _per_run(ours, 10)
        raw_cpu, our_cpu, raw_wall, our_wall = [], [], [], []
        for _ in range(blocks):  # interleaved, so drift hits both sides alike
            wall, cpu = await _per_run(raw, n)
            raw_wall.append(wall)
            raw_cpu.append(cpu)
            wall, cpu = await _per_run(ours, n)
            our_wall.append(wall)
            our_cpu.append(cpu)

        async def batch_rate(one: Callable[[], Awaitable[object]]) -> float:
            started = time.perf_counter()
            for _ in range(rounds):
                await asyncio.gather(*(one() for _ in range(width)))
            return width * rounds / (time.perf_counter() - started)

        for _ in range(3):  # open and warm the 50 connections of both clients
            await asyncio.gather(*(raw() for _ in range(width)))
            await asyncio.gather(*(ours() for _ in range(width)))
        raw_rates, our_rates = [], []
        for _ in range(blocks):
            raw_rates.append(await batch_rate(raw))
            our_rates.append(await batch_rate(ours))
        raw_rate, our_rate = statistics.median(raw_rates), statistics.median(our_rates)

    cpu_ms = statistics.median(our_cpu) * 1000
    return [
        Row(
            name="client CPU per two-call tool run (orchestrator + calculator, Jarvis.aask)",
            value=cpu_ms,
            unit="ms",
            baseline=statistics.median(raw_cpu) * 1000,
            baseline_name="raw httpx loop",
            goal="<= 4 ms",
            ok=cpu_ms <= 4.0,
            note=f"wall {statistics.median(our_wall) * 1000:.2f} ms "
            f"vs {statistics.median(raw_wall) * 1000:.2f} ms",
        ),
        Row(
            name="50 concurrent two-call tool runs",
            value=our_rate,
            unit="runs/s",
            baseline=raw_rate,
            baseline_name="raw httpx loop",
            goal=">= 0.85x raw",
            ok=our_rate >= 0.85 * raw_rate,
            note=f"median of {blocks} interleaved blocks of {rounds} x {width}",
        ),
    ]


async def ten_turn_rows(ctx: BenchContext) -> list[Row]:
    """Jarvis (SDK, and the agent straight on the adapter) vs the raw loop, interleaved.

    The tool is a sync function declared ``@tool(blocking=False)`` — it returns at once, and
    the raw loop computes its result inline too. A last figure shows the same run with the
    function left as the default (``blocking``: a worker thread per call)."""
    from jarvis import Jarvis
    from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine
    from jarvis.domain.agents.orchestrator import OrchestratorAgent

    tick = _tick_tool(blocking=False)
    threaded_tick = _tick_tool(blocking=True)
    payload = raw_payload(tick)
    runs, blocks = (5, 3) if ctx.quick else (40, 7)
    with stub_process("--tool-rounds", "9") as url:
        engine = OpenAICompatibleEngine(url)
        async with (
            httpx.AsyncClient(base_url=url) as client,
            Jarvis(engine="openai", base_url=url, model="stub-model", tools=[tick]) as j,
        ):

            async def raw() -> object:
                return await raw_tool_run(client, payload)

            async def sdk() -> object:
                answer = await j.aask_full(QUESTION, agent="orchestrator", tools=["tick"])
                assert answer.turns == 10, answer
                assert answer.stop_reason == "final_answer", answer
                return answer

            def direct(tool: ToolPort) -> Callable[[], Awaitable[object]]:
                async def one() -> object:
                    result = await OrchestratorAgent(engine, "stub-model", tools=[tool]).arun(
                        QUESTION
                    )
                    assert result.turns == 10, result
                    return result

                return one

            sides: dict[str, Callable[[], Awaitable[object]]] = {
                "raw": raw,
                "sdk": sdk,
                "direct": direct(tick),
                "threaded": direct(threaded_tick),
            }
            walls: dict[str, list[float]] = {name: [] for name in sides}
            for one in sides.values():
                await _per_run(one, 3)
            for _ in range(blocks):  # interleaved, so drift hits every side alike
                for name, one in sides.items():
                    walls[name].append((await _per_run(one, runs))[0])
        await engine.aclose()
    raw_s, sdk_s = statistics.median(walls["raw"]), statistics.median(walls["sdk"])
    direct_s, threaded_s = statistics.median(walls["direct"]), statistics.median(walls["threaded"])
    loop_ms = await _scripted_loop_cost(runs * 5)
    return [
        Row(
            name="10-turn orchestrator run (9 tool calls + answer, Jarvis.aask)",
            value=sdk_s * 1000,
            unit="ms",
            baseline=raw_s * 1000,
            baseline_name="10 raw httpx calls, same payloads",
            goal="<= 1.1x",
            ok=sdk_s <= 1.1 * raw_s,
        ),
        Row(
            name="10-turn orchestrator run, agent on the engine adapter (no SDK)",
            value=direct_s * 1000,
            unit="ms",
            baseline=raw_s * 1000,
            baseline_name="10 raw httpx calls, same payloads",
            goal="<= 1.1x",
            ok=direct_s <= 1.1 * raw_s,
        ),
        Row(
            name="the same, the tool a plain sync function (a worker thread per call)",
            value=threaded_s * 1000,
            unit="ms",
            baseline=raw_s * 1000,
            baseline_name="10 raw httpx calls, same payloads",
            note="the default for sync functions; @tool(blocking=False) skips the thread",
        ),
        Row(
            name="the loop itself: CPU per 10-turn run on the scripted engine",
            value=loop_ms,
            unit="ms",
            note="agent, protocol, loop guard, executor, tool; no HTTP",
        ),
    ]


def _tick_tool(*, blocking: bool) -> ToolPort:
    from jarvis.application.tools.function_tool import tool

    counter = {"n": 0}

    def tick() -> str:
        """Advance the counter and return its value."""
        counter["n"] += 1
        return str(counter["n"])

    return tool(blocking=blocking)(tick)


async def _scripted_loop_cost(runs: int) -> float:
    """Client CPU (ms) of a 10-turn run when the engine answers instantly from memory."""
    from jarvis.domain.agents.orchestrator import OrchestratorAgent
    from jarvis.domain.llm.completion import Completion
    from jarvis.domain.llm.messages import ToolCall
    from jarvis.testing import ScriptedInference

    tool = _tick_tool(blocking=False)
    script: list[str | Completion] = [
        Completion(content="", tool_calls=(ToolCall(id=f"c{i}", name="tick"),)) for i in range(9)
    ]
    script.append("done")
    started = time.process_time()
    for _ in range(runs):
        result = await OrchestratorAgent(ScriptedInference(script), "m", tools=[tool]).arun("q")
        assert result.turns == 10, result
    return (time.process_time() - started) / runs * 1000


async def parallel_tool_rows(ctx: BenchContext) -> list[Row]:
    from jarvis.domain.agents.orchestrator import OrchestratorAgent
    from jarvis.domain.json_types import JSONObject
    from jarvis.domain.llm.completion import Completion
    from jarvis.domain.llm.messages import ToolCall
    from jarvis.domain.tools.specs import ToolSpec
    from jarvis.testing import InMemoryTool, ScriptedInference

    async def nap(arguments: JSONObject) -> str:
        await asyncio.sleep(0.2)
        return "rested"

    tool = InMemoryTool(ToolSpec(name="nap", description="Sleep 200 ms."), nap)
    calls = tuple(ToolCall(id=f"c{i}", name="nap") for i in range(8))
    timings = []
    for _ in range(3 if ctx.quick else 7):
        engine = ScriptedInference([Completion(content="", tool_calls=calls), "rested 8 times"])
        agent = OrchestratorAgent(engine, "m", tools=[tool])
        started = time.perf_counter()
        result = await agent.arun("rest")
        timings.append(time.perf_counter() - started)
        assert result.turns == 2
        assert len(result.tool_results) == 8
    seconds = statistics.median(timings)
    return [
        Row(
            name="8 parallel tool calls of 200 ms in one turn",
            value=seconds,
            unit="s",
            baseline=0.2,
            baseline_name="one call alone",
            goal="<= 0.3 s",
            ok=seconds <= 0.3,
            note="scripted engine: loop and executor only",
        )
    ]


async def run(ctx: BenchContext) -> list[Row]:
    rows = await two_call_rows(ctx)
    rows += await ten_turn_rows(ctx)
    rows += await parallel_tool_rows(ctx)
    return rows


def main() -> None:
    from bench.run import table

    parser = argparse.ArgumentParser(description="the tool-loop benchmarks alone")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home, stub_process() as url:
        os.environ["OPENJARVIS_HOME"] = home
        ctx = BenchContext(stub_url=url, quick=args.quick)
        print(table(asyncio.run(run(ctx))))


if __name__ == "__main__":
    main()
