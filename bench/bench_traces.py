"""Tracing on vs off: what recording a run costs.

* client CPU per two-call tool run (call → calculator → answer) through ``Jarvis.aask_full``
  against the loopback stub, with ``[traces] enabled`` vs without; the CPU of the thread
  that writes the trace to SQLite is counted (read by that thread's own CPU clock and
  charged to the traced runs, whichever block it happened to wake in);
* the same difference per span (a two-call run is 4 spans: the run, two inferences, one
  tool call);
* ``jarvis ask`` start-up (wall and CPU of the whole process) with tracing on vs off.

Goals: ≤ 3 % added CPU per tool run, ≤ 50 µs per span, start-up unchanged.
Run alone with ``python -m bench.bench_traces [--quick]``, or by ``python -m bench.run``;
``--breakdown`` shows where the added CPU goes (the steps recorded, the writer).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.common import BenchContext, Row, stub_process, time_processes

QUESTION = "What is 2+2? Use the calculator."
SPANS_PER_RUN = 4


def _config(folder: Path, url: str, *, traces: bool) -> Path:
    path = folder / ("on.toml" if traces else "off.toml")
    path.write_text(
        f'[engine]\nname = "openai"\nmodel = "stub-model"\n[engine.openai]\nbase_url = "{url}"\n'
        f"[traces]\nenabled = {'true' if traces else 'false'}\n"
        f'db_path = "{folder / "traces.db"}"\n',
        encoding="utf-8",
    )
    return path


class _WriterCpu:
    """The CPU of the trace writer's thread (``jarvis-traces``), read by that thread's own
    clock. The thread writes when its batch is due (every 0.5 s), in whichever block is
    being timed then: the bench takes its CPU out of that block and charges all of it to
    the traced runs, which it wrote for."""

    def __init__(self) -> None:
        self._clocks: list[int] = []

    def find(self) -> None:
        self._clocks = [
            time.pthread_getcpuclockid(thread.ident)
            for thread in threading.enumerate()
            if thread.name == "jarvis-traces" and thread.ident is not None
        ]
        assert self._clocks, "no trace writer thread"

    def __call__(self) -> float:
        return sum(time.clock_gettime(clock) for clock in self._clocks)


async def _per_run(
    call: Callable[[], Awaitable[object]], n: int, writer: Callable[[], float] = lambda: 0.0
) -> float:
    """CPU per call of ``n`` calls (the process's, less what ``writer``'s thread used)."""
    cpu, thread = time.process_time(), writer()
    for _ in range(n):
        await call()
    return (time.process_time() - cpu - (writer() - thread)) / n


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    low, mid, high = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return low, mid, high


async def tool_run_rows(ctx: BenchContext) -> list[Row]:
    from jarvis import Jarvis

    # many short blocks, on and off in alternating order (ABBA): a machine loaded by other
    # work slows blocks at random, and the median of many paired blocks stays put
    n, blocks = (20, 6) if ctx.quick else (20, 150)
    writer_cpu = _WriterCpu()
    with tempfile.TemporaryDirectory() as folder:
        off_config = _config(Path(folder), ctx.stub_url, traces=False)
        on_config = _config(Path(folder), ctx.stub_url, traces=True)
        async with Jarvis(config_path=off_config) as off, Jarvis(config_path=on_config) as on:

            async def untraced() -> object:
                return await off.aask_full(QUESTION, agent="orchestrator", tools=["calculator"])

            async def traced() -> object:
                return await on.aask_full(QUESTION, agent="orchestrator", tools=["calculator"])

            writer = on._runtime.trace_writer()
            assert writer is not None
            await _per_run(untraced, 50)
            await _per_run(traced, 50)
            writer.flush()
            writer_cpu.find()
            off_cpu, on_cpu = [], []
            written = writer_cpu()
            for block in range(blocks):
                if block % 2:
                    on_cpu.append(await _per_run(traced, n, writer_cpu))
                    off_cpu.append(await _per_run(untraced, n, writer_cpu))
                else:
                    off_cpu.append(await _per_run(untraced, n, writer_cpu))
                    on_cpu.append(await _per_run(traced, n, writer_cpu))
            writer.flush()
            per_trace = (writer_cpu() - written) / (n * blocks)
            from jarvis.adapters.sqlite_traces import SqliteTraceStore
            from jarvis.domain.traces import TraceQuery

            recorded = len(
                SqliteTraceStore(Path(folder) / "traces.db").list(TraceQuery(limit=10**6))
            )
    assert recorded >= n * blocks, recorded  # every traced run was written
    on_cpu = [cpu + per_trace for cpu in on_cpu]
    cpu_off, cpu_on = statistics.median(off_cpu), statistics.median(on_cpu)
    low, added, high = _quartiles([b / a - 1 for a, b in zip(off_cpu, on_cpu, strict=True)])
    per_span = max(cpu_on - cpu_off, 0.0) / SPANS_PER_RUN
    load = os.getloadavg()[0]
    return [
        Row(
            name="two-call tool run, client CPU, tracing on",
            value=cpu_on * 1000,
            unit="ms",
            baseline=cpu_off * 1000,
            baseline_name="tracing off",
            goal="≤ 3 % added",
            ok=added <= 0.03,
            note=f"{added * 100:+.1f} % (quartiles {low * 100:+.1f} to {high * 100:+.1f} %), "
            f"median of {blocks} paired blocks of {n} runs, alternating; the writer thread's "
            f"{per_trace * 1e6:.1f} µs a run included; load average {load:.1f}",
        ),
        Row(
            name="tracing, CPU per span",
            value=per_span * 1e6,
            unit="µs",
            goal="≤ 50 µs",
            ok=per_span <= 50e-6,
            note=f"(on - off) / {SPANS_PER_RUN} spans of a two-call run, medians",
        ),
    ]


async def breakdown_rows(ctx: BenchContext) -> list[Row]:
    """Where the added CPU goes: the same run with its events published (a subscriber that
    does nothing: what recording from events would pay before recording anything), with
    its steps recorded and dropped, and fully traced (the writer's thread charged as in
    :func:`tool_run_rows`): one process, the variants' blocks in rotating order."""
    from jarvis import Jarvis
    from jarvis.application.traces import run_recording

    n, blocks = (20, 4) if ctx.quick else (20, 80)
    writer_cpu = _WriterCpu()
    with tempfile.TemporaryDirectory() as folder:
        off_config = _config(Path(folder), ctx.stub_url, traces=False)
        on_config = _config(Path(folder), ctx.stub_url, traces=True)
        variants = ("tracing off", "events only", "+ steps recorded", "+ writer (all)")
        async with contextlib.AsyncExitStack() as stack:
            runs: dict[str, Callable[[], Awaitable[object]]] = {}
            for name in variants:
                config = on_config if name == "+ writer (all)" else off_config
                jarvis = await stack.enter_async_context(Jarvis(config_path=config))
                if name == "events only":
                    jarvis._runtime.bus().subscribe(lambda event: None)
                elif name == "+ steps recorded":
                    jarvis._runtime.bus().record_with(run_recording(lambda log: None))

                def ask(jarvis: Jarvis = jarvis) -> Awaitable[object]:
                    return jarvis.aask_full(QUESTION, agent="orchestrator", tools=["calculator"])

                runs[name] = ask
                await _per_run(ask, 30)
            writer = jarvis._runtime.trace_writer()  # the last one's: tracing on
            assert writer is not None
            writer.flush()
            writer_cpu.find()
            written = writer_cpu()
            cpu: dict[str, list[float]] = {name: [] for name in runs}
            names = list(runs)
            for block in range(blocks):
                order = names[block % len(names) :] + names[: block % len(names)]
                for name in reversed(order) if (block // len(names)) % 2 else order:
                    cpu[name].append(await _per_run(runs[name], n, writer_cpu))
            writer.flush()
            per_trace = (writer_cpu() - written) / (n * blocks)
    cpu["+ writer (all)"] = [c + per_trace for c in cpu["+ writer (all)"]]
    off = statistics.median(cpu["tracing off"])
    return [
        Row(
            name=f"tracing breakdown: {name}",
            value=(statistics.median(values) - off) * 1e6,
            unit="µs",
            note=f"{statistics.median(values) / off * 100 - 100:+.1f} % of the untraced run "
            f"({off * 1e6:.0f} µs); median of {blocks} blocks of {n}"
            + (f"; the writer thread {per_trace * 1e6:.1f} µs a run" if "writer" in name else ""),
        )
        for name, values in cpu.items()
        if name != "tracing off"
    ]


def _insert_cpu(folder: Path, kept: int, batches: int, ids: Callable[[float], str]) -> float:
    """Thread CPU per trace to insert ``batches`` batches of 500 into a store that holds
    ``kept`` traces of the 30 days before (each trace a two-call run's record)."""
    from contracts.trace_store_contract import recorded_steps
    from jarvis.adapters.sqlite_traces import SqliteTraceStore
    from jarvis.adapters.sqlite_traces.record import encode_steps

    trace = recorded_steps()
    store = SqliteTraceStore(folder / "store.db")
    now = time.time()
    past = now - 30 * 86_400

    def record(at: float) -> tuple[str, str, float, int, int, str]:
        return encode_steps((ids(at), at, *trace[2:]))

    store.save_records([record(past + n * 30 * 86_400 / kept) for n in range(kept)])
    cpu: list[float] = []
    for batch in range(batches):
        records = [record(now + batch * 0.5 + n * 0.001) for n in range(500)]
        started = time.thread_time()
        store.save_records(records)
        cpu.append((time.thread_time() - started) / 500)
    store.close()
    return statistics.median(cpu)


def store_rows(ctx: BenchContext) -> list[Row]:
    """What the trace ids' first digits (the time window they were drawn in) save a large
    store, against ids all random: the insert's CPU in the writer's thread."""
    import random

    from jarvis.domain.run.steps import WINDOW_SECONDS

    kept, batches = (10_000, 4) if ctx.quick else (100_000, 20)
    source = random.Random(0)

    def windowed(at: float) -> str:
        return f"{int(at) // WINDOW_SECONDS % 0x10000:04x}{source.getrandbits(112):028x}"

    def random_ids(at: float) -> str:
        return f"{source.getrandbits(128):032x}"

    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as other:
        cpu = _insert_cpu(Path(one), kept, batches, windowed)
        baseline = _insert_cpu(Path(other), kept, batches, random_ids)
    return [
        Row(
            name=f"trace store insert, {kept:,} traces kept",
            value=cpu * 1e6,
            unit="µs",
            baseline=baseline * 1e6,
            baseline_name="random ids",
            note=f"CPU a trace, batches of 500; median of {batches} batches",
        )
    ]


def startup_rows(ctx: BenchContext) -> list[Row]:
    runs = 3 if ctx.quick else 15
    with tempfile.TemporaryDirectory() as folder:
        home_off = Path(folder) / "off"
        home_on = Path(folder) / "on"
        for home, tracing in ((home_off, False), (home_on, True)):
            home.mkdir()
            (home / "config.toml").write_text(
                '[agent]\ndefault = "simple"\n[traces]\n'
                f"enabled = {'true' if tracing else 'false'}\n",
                encoding="utf-8",
            )
        command = ctx.jarvis_command("ask", "--base-url", ctx.stub_url, "-m", "stub-model", "hi")
        timings = time_processes(
            {
                "off": (command, {**ctx.env, "OPENJARVIS_HOME": str(home_off)}),
                "on": (command, {**ctx.env, "OPENJARVIS_HOME": str(home_on)}),
            },
            runs=runs,
        )
        assert (home_on / "traces.db").exists()
    off, on = timings["off"], timings["on"]
    return [
        Row(
            name="jarvis ask, tracing on (whole process)",
            value=on.median,
            unit="s",
            baseline=off.median,
            baseline_name="tracing off",
            goal="unchanged",
            note=f"median of {runs}, interleaved; CPU {on.cpu_median:.3f} s vs "
            f"{off.cpu_median:.3f} s",
        )
    ]


async def run(ctx: BenchContext) -> list[Row]:
    return [*await tool_run_rows(ctx), *startup_rows(ctx), *store_rows(ctx)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--breakdown", action="store_true", help="where the added CPU goes, instead of the rows"
    )
    args = parser.parse_args()
    with stub_process() as url:
        ctx = BenchContext(stub_url=url, quick=args.quick, env=dict(os.environ))
        rows = asyncio.run(breakdown_rows(ctx) if args.breakdown else run(ctx))
    for row in rows:
        ratio = "" if row.ratio is None else f"  ({row.ratio:.3f}x {row.baseline_name})"
        print(f"{row.name}: {row.value:.3f} {row.unit}{ratio}  {row.goal}  {row.note}")


if __name__ == "__main__":
    main()
