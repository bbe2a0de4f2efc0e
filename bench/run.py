"""Benchmarks of jarvis against a loopback fake OpenAI-compatible server, with same-run baselines.

    python -m bench.run            # full run, prints the table
    python -m bench.run --quick    # fewer iterations (a smoke run)
    python -m bench.run --readme   # also writes the table into README.md

Measured in one run, each against its own baseline:

* framework overhead per ``simple`` turn: ``Jarvis.aask`` vs a raw ``httpx`` call with the
  same payload to the same stub (wall time and client CPU per call);
* 50 concurrent runs through the SDK's async API vs 50 concurrent raw ``httpx`` calls;
* ``jarvis --help``, ``jarvis ask`` end to end and ``import jarvis`` as processes, against
  the bare interpreter start-up; the peak RSS of ``jarvis ask``;
* ``jarvis ask`` end to end against a bare ``python -c "import httpx; httpx.post(...)"``
  process sending the same request: what the command line costs beyond the HTTP library
  it must load (rounds of interleaved runs, the ratio of their medians).

Processes run from bytecode, as an installed package does (see
:func:`bench.common.bytecode_env`).

The stub runs in its own process so that it does not share the client's GIL. Further
benchmarks (e.g. the tool loop) are modules ``bench/bench_*.py`` with a ``run(ctx)``
function returning :class:`bench.common.Row` objects; they run after these, against the
same stub, and appear in the same table.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import cast

import httpx

from bench.common import (
    ROOT,
    BenchContext,
    Row,
    Timing,
    bytecode_env,
    stub_process,
    time_processes,
)
from jarvis.domain.loop.base import DEFAULT_SYSTEM_PROMPT

README_START = "<!-- bench:start -->"
README_END = "<!-- bench:end -->"
QUESTION = "What is the capital of France?"
SYSTEM = DEFAULT_SYSTEM_PROMPT  # the raw baseline sends exactly what the agent sends


# --- in-process: overhead per turn and concurrency ---------------------------------------


def _payload() -> dict[str, object]:
    return {
        "model": "stub-model",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": QUESTION},
        ],
        "temperature": 0.7,
        "max_tokens": 1024,
        "stream": False,
    }


async def _per_call(call: Callable[[], Awaitable[str]], n: int) -> tuple[float, float]:
    """Mean wall seconds and mean CPU seconds per call over ``n`` sequential calls."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        await call()
    return (time.perf_counter() - wall) / n, (time.process_time() - cpu) / n


async def overhead_rows(ctx: BenchContext) -> list[Row]:
    from jarvis import Jarvis

    n, blocks = (30, 3) if ctx.quick else (200, 7)
    async with httpx.AsyncClient(base_url=ctx.stub_url) as raw_client:

        async def raw() -> str:
            response = await raw_client.post("/chat/completions", json=_payload())
            return str(response.json()["choices"][0]["message"]["content"])

        async with Jarvis(engine="openai", base_url=ctx.stub_url, model="stub-model") as j:

            async def sdk() -> str:
                return await j.aask(QUESTION)

            def sdk_sync() -> str:
                return j.ask(QUESTION)

            await _per_call(raw, 20)
            await _per_call(sdk, 20)
            raw_walls, raw_cpus, sdk_walls, sdk_cpus, sync_walls = [], [], [], [], []
            for _ in range(blocks):  # interleaved blocks: drift hits both sides alike
                wall, cpu = await _per_call(raw, n)
                raw_walls.append(wall)
                raw_cpus.append(cpu)
                wall, cpu = await _per_call(sdk, n)
                sdk_walls.append(wall)
                sdk_cpus.append(cpu)
                started = time.perf_counter()
                for _ in range(n):
                    await asyncio.to_thread(sdk_sync)
                sync_walls.append((time.perf_counter() - started) / n)

    raw_wall, sdk_wall = statistics.median(raw_walls), statistics.median(sdk_walls)
    raw_cpu, sdk_cpu = statistics.median(raw_cpus), statistics.median(sdk_cpus)
    sync_wall = statistics.median(sync_walls)
    overhead = (sdk_wall - raw_wall) * 1000
    return [
        Row(
            name="simple turn, Jarvis.aask",
            value=sdk_wall * 1000,
            unit="ms",
            baseline=raw_wall * 1000,
            baseline_name="raw httpx",
        ),
        Row(
            name="framework overhead per simple turn",
            value=overhead,
            unit="ms",
            goal="<= 1 ms",
            ok=overhead <= 1.0,
            note="aask minus raw httpx, same stub",
        ),
        Row(
            name="client CPU per simple turn",
            value=sdk_cpu * 1000,
            unit="ms",
            baseline=raw_cpu * 1000,
            baseline_name="raw httpx",
            note="both event loops of the process",
        ),
        Row(
            name="simple turn, Jarvis.ask (sync)",
            value=sync_wall * 1000,
            unit="ms",
            baseline=raw_wall * 1000,
            baseline_name="raw httpx",
        ),
    ]


async def concurrency_rows(ctx: BenchContext) -> list[Row]:
    from jarvis import Jarvis

    width, rounds, blocks = 50, (2 if ctx.quick else 4), (2 if ctx.quick else 7)

    async def rate(one: Callable[[], Awaitable[str]]) -> float:
        started = time.perf_counter()
        for _ in range(rounds):
            await asyncio.gather(*(one() for _ in range(width)))
        return width * rounds / (time.perf_counter() - started)

    limits = httpx.Limits(max_connections=100, max_keepalive_connections=50)
    async with (
        httpx.AsyncClient(base_url=ctx.stub_url, limits=limits) as raw_client,
        Jarvis(engine="openai", base_url=ctx.stub_url, model="stub-model") as j,
    ):

        async def raw() -> str:
            response = await raw_client.post("/chat/completions", json=_payload())
            return str(response.json()["choices"][0]["message"]["content"])

        async def sdk() -> str:
            return await j.aask(QUESTION)

        for _ in range(2):  # open and warm the 50 connections of both pools
            await asyncio.gather(*(raw() for _ in range(width)))
            await asyncio.gather(*(sdk() for _ in range(width)))
        raw_rates, sdk_rates = [], []
        for _ in range(blocks):  # interleaved, so drift hits both sides alike
            raw_rates.append(await rate(raw))
            sdk_rates.append(await rate(sdk))
    raw_rate, sdk_rate = statistics.median(raw_rates), statistics.median(sdk_rates)
    return [
        Row(
            name="50 concurrent runs, Jarvis.aask",
            value=sdk_rate,
            unit="runs/s",
            baseline=raw_rate,
            baseline_name="raw httpx",
            goal=">= 180 runs/s",
            ok=sdk_rate >= 180,
            note=f"median of {blocks} interleaved blocks of {rounds} x {width}",
        )
    ]


# --- processes: start-up, end to end, memory ----------------------------------------------


def process_rows(ctx: BenchContext) -> list[Row]:
    runs = 3 if ctx.quick else 21
    ask_command = ctx.jarvis_command(
        "ask", "--base-url", ctx.stub_url, "-m", "stub-model", QUESTION
    )
    with tempfile.TemporaryDirectory() as home:
        (Path(home) / "config.toml").write_text(
            '[engine]\ntimeout = 60\n[agent]\ndefault = "simple"\n', encoding="utf-8"
        )
        timings = time_processes(
            {
                "bare": ([ctx.python, "-c", "pass"], ctx.env),
                "help": (ctx.jarvis_command("--help"), ctx.env),
                "import": ([ctx.python, "-c", "import jarvis"], ctx.env),
                "httpx": ([ctx.python, "-c", "import httpx"], ctx.env),
                "ask": (ask_command, ctx.env),
                "ask_configured": (ask_command, {**ctx.env, "OPENJARVIS_HOME": home}),
            },
            runs=runs,
        )
    bare, help_, imported = timings["bare"], timings["help"], timings["import"]
    httpx_alone, ask, ask_configured = timings["httpx"], timings["ask"], timings["ask_configured"]
    rss_mb = max(ask.max_rss_kb, ask_configured.max_rss_kb) / 1024

    def spent(timing: Timing) -> str:
        best, cpu = timing.best, timing.cpu_median
        return f"median of {runs}, interleaved; best {best:.3f} s, CPU {cpu:.3f} s"

    return [
        Row(
            name="jarvis --help",
            value=help_.median,
            unit="s",
            baseline=bare.median,
            baseline_name="python -c pass",
            goal="<= 0.2 s",
            ok=help_.median <= 0.2,
            note=spent(help_),
        ),
        Row(
            name="jarvis ask, end to end (stub)",
            value=ask.median,
            unit="s",
            baseline=bare.median,
            baseline_name="python -c pass",
            goal="<= 0.3 s",
            ok=ask.median <= 0.3,
            note=spent(ask),
        ),
        Row(
            name="jarvis ask, end to end (stub), with a config.toml to validate",
            value=ask_configured.median,
            unit="s",
            baseline=ask.median,
            baseline_name="no config file",
            note=spent(ask_configured),
        ),
        Row(
            name="import jarvis",
            value=imported.median,
            unit="s",
            baseline=bare.median,
            baseline_name="python -c pass",
            goal="<= 0.15 s",
            ok=imported.median <= 0.15,
            note=spent(imported),
        ),
        Row(
            name="import httpx (reference)",
            value=httpx_alone.median,
            unit="s",
            baseline=bare.median,
            baseline_name="python -c pass",
        ),
        Row(
            name="peak RSS of jarvis ask",
            value=rss_mb,
            unit="MB",
            baseline=bare.max_rss_kb / 1024,
            baseline_name="python -c pass",
            goal="<= 60 MB",
            ok=rss_mb <= 60,
        ),
    ]


def ask_vs_httpx_rows(ctx: BenchContext) -> list[Row]:
    """``jarvis ask`` against ``python -c "import httpx; httpx.post(...)"`` with the same
    request: each round interleaves 7 runs of each (so that load from elsewhere hits both
    alike) and yields the ratio of their medians; the row reports the median round."""
    rounds, runs = (1, 3) if ctx.quick else (5, 7)
    url = ctx.stub_url + "/chat/completions"
    post = [ctx.python, "-c", f"import httpx; httpx.post({url!r}, json={_payload()!r})"]
    ask = ctx.jarvis_command("ask", "--base-url", ctx.stub_url, "-m", "stub-model", QUESTION)
    measured: list[tuple[float, Timing, Timing]] = []
    for _ in range(rounds):
        timings = time_processes({"post": (post, ctx.env), "ask": (ask, ctx.env)}, runs=runs)
        ask_t, post_t = timings["ask"], timings["post"]
        measured.append((ask_t.median / post_t.median, ask_t, post_t))
    measured.sort(key=lambda m: m[0])
    ratio, ask_t, post_t = measured[len(measured) // 2]
    low, high = measured[0][0], measured[-1][0]
    return [
        Row(
            name="jarvis ask, end to end (stub), vs a bare httpx.post process",
            value=ask_t.median,
            unit="s",
            baseline=post_t.median,
            baseline_name='python -c "import httpx; httpx.post(...)"',
            goal="<= 1.2x",
            ok=ratio <= 1.2,
            note=f"median round of {rounds}, each the medians of {runs} interleaved runs; "
            f"rounds {low:.2f}-{high:.2f}x; CPU {ask_t.cpu_median:.3f} s "
            f"vs {post_t.cpu_median:.3f} s",
        )
    ]


# --- plug-in benchmarks -------------------------------------------------------------------


def plugin_modules() -> list[str]:
    """``bench/bench_*.py`` modules, in name order."""
    return sorted(f"bench.{p.stem}" for p in (ROOT / "bench").glob("bench_*.py"))


async def plugin_rows(ctx: BenchContext) -> list[Row]:
    rows: list[Row] = []
    for name in plugin_modules():
        run = getattr(importlib.import_module(name), "run", None)
        if run is None:
            continue
        result = run(ctx)
        if inspect.isawaitable(result):
            result = await result
        rows.extend(cast("list[Row]", result))
    return rows


# --- output -------------------------------------------------------------------------------


def _figure(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "ms":
        return f"{value:.3f} ms"
    if unit == "MB":
        return f"{value:.1f} MB"
    return f"{value:.0f} {unit}"


def table(rows: list[Row]) -> str:
    header = ["benchmark", "jarvis", "baseline (same run)", "ratio", "goal", "met"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        baseline = (
            f"{_figure(row.baseline, row.unit)} ({row.baseline_name})"
            if row.baseline is not None
            else ""
        )
        ratio = f"{row.ratio:.2f}x" if row.ratio is not None else ""
        met = "" if row.ok is None else ("yes" if row.ok else "**no**")
        name = f"{row.name} ({row.note})" if row.note else row.name
        cells = [name, _figure(row.value, row.unit), baseline, ratio, row.goal, met]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine() -> str:
    cpus = os.cpu_count() or 0
    return (
        f"{cpus} CPU(s), Python {sys.version.split()[0]}, "
        f"load average {os.getloadavg()[0]:.2f} at the start"
    )


def write_readme(text: str) -> None:
    readme = ROOT / "README.md"
    content = readme.read_text(encoding="utf-8")
    start, end = content.find(README_START), content.find(README_END)
    if start < 0 or end < start:
        raise SystemExit(f"README.md has no {README_START} ... {README_END} section")
    content = content[: start + len(README_START)] + "\n" + text + "\n" + content[end:]
    readme.write_text(content, encoding="utf-8")


async def measure(ctx: BenchContext) -> list[Row]:
    rows = await overhead_rows(ctx)
    rows += await concurrency_rows(ctx)
    rows += process_rows(ctx)
    rows += ask_vs_httpx_rows(ctx)
    rows += await plugin_rows(ctx)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description="jarvis benchmarks against a loopback stub")
    parser.add_argument("--quick", action="store_true", help="few iterations (smoke run)")
    parser.add_argument("--readme", action="store_true", help="write the table into README.md")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    args = parser.parse_args()

    with (
        tempfile.TemporaryDirectory() as home,
        tempfile.TemporaryDirectory() as bytecode,
        stub_process() as url,
    ):
        env = {k: v for k, v in os.environ.items() if not k.endswith(("_HOST", "_BASE_URL"))}
        env = bytecode_env(env, bytecode)
        env["OPENJARVIS_HOME"] = home  # an empty config dir: the defaults
        os.environ["OPENJARVIS_HOME"] = home
        ctx = BenchContext(stub_url=url, env=env, quick=args.quick)
        where = machine()
        rows = asyncio.run(measure(ctx))

    text = f"Measured by `python -m bench.run` on {where}.\n\n{table(rows)}"
    print(text)
    if args.json:
        args.json.write_text(
            json.dumps([asdict(row) | {"ratio": row.ratio} for row in rows], indent=2),
            encoding="utf-8",
        )
    if args.readme:
        write_readme(text)


if __name__ == "__main__":
    main()
