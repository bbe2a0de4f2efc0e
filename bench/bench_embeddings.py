"""The sentence-embedding model: its latency, and what it adds to a ``monitor_operative`` tick.

    python -m bench.bench_embeddings [--quick]   # just these rows
    python -m bench.run                          # with every other benchmark

all-MiniLM-L6-v2 in numpy (``MiniLMEmbeddings``) on this machine's CPU: one short sentence
per call, the same sentences 16 to a call (per sentence), and the model's load. Then one
``monitor_operative`` tick with semantic recall over 200 notes on the in-process scripted
engine: the first tick of a process embeds every note, later ticks only what is new (the
vectors are cached), as a scheduler running for days sees them. Rows are left out when
the model is not installed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from bench.common import BenchContext, Row
from jarvis.adapters.minilm_embeddings import MiniLMEmbeddings, available
from jarvis.adapters.sqlite_memory.store import SqliteMemory
from jarvis.application.registry import builtin_agents
from jarvis.domain.json_types import JSONValue
from jarvis.domain.loop.options import AgentParts
from jarvis.domain.operators import OperatorBinding
from jarvis.testing import InMemorySessionStore, ScriptedInference
from jarvis.testing.operators import InMemoryOperatorStore

PROMPT = "Check the build status and report what changed."


def _sentences(count: int, salt: str) -> list[str]:
    return [
        f"Build {n} of the {salt} service finished in {n % 7 + 2} minutes." for n in range(count)
    ]


async def _embedding_rows(runs: int) -> list[Row]:
    model = MiniLMEmbeddings(cache_size=0)
    started = time.perf_counter()
    await model.embed(["warm up"])
    load_ms = (time.perf_counter() - started) * 1000
    singles = []
    for text in _sentences(runs, "single"):
        started = time.perf_counter()
        await model.embed([text])
        singles.append(time.perf_counter() - started)
    batches = []
    for n in range(max(2, runs // 16)):
        texts = _sentences(16, f"batch {n}")
        started = time.perf_counter()
        await model.embed(texts)
        batches.append((time.perf_counter() - started) / 16)
    single_ms = statistics.median(singles) * 1000
    return [
        Row(
            name="all-MiniLM-L6-v2 (numpy): embed one sentence per call",
            value=single_ms,
            unit="ms",
            note=f"p50; first call (loads the model) {load_ms:.0f} ms",
        ),
        Row(
            name="all-MiniLM-L6-v2 (numpy): per sentence, 16 to a call",
            value=statistics.median(batches) * 1000,
            unit="ms",
            baseline=single_ms,
            baseline_name="one sentence per call",
        ),
    ]


async def _tick_row(runs: int) -> Row:
    store = InMemoryOperatorStore()
    notes: list[JSONValue] = [
        {"tick": str(n), "text": text} for n, text in enumerate(_sentences(200, "notes"))
    ]
    await store.put_state("operator:bench:notes", notes)
    binding = OperatorBinding(
        operator_id="bench",
        sessions=InMemorySessionStore(),
        store=store,
        keyword_index=lambda: SqliteMemory(":memory:"),
        embeddings=MiniLMEmbeddings(),
    )
    engine = ScriptedInference(["Build 41 is green; nothing changed since the last tick."])
    parts = AgentParts(inference=engine, model="m", operator=binding)
    options: dict[str, JSONValue] = {
        "retrieval_strategy": "semantic",
        "task_decomposition": "monolithic",
        "memory_extraction": "none",
    }
    registry = builtin_agents()

    async def tick() -> float:
        started = time.perf_counter()
        await registry.create("monitor_operative", parts, options).arun(PROMPT)
        return time.perf_counter() - started

    first = await tick()
    later = statistics.median([await tick() for _ in range(runs)])
    return Row(
        name="one monitor_operative tick, semantic recall over 200 notes",
        value=later * 1000,
        unit="ms",
        baseline=first * 1000,
        baseline_name="the process's first tick (embeds all 200 notes)",
        note="later ticks embed only the new note (cached vectors)",
    )


async def run(ctx: BenchContext) -> list[Row]:
    if not available():
        return []
    runs = 16 if ctx.quick else 64
    return [*await _embedding_rows(runs), await _tick_row(max(5, runs // 4))]


def main() -> None:
    from bench.run import table

    parser = argparse.ArgumentParser(description="the sentence-embedding benchmarks alone")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(table(asyncio.run(run(BenchContext(stub_url="", quick=args.quick)))))


if __name__ == "__main__":
    main()
