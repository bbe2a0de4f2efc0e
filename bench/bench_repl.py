"""The isolated REPL: start-up, per-execution overhead, and ``llm_batch`` fan-out.

    python -m bench.bench_repl     # just these rows
    python -m bench.run            # with every other benchmark

* start-up: ``SubprocessRepl.start()`` until the worker is ready (the bubblewrap sandbox
  with its seccomp filter, the session's cgroup where there is one, limits, audit hook),
  against starting a bare ``python -I -S -c pass`` outside any sandbox;
* per execution: one trivial cell through the protocol, against the cell's own run time
  inside the worker;
* the memory sampler, where no cgroup bounds the session (ordinary users): the host's CPU
  time per second of an idle session with ten processes to walk, and the per-execution
  overhead with it running (as root, the cgroup plan is the baseline);
* ``llm_batch`` of 16 prompts from code in the REPL, answered by the OpenAI-compatible
  engine adapter against the stub server with 250 ms of latency per completion, against
  one ``llm_query`` (the default concurrency of 16, and 8).
"""

from __future__ import annotations

import asyncio
import resource
import statistics
import sys
import time
from dataclasses import replace

from bench.common import BenchContext, Row, stub_process
from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine
from jarvis.adapters.subprocess_repl import SubprocessRepl
from jarvis.domain.loop.sub_calls import SubModelCallbacks

LATENCY = 0.25
_HOLDERS = (
    "import os, time\nfor _ in range(8):\n    if os.fork() == 0:\n"
    "        b = bytearray(10 << 20)\n        b[::4096] = b'x' * len(b[::4096])\n"
    "        time.sleep(600)\n'held'"
)
"""Eight idle processes of 10 MB each: what the sampler walks every interval."""


def _sampled(repl: SubprocessRepl) -> SubprocessRepl:
    """``repl`` with its session memory sampled: as is for an ordinary user; as root, the
    plan root gets where no cgroup can be made."""
    plan = repl.plan()
    if plan.cgroups is None:
        return repl
    sampled = SubprocessRepl()
    sampled._plan = replace(plan, cgroups=None)
    return sampled


async def _idle_cpu(repl: SubprocessRepl, seconds: float) -> float:
    """The host's CPU seconds per second while a session with ten processes sits idle."""
    session = await repl.start()
    try:
        result = await session.execute(_HOLDERS)
        if not result.ok:
            raise RuntimeError(f"the holders did not start: {result.error}")
        before = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        await asyncio.sleep(seconds)
        after = resource.getrusage(resource.RUSAGE_SELF)
        elapsed = time.perf_counter() - started
    finally:
        await session.aclose()
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used / elapsed


async def _bare_python(python: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(python, "-I", "-S", "-c", "pass")
        await process.wait()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def _startup(repl: SubprocessRepl, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        session = await repl.start()
        times.append(time.perf_counter() - started)
        await session.aclose()
    return statistics.median(times)


async def _per_execution(repl: SubprocessRepl, runs: int) -> tuple[float, float]:
    session = await repl.start()
    try:
        for _ in range(20):
            await session.execute("x = 1")
        walls, inside = [], []
        for n in range(runs):
            started = time.perf_counter()
            result = await session.execute(f"x = {n}\nx + 1")
            walls.append(time.perf_counter() - started)
            inside.append(result.duration_seconds)
        return statistics.median(walls), statistics.median(inside)
    finally:
        await session.aclose()


async def _batch(repl: SubprocessRepl, url: str, concurrency: int, code: str) -> float:
    engine = OpenAICompatibleEngine(url)
    callbacks = SubModelCallbacks(
        generate=engine.generate, model="stub-model", max_concurrency=concurrency
    )
    session = await repl.start(callbacks=callbacks)
    try:
        await session.execute("llm_query('warm up')")
        started = time.perf_counter()
        result = await session.execute(code)
        elapsed = time.perf_counter() - started
        if not result.ok:
            raise RuntimeError(f"the batch failed: {result.error}")
        return elapsed
    finally:
        await session.aclose()
        await engine.aclose()


async def run(ctx: BenchContext) -> list[Row]:
    repl = SubprocessRepl()
    plan = repl.plan().name
    _ = repl.python  # the one-off probes are not start-up time
    runs = 5 if ctx.quick else 20
    bare = await _bare_python(repl.python, runs)
    startup = await _startup(repl, runs)
    wall, inside = await _per_execution(repl, 50 if ctx.quick else 300)
    sampled = _sampled(repl)
    sampled_wall, sampled_inside = await _per_execution(sampled, 50 if ctx.quick else 300)
    idle = 1.0 if ctx.quick else 5.0
    sampler_cpu = await _idle_cpu(sampled, idle)
    plain_cpu = await _idle_cpu(repl, idle) if sampled is not repl else None
    if sampled is not repl:
        sampled.close()
    batch = "answers = llm_batch([f'question {i}' for i in range(16)])\nlen(answers)"
    with stub_process("--latency", str(LATENCY)) as url:
        single = await _batch(repl, url, 16, "llm_query('one question')")
        default = await _batch(repl, url, 16, batch)
        narrow = await _batch(repl, url, 8, batch)
    return [
        Row(
            name=f"REPL start-up ({plan} sandbox)",
            value=startup * 1000,
            unit="ms",
            baseline=bare * 1000,
            baseline_name="bare python -I -S",
            goal="<= 150 ms",
            ok=startup <= 0.150,
        ),
        Row(
            name="REPL overhead per execution",
            value=(wall - inside) * 1000,
            unit="ms",
            baseline=wall * 1000,
            baseline_name="whole trivial cell",
            goal="<= 5 ms",
            ok=wall - inside <= 0.005,
            note="protocol round trip minus the cell's own run time",
        ),
        Row(
            name="REPL memory sampler: host CPU per second of session (no cgroup)",
            value=sampler_cpu * 1000,
            unit="ms",
            baseline=None if plain_cpu is None else plain_cpu * 1000,
            baseline_name="the same session in a cgroup",
            goal="<= 20 ms",
            ok=sampler_cpu <= 0.020,
            note="ten processes in the sandbox, sampled every 25 ms",
        ),
        Row(
            name="REPL overhead per execution (memory sampled, no cgroup)",
            value=(sampled_wall - sampled_inside) * 1000,
            unit="ms",
            baseline=(wall - inside) * 1000,
            baseline_name="the plan in force",
            goal="<= 5 ms",
            ok=sampled_wall - sampled_inside <= 0.005,
        ),
        Row(
            name="llm_batch of 16, 250 ms stub (16 concurrent, default)",
            value=default,
            unit="s",
            baseline=single,
            baseline_name="one llm_query",
            goal="<= 0.6 s",
            ok=default <= 0.6,
        ),
        Row(
            name="llm_batch of 16, 250 ms stub (sub_concurrency=8)",
            value=narrow,
            unit="s",
            baseline=single,
            baseline_name="one llm_query",
            goal="<= 0.6 s",
            ok=narrow <= 0.6,
        ),
    ]


def main() -> None:
    quick = "--quick" in sys.argv
    rows = asyncio.run(run(BenchContext(stub_url="", quick=quick)))
    for row in rows:
        figure = f"{row.value:.3f} {row.unit}" if row.unit == "s" else f"{row.value:.2f} {row.unit}"
        base = ""
        if row.baseline is not None:
            unit = row.unit
            base = f" (baseline {row.baseline_name}: {row.baseline:.3f} {unit})"
        verdict = "" if row.ok is None else (" ok" if row.ok else " MISSED")
        print(f"{row.name}: {figure}{base} goal {row.goal}{verdict}")


if __name__ == "__main__":
    main()
