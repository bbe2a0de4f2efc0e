"""The engines' HTTP transport against a bare aiohttp loop, in the same run.

The issue a transport settles is client CPU: a bare aiohttp loop costs a fraction of a bare httpx
loop per request, and jarvis sends through its own httptools wire (the default), aiohttp
or httpx (``[engine] transport``). Each figure here is a ratio against a hand-written
aiohttp loop that sends the very request jarvis sends, measured in interleaved blocks so
that load from elsewhere hits every side alike:

* client CPU per two-call tool run (call → calculator → answer) through ``Jarvis.aask``,
  on each transport, vs the bare aiohttp loop (goal <= 1.6x, judged on the default
  transport) and the bare httpx loop.
  The engine is configured as one that stops at ``max_tokens`` (``[engine]
  honours_max_tokens = true``, what vLLM and the OpenAI API get by default), so a
  tool-using turn is asked for whole, as the bare loops ask; the side "tool turns
  streamed" is the same without it (any other OpenAI-compatible server: each tool-using
  turn read as a stream, so that it can be cut at ``max_tokens``);
* 50 concurrent two-call tool runs, runs per second (goal >= 0.6x the bare aiohttp loop);
* the wall time of a plain (tool-less) turn, median of every call (goal <= 1.5x);
* ``jarvis ask`` end to end (start-up included) on each transport, interleaved runs
  (goal: not slower on the default transport than on httpx);
* where the CPU ratio comes from (no goals): jarvis's own work per tool run with the
  engine scripted in the process (no HTTP), and the bare aiohttp loop with that very run
  between its two calls, against the two measured apart; and the same with a fixed piece
  of unrelated standard-library work in place of the jarvis run, as a control.

``jarvis serve``'s own path against ``Jarvis.aask`` on the same transport is in
:mod:`bench.bench_serve`. Run alone with ``python -m bench.bench_transport [--quick]``.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import difflib
import fractions
import json
import os
import statistics
import string
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import httpx

from bench.bench_tool_loop import QUESTION, RawPayload, raw_payload, raw_tool_run
from bench.common import BenchContext, Row, stub_process, time_processes

Call = Callable[[], Awaitable[object]]
TRANSPORTS = ("httptools", "aiohttp", "httpx")
STREAMED = "jarvis on httptools, tool turns streamed"
JARVIS_SIDES = (
    ("jarvis on httptools", "httptools", True),
    ("jarvis on aiohttp", "aiohttp", True),
    (STREAMED, "httptools", False),
    ("jarvis on httpx", "httpx", True),
)
"""(side, transport, whether a tool-using turn is asked for whole)."""


async def bare_aiohttp_tool_run(
    session: aiohttp.ClientSession, url: str, payload: RawPayload, between: Call | None = None
) -> str:
    """:func:`bench.bench_tool_loop.raw_tool_run`, over aiohttp; ``between`` is awaited
    after each tool-using turn (the control rows put other work there)."""
    messages: list[dict[str, object]] = [
        {"role": "system", "content": payload.system},
        {"role": "user", "content": QUESTION},
    ]
    counter = 0
    while True:
        body = {
            "model": "stub-model",
            "messages": messages,
            **payload.settings,
            "stream": False,
            "tools": [payload.tool],
            "tool_choice": "auto",
        }
        async with session.post(url + "/chat/completions", json=body) as response:
            message = (await response.json())["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        if not calls:
            return str(message["content"])
        messages.append({"role": "assistant", "content": "", "tool_calls": calls})
        for call in calls:
            arguments = json.loads(call["function"]["arguments"] or "{}")
            counter += 1
            result = "4" if arguments.get("expression") == "2+2" else str(counter)
            messages.append({"role": "tool", "content": result, "tool_call_id": call["id"]})
        if between is not None:
            await between()


def _config_home(root: Path, transport: str, *, whole_tool_turns: bool = True) -> Path:
    home = root / (transport if whole_tool_turns else transport + "-streamed")
    home.mkdir()
    honours = "honours_max_tokens = true\n" if whole_tool_turns else ""
    (home / "config.toml").write_text(
        f'[engine]\ntimeout = 60\ntransport = "{transport}"\n{honours}'
        '[agent]\ndefault = "simple"\n',
        encoding="utf-8",
    )
    return home


@asynccontextmanager
async def _sides(ctx: BenchContext, root: Path) -> AsyncIterator[dict[str, tuple[Call, Call]]]:
    """Each side's (two-call tool run, plain turn)."""
    from jarvis import Jarvis
    from jarvis.application.tools.calculator import CalculatorTool

    payload = raw_payload(CalculatorTool())
    url = ctx.stub_url
    plain = {
        "model": "stub-model",
        "messages": [{"role": "user", "content": QUESTION}],
        "stream": False,
    }
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=50)
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100)) as session,
        httpx.AsyncClient(base_url=url, limits=limits) as client,
    ):
        sides: dict[str, tuple[Call, Call]] = {}

        async def bare_tool() -> object:
            return await bare_aiohttp_tool_run(session, url, payload)

        async def bare_plain() -> object:
            async with session.post(url + "/chat/completions", json=plain) as response:
                return (await response.json())["choices"][0]["message"]["content"]

        async def httpx_tool() -> object:
            return await raw_tool_run(client, payload)

        async def httpx_plain() -> object:
            response = await client.post("/chat/completions", json=plain)
            return response.json()["choices"][0]["message"]["content"]

        sides["bare aiohttp"] = (bare_tool, bare_plain)
        sides["bare httpx"] = (httpx_tool, httpx_plain)
        opened = []
        for side, transport, whole in JARVIS_SIDES:
            config = _config_home(root, transport, whole_tool_turns=whole) / "config.toml"
            j = Jarvis(engine="openai", base_url=url, model="stub-model", config_path=config)
            await j.__aenter__()
            opened.append(j)
            sides[side] = _jarvis_calls(j)
        try:
            yield sides
        finally:
            for j in opened:
                await j.__aexit__(None, None, None)


def _stdlib_work() -> None:
    """A fixed piece of pure-Python standard-library work, unrelated to jarvis: parsing,
    text wrapping, a diff, exact arithmetic (the control of :func:`control_rows`)."""
    ast.dump(ast.parse("def f(a, b=1):\n    return [x * a for x in range(b) if x % 2]\n"))
    textwrap.fill("the quick brown fox jumps over the lazy dog " * 8, 40)
    list(difflib.unified_diff(["a", "b", "c", "d"], ["a", "c", "d", "e"]))
    fractions.Fraction(3, 7) + fractions.Fraction(5, 11)
    string.Template("$a and $b").substitute(a=1, b=2)


@asynccontextmanager
async def _scripted_run(root: Path) -> AsyncIterator[Call]:
    """One two-call tool run through ``Jarvis.aask`` with the engine's two answers scripted
    in the process: jarvis's own work, no HTTP."""
    from jarvis import Jarvis
    from jarvis.domain.llm.completion import Completion
    from jarvis.domain.llm.messages import ToolCall
    from jarvis.testing import ScriptedInference

    engine = ScriptedInference((), models=("stub-model",))
    call = ToolCall(id="call_1", name="calculator", arguments={"expression": "2+2"})
    replies = (
        Completion(content="", tool_calls=(call,), finish_reason="tool_calls"),
        Completion(content="4"),
    )
    config = root / "scripted.toml"
    config.write_text('[agent]\ndefault = "simple"\n', encoding="utf-8")
    async with Jarvis(inference=engine, model="stub-model", config_path=config) as j:

        async def run() -> object:
            engine.add(*replies)
            engine.requests.clear()
            answer = await j.aask_full(QUESTION, agent="orchestrator", tools=["calculator"])
            assert answer.turns == 2, answer
            return answer

        yield run


async def control_rows(ctx: BenchContext) -> list[Row]:
    """The bare loop's two calls with a jarvis run (or the control work) between them,
    against the bare loop and that work measured apart, in interleaved blocks."""
    from jarvis.application.tools.calculator import CalculatorTool

    payload = raw_payload(CalculatorTool())
    n, blocks = (10, 2) if ctx.quick else (200, 7)
    with tempfile.TemporaryDirectory() as root:
        async with (
            aiohttp.ClientSession() as session,
            _scripted_run(Path(root)) as scripted,
        ):

            async def bare() -> object:
                return await bare_aiohttp_tool_run(session, ctx.stub_url, payload)

            async def control() -> object:
                _stdlib_work()
                return None

            async def with_jarvis() -> object:
                return await bare_aiohttp_tool_run(session, ctx.stub_url, payload, scripted)

            async def with_control() -> object:
                return await bare_aiohttp_tool_run(session, ctx.stub_url, payload, control)

            sides = {
                "bare": bare,
                "jarvis": scripted,
                "control": control,
                "bare+jarvis": with_jarvis,
                "bare+control": with_control,
            }
            cpu: dict[str, list[float]] = {name: [] for name in sides}
            for call in sides.values():
                await _cpu_per_call(call, 20)
            for _ in range(blocks):
                for name, call in sides.items():
                    cpu[name].append(await _cpu_per_call(call, n))
    ms = {k: statistics.median(v) * 1000 for k, v in cpu.items()}
    note = f"CPU, median of {blocks} interleaved blocks"

    def row(name: str, side: str, baseline: float, baseline_name: str) -> Row:
        return Row(
            name=name,
            value=ms[side],
            unit="ms",
            baseline=baseline,
            baseline_name=baseline_name,
            note=note,
        )

    return [
        row(
            "jarvis's own work per tool run (engine scripted, no HTTP)",
            "jarvis",
            ms["bare"],
            "bare aiohttp loop",
        ),
        row(
            "bare aiohttp loop with that jarvis run between its two calls",
            "bare+jarvis",
            ms["bare"] + ms["jarvis"],
            "the two measured apart",
        ),
        row(
            "bare aiohttp loop with unrelated stdlib work between its calls (control)",
            "bare+control",
            ms["bare"] + ms["control"],
            f"the two measured apart (the work alone {ms['control']:.3f} ms)",
        ),
    ]


def _jarvis_calls(j: object) -> tuple[Call, Call]:
    from jarvis import Jarvis

    assert isinstance(j, Jarvis)

    async def tool() -> object:
        answer = await j.aask_full(QUESTION, agent="orchestrator", tools=["calculator"])
        assert answer.turns == 2, answer
        return answer

    async def plain() -> object:
        return await j.aask(QUESTION, agent="simple")

    return tool, plain


async def _cpu_per_call(call: Call, n: int) -> float:
    started = time.process_time()
    for _ in range(n):
        await call()
    return (time.process_time() - started) / n


async def _walls(call: Call, n: int) -> list[float]:
    walls = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        walls.append(time.perf_counter() - started)
    return walls


async def _rate(call: Call, width: int, rounds: int) -> float:
    started = time.perf_counter()
    for _ in range(rounds):
        await asyncio.gather(*(call() for _ in range(width)))
    return width * rounds / (time.perf_counter() - started)


async def in_process_rows(ctx: BenchContext) -> list[Row]:
    n, blocks = (10, 2) if ctx.quick else (100, 7)
    width, rounds = 50, (1 if ctx.quick else 3)
    with tempfile.TemporaryDirectory() as root:
        async with _sides(ctx, Path(root)) as sides:
            cpu: dict[str, list[float]] = {name: [] for name in sides}
            walls: dict[str, list[float]] = {name: [] for name in sides}
            rates: dict[str, list[float]] = {name: [] for name in sides}
            for tool, plain in sides.values():
                await _cpu_per_call(tool, 10)
                await _walls(plain, 10)
                await asyncio.gather(*(tool() for _ in range(width)))
            for _ in range(blocks):  # interleaved: drift hits every side alike
                for name, (tool, plain) in sides.items():
                    cpu[name].append(await _cpu_per_call(tool, n))
                    walls[name] += await _walls(plain, n)
                    rates[name].append(await _rate(tool, width, rounds))
    return _rows(
        {k: statistics.median(v) * 1000 for k, v in cpu.items()},
        {k: statistics.median(v) * 1000 for k, v in walls.items()},
        {k: statistics.median(v) for k, v in rates.items()},
        f"median of {blocks} interleaved blocks",
    )


def _rows(
    cpu: dict[str, float], p50: dict[str, float], rate: dict[str, float], note: str
) -> list[Row]:
    bare = "bare aiohttp"
    rows: list[Row] = []
    for side in (
        "jarvis on httptools",
        "jarvis on aiohttp",
        STREAMED,
        "jarvis on httpx",
        "bare httpx",
    ):
        judged = side == "jarvis on httptools"
        rows += [
            Row(
                name=f"CPU per two-call tool run, {side}",
                value=cpu[side],
                unit="ms",
                baseline=cpu[bare],
                baseline_name="bare aiohttp loop",
                goal="<= 1.6x" if judged else "",
                ok=cpu[side] <= 1.6 * cpu[bare] if judged else None,
                note=note,
            ),
            Row(
                name=f"50 concurrent two-call tool runs, {side}",
                value=rate[side],
                unit="runs/s",
                baseline=rate[bare],
                baseline_name="bare aiohttp loop",
                goal=">= 0.6x" if judged else "",
                ok=rate[side] >= 0.6 * rate[bare] if judged else None,
                note=note,
            ),
            Row(
                name=f"plain turn p50, {side}",
                value=p50[side],
                unit="ms",
                baseline=p50[bare],
                baseline_name="bare aiohttp loop",
                goal="<= 1.5x" if judged else "",
                ok=p50[side] <= 1.5 * p50[bare] if judged else None,
                note="median of every call",
            ),
        ]
    return rows


def start_up_rows(ctx: BenchContext) -> list[Row]:
    runs = 3 if ctx.quick else 15
    ask = ctx.jarvis_command("ask", "--base-url", ctx.stub_url, "-m", "stub-model", QUESTION)
    with tempfile.TemporaryDirectory() as root:
        homes = {t: _config_home(Path(root), t) for t in TRANSPORTS}
        timings = time_processes(
            {t: (ask, {**ctx.env, "OPENJARVIS_HOME": str(home)}) for t, home in homes.items()},
            runs=runs,
        )
    on_httpx = timings["httpx"]
    rows = []
    for transport in ("httptools", "aiohttp"):
        measured = timings[transport]
        judged = transport == "httptools"
        rows.append(
            Row(
                name=f"jarvis ask, end to end (stub), on {transport}",
                value=measured.median,
                unit="s",
                baseline=on_httpx.median,
                baseline_name="the same on httpx",
                goal="not slower" if judged else "",
                ok=measured.median <= on_httpx.median if judged else None,
                note=f"median of {runs}, interleaved; CPU {measured.cpu_median:.3f} s "
                f"vs {on_httpx.cpu_median:.3f} s",
            )
        )
    return rows


async def run(ctx: BenchContext) -> list[Row]:
    rows = await in_process_rows(ctx)
    rows += await control_rows(ctx)
    return rows + await asyncio.to_thread(start_up_rows, ctx)


def main() -> None:
    from bench.run import table

    parser = argparse.ArgumentParser(description="the engine transport benchmarks alone")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home, stub_process() as url:
        os.environ["OPENJARVIS_HOME"] = home
        ctx = BenchContext(stub_url=url, quick=args.quick, env=dict(os.environ))
        print(table(asyncio.run(run(ctx))))


if __name__ == "__main__":
    main()
