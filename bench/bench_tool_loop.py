"""The tool loop against the loopback stub, each figure beside a raw ``httpx`` baseline.

* client CPU per two-call tool run (call → calculator → answer) through ``Jarvis.aask``
  with ``agent="orchestrator"``, vs raw ``httpx`` making the same two requests;
* 50 concurrent two-call tool runs, runs per second, vs 50 concurrent raw loops;
* a 10-turn orchestrator run (a stub that asks for 9 tool calls in a row) vs 10 raw calls;
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
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import httpx

from bench.common import ROOT, BenchContext, Row

if TYPE_CHECKING:
    from jarvis.domain.ports import ToolPort

QUESTION = "What is 2+2? Use the calculator."
SYSTEM = "You are Jarvis. Use the tools when they help."
CALCULATOR: dict[str, object] = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}
TICK: dict[str, object] = {
    "type": "function",
    "function": {
        "name": "tick",
        "description": "Advance the counter.",
        "parameters": {"type": "object", "properties": {}},
    },
}


@contextmanager
def stub_with_tool_rounds(rounds: int) -> Iterator[str]:
    """A stub process whose conversations get ``rounds`` tool calls before the answer."""
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "stub_server.py"), "--tool-rounds", str(rounds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"stub server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        process.terminate()
        process.wait(10)


# --- the raw baseline: a hand-written loop over httpx ----------------------------------------


async def raw_tool_run(client: httpx.AsyncClient, tool: dict[str, object]) -> str:
    """Request, run every returned call, send the results back, until a text answer."""
    messages: list[dict[str, object]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": QUESTION},
    ]
    counter = 0
    while True:
        response = await client.post(
            "/chat/completions",
            json={"model": "stub-model", "messages": messages, "tools": [tool], "stream": False},
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
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})


# --- measurements -----------------------------------------------------------------------------


async def _per_run(call: Callable[[], Awaitable[object]], n: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        await call()
    return (time.perf_counter() - wall) / n, (time.process_time() - cpu) / n


async def two_call_rows(ctx: BenchContext) -> list[Row]:
    from jarvis import Jarvis

    n, blocks = (20, 3) if ctx.quick else (150, 7)
    width, rounds = 50, (2 if ctx.quick else 4)
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=50)
    async with (
        httpx.AsyncClient(base_url=ctx.stub_url, limits=limits) as client,
        Jarvis(engine="openai", base_url=ctx.stub_url, model="stub-model") as j,
    ):

        async def raw() -> object:
            return await raw_tool_run(client, CALCULATOR)

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
            goal=">= 180 runs/s",
            ok=our_rate >= 180,
        ),
    ]


async def ten_turn_rows(ctx: BenchContext) -> list[Row]:
    from jarvis import Jarvis

    counter = {"n": 0}

    def tick() -> str:
        """Advance the counter and return its value."""
        counter["n"] += 1
        return str(counter["n"])

    runs, blocks = (5, 3) if ctx.quick else (40, 7)
    with stub_with_tool_rounds(9) as url:
        async with (
            httpx.AsyncClient(base_url=url) as client,
            Jarvis(engine="openai", base_url=url, model="stub-model", tools=[tick]) as j,
        ):

            async def raw() -> object:
                return await raw_tool_run(client, TICK)

            async def ours() -> object:
                answer = await j.aask_full(QUESTION, agent="orchestrator", tools=["tick"])
                assert answer.turns == 10, answer
                assert answer.stop_reason == "final_answer", answer
                return answer

            await _per_run(raw, 3)
            await _per_run(ours, 3)
            raw_walls, our_walls = [], []
            for _ in range(blocks):
                raw_walls.append((await _per_run(raw, runs))[0])
                our_walls.append((await _per_run(ours, runs))[0])
            direct_walls = await _direct_ten_turns(url, runs, blocks)
    ours_s, raw_s = statistics.median(our_walls), statistics.median(raw_walls)
    direct_s = statistics.median(direct_walls)
    loop_ms = await _scripted_loop_cost(runs * 5)
    return [
        Row(
            name="10-turn orchestrator run (9 tool calls + answer, Jarvis.aask)",
            value=ours_s * 1000,
            unit="ms",
            baseline=raw_s * 1000,
            baseline_name="10 raw httpx calls",
            goal="<= 1.1x",
            ok=ours_s <= 1.1 * raw_s,
        ),
        Row(
            name="10-turn orchestrator run, agent on the engine adapter (no SDK)",
            value=direct_s * 1000,
            unit="ms",
            baseline=raw_s * 1000,
            baseline_name="10 raw httpx calls",
            goal="<= 1.1x",
            ok=direct_s <= 1.1 * raw_s,
        ),
        Row(
            name="the loop itself: CPU per 10-turn run on the scripted engine",
            value=loop_ms,
            unit="ms",
            note="agent, protocol, loop guard, executor, tool; no HTTP",
        ),
    ]


def _tick_tool() -> ToolPort:
    from jarvis.application.tools.function_tool import as_tool

    counter = {"n": 0}

    def tick() -> str:
        """Advance the counter and return its value."""
        counter["n"] += 1
        return str(counter["n"])

    return as_tool(tick)


async def _direct_ten_turns(url: str, runs: int, blocks: int) -> list[float]:
    """The orchestrator on the OpenAI-compatible adapter, without the SDK around it."""
    from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine
    from jarvis.domain.agents.orchestrator import OrchestratorAgent

    engine = OpenAICompatibleEngine(url)
    tool = _tick_tool()
    try:

        async def one() -> object:
            result = await OrchestratorAgent(engine, "stub-model", tools=[tool]).arun(QUESTION)
            assert result.turns == 10, result
            return result

        await _per_run(one, 3)
        return [(await _per_run(one, runs))[0] for _ in range(blocks)]
    finally:
        await engine.aclose()


async def _scripted_loop_cost(runs: int) -> float:
    """Client CPU (ms) of a 10-turn run when the engine answers instantly from memory."""
    from jarvis.domain.agents.orchestrator import OrchestratorAgent
    from jarvis.domain.completion import Completion
    from jarvis.domain.messages import ToolCall
    from jarvis.testing import ScriptedInference

    tool = _tick_tool()
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
    from jarvis.domain.completion import Completion
    from jarvis.domain.json_types import JSONObject
    from jarvis.domain.messages import ToolCall
    from jarvis.domain.tools import ToolSpec
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
    from bench.run import stub_process, table

    parser = argparse.ArgumentParser(description="the tool-loop benchmarks alone")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home, stub_process() as url:
        os.environ["OPENJARVIS_HOME"] = home
        ctx = BenchContext(stub_url=url, quick=args.quick)
        print(table(asyncio.run(run(ctx))))


if __name__ == "__main__":
    main()
