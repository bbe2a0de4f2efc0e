"""One operator tick: what the framework adds over the tick's inferences.

    python -m bench.bench_operatives [--quick]   # just these rows
    python -m bench.run                          # with every other benchmark

A tick of ``operative`` answering at once (one inference) on an in-process scripted engine,
against the SQLite stores in a temporary directory (the default: ``synchronous=NORMAL``):
recalling the state, the notes and the last 10 messages, the tool loop, saving the state
and the exchange. Its median time minus the median of the bare inference call is the
framework's overhead per tick. The same for ``monitor_operative`` with keyword recall over
200 notes (an FTS5 index built per tick), for information.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.common import BenchContext, Row
from jarvis.adapters.sql_store import SqlBackend
from jarvis.adapters.sql_store.sqlite_driver import SqliteDriver
from jarvis.adapters.sqlite_memory.store import SqliteMemory
from jarvis.application.registry import builtin_agents
from jarvis.domain.json_types import JSONValue
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message
from jarvis.domain.loop.options import AgentParts
from jarvis.domain.operators import OperatorBinding
from jarvis.testing import ScriptedInference

PROMPT = "Check the build status and report what changed."
ANSWER = "Build 41 is green; nothing changed since the last tick."


async def _median_ms(action: Callable[[], Awaitable[object]], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await action()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


async def _tick_row(folder: Path, runs: int, *, agent: str, options: dict[str, JSONValue]) -> Row:
    backend = SqlBackend(SqliteDriver(folder / f"{agent}.db"))
    sessions, store = backend.sessions, backend.operators
    engine = ScriptedInference([ANSWER])
    if agent == "monitor_operative":
        notes: list[JSONValue] = [
            {"tick": str(n), "text": f"Note {n}: build {n} was {'green' if n % 3 else 'red'}."}
            for n in range(200)
        ]
        await store.put_state("operator:bench:notes", notes)
    binding = OperatorBinding(
        operator_id="bench",
        sessions=sessions,
        store=store,
        keyword_index=lambda: SqliteMemory(":memory:"),
    )
    parts = AgentParts(inference=engine, model="m", operator=binding)
    registry = builtin_agents()

    async def tick() -> None:
        await registry.create(agent, parts, options).arun(PROMPT)

    for _ in range(5):  # warm: the history fills up to its 10 messages
        await tick()
    ours = await _median_ms(tick, runs)
    request = InferenceRequest(messages=(Message.user(PROMPT),), model="m")
    bare = await _median_ms(lambda: engine.generate(request), runs)
    sessions.close()
    calls = len(engine.requests) // (runs + 5) or 1
    overhead = ours - bare * calls
    if agent == "operative":
        return Row(
            name="one operative tick: framework overhead over its inference (SQLite stores)",
            value=overhead,
            unit="ms",
            baseline=bare,
            baseline_name="the bare scripted inference call",
            goal="<= 5 ms",
            ok=overhead <= 5.0,
            note=f"whole tick {ours:.2f} ms p50",
        )
    return Row(
        name="one monitor_operative tick, keyword recall over 200 notes: overhead",
        value=overhead,
        unit="ms",
        baseline=bare,
        baseline_name="its bare scripted inference calls",
        note=f"whole tick {ours:.2f} ms p50, {calls} inferences",
    )


async def run(ctx: BenchContext) -> list[Row]:
    runs = 30 if ctx.quick else 200
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder)
        return [
            await _tick_row(path, runs, agent="operative", options={}),
            await _tick_row(
                path,
                runs,
                agent="monitor_operative",
                options={
                    "retrieval_strategy": "keyword",
                    "task_decomposition": "monolithic",
                    "memory_extraction": "none",
                },
            ),
        ]


def main() -> None:
    from bench.run import table

    parser = argparse.ArgumentParser(description="the operator tick benchmarks alone")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(table(asyncio.run(run(BenchContext(stub_url="", quick=args.quick)))))


if __name__ == "__main__":
    main()
