"""Tracing on vs off: what recording a run costs.

* client CPU per two-call tool run (call → calculator → answer) through ``Jarvis.aask_full``
  against the loopback stub, with ``[traces] enabled`` vs without, the two alternating run
  by run; the CPU of the thread that writes the trace to SQLite is counted (read by that
  thread's own clock and charged to the traced runs, whichever run it happened to wake in);
* what the writer's thread costs the event loop besides its own CPU (the GIL, caches, the
  core it shares), which the difference of alternating runs cannot see: the loop's CPU in
  windows of untraced runs while a trace writer writes a batch, against windows while it
  wakes to none. The goal is judged on the sum;
* the added CPU per span (a two-call run is 4 spans: the run, two inferences, one tool
  call);
* ``jarvis ask`` start-up (wall and CPU of the whole process) with tracing on vs off.

Goals: ≤ 3 % added CPU per tool run, ≤ 50 µs per span, start-up unchanged.
Run alone with ``python -m bench.bench_traces [--quick]``, or by ``python -m bench.run``;
``--breakdown`` shows where the added CPU goes (the steps recorded, the writer); ``--check``
measures the methods themselves: the same untraced run on both sides (it should find 0),
then with a known 25 µs of CPU added to one side's runs (it should find 25 µs); the
writer's effect with no batch written (0), and with 5 µs a trace added (5 µs).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, cast

from bench.common import BenchContext, Row, stub_process, time_processes

if TYPE_CHECKING:
    from jarvis import Jarvis
    from jarvis.domain.run.steps import TraceSteps

QUESTION = "What is 2+2? Use the calculator."
SPANS_PER_RUN = 4


def _tool_run(jarvis: Jarvis) -> Callable[[], Awaitable[object]]:
    """One two-call tool run of ``jarvis``'s (call → calculator → answer) a call."""
    return partial(jarvis.aask_full, QUESTION, agent="orchestrator", tools=["calculator"])


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


async def _alternating(
    first: Callable[[], Awaitable[object]],
    second: Callable[[], Awaitable[object]],
    n: int,
    block: int,
    writer: Callable[[], float] = lambda: 0.0,
) -> tuple[float, float]:
    """CPU per call of ``first`` and of ``second``, ``n`` calls of each, alternating call by
    call (``second`` first in an odd ``block``): each call's process CPU, less what
    ``writer``'s thread used meanwhile.

    Why call by call, not in blocks of each: the CPU a run takes moves by about 10 % from
    one moment to the next here (a 2-vCPU machine whose caches the stub's process and
    other guests share). Blocks of 20 runs of each, one block after the other, gave paired
    ratios with quartiles 14-15 points apart (-4 to +11 %), and medians that moved by a
    point between runs of the bench; calls that alternate meet the same moments, and the
    quartiles come 4-5 points apart. ``--check`` measures what the method finds.
    """
    cpu = [0.0, 0.0]
    clock = time.process_time
    for call in range(2 * n):
        which = (call + block) % 2
        started, thread = clock(), writer()
        await (second() if which else first())
        cpu[which] += clock() - started - (writer() - thread)
    return cpu[0] / n, cpu[1] / n


async def _blocks(
    first: Callable[[], Awaitable[object]],
    second: Callable[[], Awaitable[object]],
    n: int,
    blocks: int,
    writer: Callable[[], float] = lambda: 0.0,
) -> tuple[list[float], list[float]]:
    """The CPU per call of each side in each of ``blocks`` blocks of :func:`_alternating`."""
    firsts: list[float] = []
    seconds: list[float] = []
    for block in range(blocks):
        one, other = await _alternating(first, second, n, block, writer)
        firsts.append(one)
        seconds.append(other)
    return firsts, seconds


def _added(off_cpu: list[float], on_cpu: list[float]) -> tuple[float, float, float, float]:
    """The added CPU's median over the blocks and its quartiles, and that of the sums."""
    low, added, high = _quartiles([b / a - 1 for a, b in zip(off_cpu, on_cpu, strict=True)])
    return low, added, high, sum(on_cpu) / sum(off_cpu) - 1


async def tool_run_rows(
    ctx: BenchContext, writer_effect: Callable[[], Awaitable[Row]] | None = None
) -> list[Row]:
    """The added CPU of a traced run; ``writer_effect`` (:func:`writer_effect_row`,
    measured after the runs, which a process that made its many traces before would slow)
    is what the writer's thread costs the loop besides, which the difference of alternating
    runs cannot see: the goal is judged on the sum."""
    from jarvis import Jarvis

    # many short blocks of runs on and off, alternating run by run (see _alternating); a
    # machine loaded by other work slows moments at random, which both sides meet
    n, blocks = (20, 6) if ctx.quick else (20, 150)
    writer_cpu = _WriterCpu()
    with tempfile.TemporaryDirectory() as folder:
        off_config = _config(Path(folder), ctx.stub_url, traces=False)
        on_config = _config(Path(folder), ctx.stub_url, traces=True)
        async with Jarvis(config_path=off_config) as off, Jarvis(config_path=on_config) as on:
            untraced, traced = _tool_run(off), _tool_run(on)
            writer = on._runtime.trace_writer()
            assert writer is not None
            await _per_run(untraced, 50)
            await _per_run(traced, 50)
            writer.flush()
            writer_cpu.find()
            written = writer_cpu()
            off_cpu, on_cpu = await _blocks(untraced, traced, n, blocks, writer_cpu)
            writer.flush()
            per_trace = (writer_cpu() - written) / (n * blocks)
            from jarvis.adapters.sqlite_traces import SqliteTraceStore
            from jarvis.domain.traces import TraceQuery

            recorded = len(
                SqliteTraceStore(Path(folder) / "traces.db").list(TraceQuery(limit=10**6))
            )
    assert recorded >= n * blocks, recorded  # every traced run was written
    effect = None if writer_effect is None else await writer_effect()
    share = effect.value / effect.baseline if effect and effect.baseline else 0.0
    on_cpu = [cpu + per_trace for cpu in on_cpu]
    cpu_off, cpu_on = statistics.median(off_cpu), statistics.median(on_cpu)
    low, added, high, summed = _added(off_cpu, on_cpu)
    per_span = max(cpu_on - cpu_off + share * cpu_off, 0.0) / SPANS_PER_RUN
    load = os.getloadavg()[0]
    return [
        Row(
            name="two-call tool run, client CPU, tracing on",
            value=cpu_on * 1000,
            unit="ms",
            baseline=cpu_off * 1000,
            baseline_name="tracing off",
            goal="≤ 3 % added",
            ok=added + share <= 0.03,
            note=f"{(added + share) * 100:+.1f} % with the writer's effect on the loop "
            f"({share * 100:+.1f} %, the row below); the runs alone "
            f"{added * 100:+.1f} % (quartiles {low * 100:+.1f} to {high * 100:+.1f} %; of "
            f"the sums {summed * 100:+.1f} %), median of {blocks} blocks of {n} runs of "
            f"each, alternating run by run; the writer thread's {per_trace * 1e6:.1f} µs a "
            f"run included; load average {load:.1f}",
        ),
        Row(
            name="tracing, CPU per span",
            value=per_span * 1e6,
            unit="µs",
            goal="≤ 50 µs",
            ok=per_span <= 50e-6,
            note=f"(on - off + the writer's effect) / {SPANS_PER_RUN} spans of a two-call run",
        ),
        *([] if effect is None else [effect]),
    ]


BATCH_TRACES = 450
"""The traces of one batch in :func:`writer_effect_row`: what the writer's thread is
handed in its 0.5 s between batches while traced runs follow each other here."""
WINDOW_RUNS = 30
"""The untraced runs timed after each batch (or no batch) in :func:`writer_effect_row`,
at least: the batch is written within the first few of them here, and a window lasts
until it is (the other window's CPU is then scaled to as many runs)."""


async def writer_effect_row(ctx: BenchContext, *, known: float = 0.0, batches: bool = True) -> Row:
    """What the trace writer's thread costs the event loop, which the alternating runs of
    :func:`tool_run_rows` cannot see: its batches land in both sides' runs, so its effect
    on the loop (whatever its cause: the GIL, the caches and cores they share) is taken out
    with the difference. Here, in pairs of windows of :data:`WINDOW_RUNS` untraced runs,
    the loop's own CPU (its thread's clock): in one, a trace writer with a SQLite store
    writes a batch of :data:`BATCH_TRACES` two-call runs' traces (distinct objects, made
    and handed over before the window, its write started as the window starts); in the
    other, the same traces are made and dropped and the writer wakes to an empty batch.
    The effect a trace is the median of the pairs' differences over the batch's traces.

    Why not phases of seconds with the writer busy and idle (as this bench did): the CPU a
    run takes here drifts by a few percent from one second to the next, and four runs of
    that measure gave +1.07, +0.41, -0.45 and +1.45 % for the same writer (paired phases
    were no steadier). A batch lands on a window of 35 ms, and the windows of a pair are
    adjacent. ``--check`` measures the method: no batch on either side (``batches``
    false: it should find 0), and ``known`` seconds a trace of loop CPU added to the
    batch's window (it should find that much)."""
    from contracts.trace_store_contract import recorded_steps
    from jarvis import Jarvis
    from jarvis.adapters.sqlite_traces import SqliteTraceStore
    from jarvis.application.trace_writer import TraceWriter

    rounds = 6 if ctx.quick else 200
    _, _, remote, dropped, steps, mask = recorded_steps()
    made = 0

    def traces() -> list[TraceSteps]:
        nonlocal made
        batch: list[TraceSteps] = []
        for _ in range(BATCH_TRACES):
            made += 1
            moved = tuple(
                (step[0], cast(float, step[1]) + made * 1e-6, *step[2:]) for step in steps
            )
            batch.append((f"{made:032x}", time.time(), remote, dropped, moved, mask))
        return batch

    differences: list[float] = []
    idle: list[float] = []
    late = 0
    with tempfile.TemporaryDirectory() as folder:
        config = _config(Path(folder), ctx.stub_url, traces=False)
        store = SqliteTraceStore(Path(folder) / "traces.db")
        writer = TraceWriter(lambda: store, notice=print)
        writer.start()
        async with Jarvis(config_path=config) as jarvis:
            tool_run = _tool_run(jarvis)
            await _per_run(tool_run, 50)
            for turn in range(rounds + 2):  # the first two warm the store and the writer up
                cpu: dict[bool, float] = {}
                runs: dict[bool, int] = {}
                for writing in (False, True) if turn % 2 else (True, False):
                    batch = traces()
                    if writing and batches:
                        for trace in batch:
                            writer.hand_over(trace)
                    del batch
                    flush = threading.Thread(target=writer.flush)
                    flush.start()  # the writer wakes now, to its batch or to none
                    started = time.thread_time()
                    if writing and known:
                        _spend(known * BATCH_TRACES)
                    runs[writing] = 0
                    while runs[writing] < WINDOW_RUNS or flush.is_alive():
                        await tool_run()  # a window lasts until the batch is written
                        runs[writing] += 1
                    cpu[writing] = time.thread_time() - started
                    flush.join()
                if turn >= 2:
                    late += runs[True] > WINDOW_RUNS
                    # the idle window's CPU for as many runs as the batch's window took
                    expected = cpu[False] / runs[False] * runs[True]
                    differences.append((cpu[True] - expected) / BATCH_TRACES)
                    idle.append(cpu[False] / runs[False])
        writer.close()
    low, effect, high = _quartiles(differences)
    run_cpu = statistics.median(idle)
    return Row(
        name="tracing, the writer's effect on the loop",
        value=effect * 1e6,
        unit="µs",
        baseline=run_cpu * 1e6,
        baseline_name="the loop's CPU a run",
        note=f"a trace: {effect / run_cpu * 100:+.2f} % of the loop's CPU a run "
        f"({run_cpu * 1e6:.0f} µs) "
        f"(quartiles {low * 1e6:+.1f} to {high * 1e6:+.1f} µs); median of {rounds} pairs "
        f"of windows of {WINDOW_RUNS} runs, one with a batch of {BATCH_TRACES} traces "
        f"written ({late} of them longer: until their batch was written)",
    )


def _spend(seconds: float) -> None:
    """``seconds`` of this thread's CPU, spent (what the method checks should find)."""
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


KNOWN_SECONDS = 25e-6
"""The CPU :func:`check_rows` adds to one side's runs, for the method to find."""
KNOWN_EFFECT = 5e-6
"""The loop CPU a trace :func:`check_rows` adds to the windows of the writer's batches."""


async def check_rows(ctx: BenchContext) -> list[Row]:
    """The method of :func:`tool_run_rows` measured: two untraced clients, the same run on
    both sides (it should find nothing added), then :data:`KNOWN_SECONDS` of CPU spent after
    each run of one side (it should find that much)."""
    from jarvis import Jarvis

    n, blocks = (20, 6) if ctx.quick else (20, 150)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        config = _config(Path(folder), ctx.stub_url, traces=False)
        async with Jarvis(config_path=config) as one, Jarvis(config_path=config) as other:
            first, second = _tool_run(one), _tool_run(other)

            async def second_and_known() -> object:
                answer = await second()
                _spend(KNOWN_SECONDS)
                return answer

            await _per_run(first, 50)
            await _per_run(second, 50)
            for name, known, call in (
                ("the same run on both sides", 0.0, second),
                (
                    f"{KNOWN_SECONDS * 1e6:.0f} µs added to one side",
                    KNOWN_SECONDS,
                    second_and_known,
                ),
            ):
                off_cpu, on_cpu = await _blocks(first, call, n, blocks)
                low, added, high, summed = _added(off_cpu, on_cpu)
                off = statistics.median(off_cpu)
                found = statistics.median([b - a for a, b in zip(off_cpu, on_cpu, strict=True)])
                rows.append(
                    Row(
                        name=f"method check: {name}",
                        value=found * 1e6,
                        unit="µs",
                        note=f"to find {known * 1e6:.0f} µs ({known / off * 100:+.1f} %): "
                        f"{added * 100:+.2f} % (quartiles {low * 100:+.1f} to "
                        f"{high * 100:+.1f} %; of the sums {summed * 100:+.2f} %); the run "
                        f"{off * 1e6:.0f} µs",
                    )
                )
    for name, added in (
        ("no batch on either side", 0.0),
        (f"{KNOWN_EFFECT * 1e6:.0f} µs a trace added to the batch's window", KNOWN_EFFECT),
    ):
        effect = await writer_effect_row(ctx, known=added, batches=False)
        rows.append(
            dataclasses.replace(
                effect,
                name=f"method check, the writer's effect: {name}",
                note=f"to find {added * 1e6:.0f} µs a trace; {effect.note}",
            )
        )
    return rows


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
                runs[name] = _tool_run(jarvis)
                await _per_run(runs[name], 30)
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


def _store_cpu(
    folder: Path, kept: int, batches: int, ids: Callable[[float], str]
) -> tuple[float, float, float, float, float]:
    """Thread CPU per trace, in a store holding ``kept`` traces of the 30 days before (each
    a two-call run's record), as rows: to save ``batches`` batches of 500 records (each
    one row), to expand them into rows at the next read, and to insert the same batches a
    row a trace with ``executemany`` on a connection of its own (the raw baseline); then
    what the trace writer's thread does with a batch of 500 recorded runs, to save their
    steps (:meth:`~jarvis.adapters.sqlite_traces.SqliteTraceStore.save_steps`, one row)
    against to make each run's record and save them (as it did before)."""
    import sqlite3

    from contracts.trace_store_contract import recorded_steps
    from jarvis.adapters.sqlite_traces import SqliteTraceStore
    from jarvis.adapters.sqlite_traces.record import encode_steps
    from jarvis.domain.traces import TraceQuery

    trace = recorded_steps()
    store = SqliteTraceStore(folder / "store.db")
    now = time.time()
    past = now - 30 * 86_400

    def record(at: float) -> tuple[str, str, float, int, int, str]:
        return encode_steps((ids(at), at, *trace[2:]))

    store.save_records([record(past + n * 30 * 86_400 / kept) for n in range(kept)])
    store.list(TraceQuery(limit=1))  # the kept traces become rows
    batched = [[record(now + b * 0.5 + n * 0.001) for n in range(500)] for b in range(batches)]
    cpu: list[float] = []
    for records in batched:
        started = time.thread_time()
        store.save_records(records)
        cpu.append((time.thread_time() - started) / 500)
    started = time.thread_time()
    store.list(TraceQuery(limit=1))
    expand = (time.thread_time() - started) / (500 * batches)
    store.close()
    rows: list[float] = []
    with contextlib.closing(sqlite3.connect(folder / "store.db", isolation_level=None)) as db:
        for records in batched:
            again = [(f"{r[0][:-1]}x", *r[1:]) for r in records]  # new ids, same windows
            started = time.thread_time()
            with db:
                db.execute("BEGIN")
                db.executemany(
                    "INSERT INTO jarvis_traces (trace_id, agent, start, failed, size, record)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    again,
                )
            rows.append((time.thread_time() - started) / 500)
    store = SqliteTraceStore(folder / "store.db")
    runs = [
        [(ids(now), now + b * 0.5 + n * 0.001, *trace[2:]) for n in range(500)]
        for b in range(batches)
    ]
    steps_cpu: list[float] = []
    records_cpu: list[float] = []
    for batch in runs:
        started = time.thread_time()
        store.save_steps(batch)
        steps_cpu.append((time.thread_time() - started) / 500)
        renamed = [(f"{run[0][:-1]}y", *run[1:]) for run in batch]
        started = time.thread_time()
        store.save_records([encode_steps(run) for run in renamed])
        records_cpu.append((time.thread_time() - started) / 500)
    store.close()
    return (
        statistics.median(cpu),
        expand,
        statistics.median(rows),
        statistics.median(steps_cpu),
        statistics.median(records_cpu),
    )


def store_rows(ctx: BenchContext) -> list[Row]:
    """The trace store's CPU a trace in the writer's thread (a batch saved as one row,
    against a row a trace), and at the first read after it (the batches expanded into
    rows), where the trace ids' first digits (the time window they were drawn in) save a
    large store's index the cost that ids all random put on it."""
    import random

    from jarvis.domain.run.steps import WINDOW_SECONDS

    kept, batches = (10_000, 4) if ctx.quick else (100_000, 20)
    source = random.Random(0)

    def windowed(at: float) -> str:
        return f"{int(at) // WINDOW_SECONDS % 0x10000:04x}{source.getrandbits(112):028x}"

    def random_ids(at: float) -> str:
        return f"{source.getrandbits(128):032x}"

    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as other:
        insert, expand, rows, steps, records = _store_cpu(Path(one), kept, batches, windowed)
        _, expand_random, *_ = _store_cpu(Path(other), kept, batches, random_ids)
    note = f"CPU a trace, {kept:,} traces kept, batches of 500"
    saved = f"{note}; median of {batches} batches"
    return [
        Row(
            name=name, value=value * 1e6, unit="µs", baseline=base * 1e6, baseline_name=of, note=why
        )
        for name, value, base, of, why in (
            ("trace store save, a batch as one row", insert, rows, "a row a trace", saved),
            (
                "trace store save, the runs' steps (the trace writer's thread)",
                steps,
                records,
                "each run's record made and saved",
                saved,
            ),
            (
                "trace store first read, the batches expanded",
                expand,
                expand_random,
                "random ids",
                f"{note}; {batches} batches at once",
            ),
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
    tool_rows = await tool_run_rows(ctx, partial(writer_effect_row, ctx))
    return [*tool_rows, *startup_rows(ctx), *store_rows(ctx)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--breakdown", action="store_true", help="where the added CPU goes, instead of the rows"
    )
    parser.add_argument(
        "--check", action="store_true", help="what the method finds where the answer is known"
    )
    parser.add_argument(
        "--writer-effect",
        action="store_true",
        help="what the writer's thread costs the event loop (the method's blind spot)",
    )
    args = parser.parse_args()
    with stub_process() as url:
        ctx = BenchContext(stub_url=url, quick=args.quick, env=dict(os.environ))
        if args.check:
            rows = asyncio.run(check_rows(ctx))
        elif args.writer_effect:
            rows = [asyncio.run(writer_effect_row(ctx))]
        else:
            rows = asyncio.run(breakdown_rows(ctx) if args.breakdown else run(ctx))
    for row in rows:
        ratio = "" if row.ratio is None else f"  ({row.ratio:.3f}x {row.baseline_name})"
        print(f"{row.name}: {row.value:.3f} {row.unit}{ratio}  {row.goal}  {row.note}")


if __name__ == "__main__":
    main()
