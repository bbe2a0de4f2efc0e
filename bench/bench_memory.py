"""The knowledge base: filling it, searching it, and what ``--memory`` adds to an ask.

    python -m bench.bench_memory [--quick] [--only add|search|ask]   # just these rows
    python -m bench.run                      # with every other benchmark

* ``jarvis memory add --no-embed`` of 1,000 and 10,000 generated files of about 5 kB
  (10,000 files: about 50 MB of text), as a process: wall time and peak RSS, so the growth
  from one to the other shows; then the same folder again (every file unchanged).
* Search at 100,000 chunks (built straight into the store, with random unit vectors of
  all-MiniLM-L6-v2's 384 dimensions): keyword (bm25) p50, and hybrid p50 including the
  query's embedding by the real model (left out when it is not installed), in a warm
  process; and the first vector search of a process, which loads the vectors.
* ``jarvis ask --memory`` against the stub server over plain ``jarvis ask``, with the
  keyword-only knowledge base (``[memory] embed = false``) and the hybrid one (which loads
  the embedding model to embed the question).

``--quick`` shrinks every size (and leaves out the hybrid ask); the figures in the README
are from a full run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import BenchContext, Row, run_process, time_process
from jarvis.adapters.minilm_embeddings import MiniLMEmbeddings, available
from jarvis.adapters.sqlite_memory import SqliteMemory
from jarvis.application.knowledge import KnowledgeBase
from jarvis.domain.knowledge import Chunk, RawDocument, SourceInfo
from jarvis.testing import InMemoryDocuments

SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "sa",
    "to",
    "vi",
    "be",
    "da",
    "fe",
    "gu",
    "ho",
    "ji",
    "pa",
    "ze",
]
VOCABULARY = 20_000
"""Words of the generated text: made of syllables, drawn with Zipf's law (rank r with
weight 1/r), as the words of natural text are: a few very common, most rare."""


async def _decoded(document: RawDocument) -> str:
    return document.data.decode()


def _vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    words = sorted(
        {"".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(40_000)}
    )[:VOCABULARY]
    rng.shuffle(words)
    weights = [1.0 / rank for rank in range(1, len(words) + 1)]
    return words, weights


WORDS, WEIGHTS = _vocabulary(random.Random(1))
DIMENSIONS = 384
FILES_FOR_ASK = 20


def _paragraph(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(WORDS, WEIGHTS, k=words)) + "."


def _write_files(folder: Path, count: int, rng: random.Random) -> int:
    """``count`` Markdown files of about 5 kB each; their total size."""
    total = 0
    for n in range(count):
        sub = folder / f"d{n // 500:03}"
        sub.mkdir(parents=True, exist_ok=True)
        parts = [f"# Document {n}"]
        for section in range(4):
            parts.append(f"## Part {section}")
            parts.extend(_paragraph(rng, 50) for _ in range(3))
        text = "\n\n".join(parts) + "\n"
        (sub / f"doc{n:05}.md").write_text(text, encoding="utf-8")
        total += len(text)
    return total


def _add_rows(ctx: BenchContext, sizes: list[int]) -> list[Row]:
    rows: list[Row] = []
    rng = random.Random(7)
    first: tuple[int, float, int] | None = None
    """The first size's file count, CPU seconds and peak RSS (KiB): the growth's baseline."""
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-memory-") as tmp:
        for count in sizes:
            home = Path(tmp) / f"home{count}"
            home.mkdir()
            folder = Path(tmp) / f"docs{count}"
            size = _write_files(folder, count, rng)
            env = {**ctx.env, "OPENJARVIS_HOME": str(home)}
            command = ctx.jarvis_command("memory", "add", str(folder), "--recursive", "--no-embed")
            added = run_process(command, env=env)
            again = run_process(command, env=env)
            if added.returncode or again.returncode:
                raise RuntimeError(f"jarvis memory add failed ({added.returncode})")
            mb = size / 1e6
            rows.append(
                Row(
                    name=f"jarvis memory add --no-embed: {count} files ({mb:.0f} MB), CPU",
                    value=added.cpu_seconds,
                    unit="s",
                    baseline=None if first is None else first[1],
                    baseline_name="" if first is None else f"{first[0]} files",
                    note=f"user+sys; wall {added.seconds:.1f} s; peak RSS "
                    f"{added.max_rss_kb / 1024:.0f} MB"
                    + ("" if first is None else f" ({first[2] / 1024:.0f} MB at {first[0]} files)"),
                )
            )
            rows.append(
                Row(
                    name=f"jarvis memory add again: {count} unchanged files, CPU",
                    value=again.cpu_seconds,
                    unit="s",
                    baseline=added.cpu_seconds,
                    baseline_name="the first add",
                    note=f"user+sys; wall {again.seconds:.1f} s; peak RSS "
                    f"{again.max_rss_kb / 1024:.0f} MB",
                )
            )
            if first is None:
                first = (count, added.cpu_seconds, added.max_rss_kb)
    return rows


def _fill(store: SqliteMemory, chunks: int, rng: random.Random) -> None:
    import numpy as np

    vectors = np.random.default_rng(7).standard_normal((chunks, DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    per_source = 100
    for start in range(0, chunks, per_source):
        made = [
            Chunk(text=_paragraph(rng, 60), line=1 + 5 * i, end_line=4 + 5 * i, content_hash="")
            for i in range(min(per_source, chunks - start))
        ]
        info = SourceInfo(
            source=f"/bench/doc{start // per_source:05}.md",
            fingerprint="f",
            kind="markdown",
            chunks=len(made),
            size_bytes=0,
            added_at=0.0,
        )
        store._replace(info, made, vectors[start : start + len(made)].tolist())


async def _search_rows(chunks: int, runs: int) -> list[Row]:
    rng = random.Random(11)
    queries = [" ".join(rng.choices(WORDS, WEIGHTS, k=4)) for _ in range(runs)]
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-search-") as tmp:
        store = SqliteMemory(str(Path(tmp) / "memory.db"))
        _fill(store, chunks, rng)
        store.close()
        keyword, keyword_cpu = [], []
        for query in queries:
            started, cpu = time.perf_counter(), time.process_time()
            await store.keyword_search(query, top_k=5)
            keyword.append(time.perf_counter() - started)
            keyword_cpu.append(time.process_time() - cpu)
        rows = [
            Row(
                name=f"memory search, keyword (bm25), {chunks} chunks",
                value=statistics.median(keyword) * 1000,
                unit="ms",
                goal="<= 50 ms",
                ok=statistics.median(keyword) <= 0.050,
                note=f"p50, top 5; CPU p50 {statistics.median(keyword_cpu) * 1000:.1f} ms",
            )
        ]
        if available():
            rows += await _hybrid_rows(store, queries, chunks)
        await store.aclose()
    return rows


async def _hybrid_rows(store: SqliteMemory, queries: list[str], chunks: int) -> list[Row]:
    """Hybrid search p50 with the query's embedding on the encoder's default of one BLAS
    thread and on BLAS's own default (a thread per core), interleaved query by query so
    the machine's load weighs on both alike. Run it without ``OPENBLAS_NUM_THREADS``."""
    models = {
        "1 BLAS thread (the default)": MiniLMEmbeddings(cache_size=0),
        "BLAS's default threads (embedding_threads = 0)": MiniLMEmbeddings(cache_size=0, threads=0),
    }
    bases = {
        label: KnowledgeBase(
            store,
            InMemoryDocuments({}),
            extract=_decoded,
            embeddings=lambda model=model: model,  # type: ignore[misc]  # bound per label
        )
        for label, model in models.items()
    }
    for model in models.values():
        await model.embed(["warm up"])
    started = time.perf_counter()
    [vector] = await models["1 BLAS thread (the default)"].embed(["cold start"])
    await store.vector_search(vector, top_k=5)
    cold = time.perf_counter() - started
    wall: dict[str, list[float]] = {label: [] for label in models}
    cpu: dict[str, list[float]] = {label: [] for label in models}
    for n, query in enumerate(queries):
        order = list(bases.items()) if n % 2 == 0 else list(reversed(bases.items()))
        for label, base in order:
            started, cpu_started = time.perf_counter(), time.process_time()
            await base.search(query, top_k=5, mode="hybrid")
            wall[label].append(time.perf_counter() - started)
            cpu[label].append(time.process_time() - cpu_started)
    rows: list[Row] = []
    first = next(iter(models))
    for label in models:
        p50 = statistics.median(wall[label])
        rows.append(
            Row(
                name=f"memory search, hybrid (bm25 + MiniLM, RRF), {chunks} chunks, {label}",
                value=p50 * 1000,
                unit="ms",
                baseline=None if label == first else statistics.median(wall[first]) * 1000,
                baseline_name="" if label == first else "1 BLAS thread",
                goal="<= 150 ms",
                ok=p50 <= 0.150,
                note=f"p50 with the query's embedding (CPU p50 "
                f"{statistics.median(cpu[label]) * 1000:.1f} ms, all threads); "
                f"a process's first vector search (loads the vectors) {cold * 1000:.0f} ms",
            )
        )
    return rows


def _ask_rows(ctx: BenchContext, runs: int, *, quick: bool) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-ask-memory-") as tmp:
        docs = Path(tmp) / "docs"
        docs.mkdir()
        rng = random.Random(3)
        for n in range(FILES_FOR_ASK):  # a paragraph each: embedding them stays quick
            (docs / f"note{n:02}.md").write_text(f"# Note {n}\n\n{_paragraph(rng, 40)}\n")
        base_ask = ctx.jarvis_command(
            "ask", "--engine", "openai", "--base-url", ctx.stub_url, "--model", "stub",
            "--no-keep", "What does the budget report say?",
        )  # fmt: skip
        for label, embed in (("keyword", "false"), ("hybrid", "true")):
            if embed == "true" and (quick or not available()):
                continue
            home = Path(tmp) / f"home-{label}"
            home.mkdir()
            (home / "config.toml").write_text(f"[memory]\nembed = {embed}\n")
            env = {**ctx.env, "OPENJARVIS_HOME": str(home)}
            added = run_process(
                ctx.jarvis_command("memory", "add", str(docs), "--recursive"), env=env
            )
            if added.returncode:
                raise RuntimeError("jarvis memory add failed")
            plain = time_process(base_ask, runs=runs, env=env)
            with_memory = time_process([*base_ask, "--memory"], runs=runs, env=env)
            rows.append(
                Row(
                    name=f"jarvis ask --memory ({label}; {FILES_FOR_ASK} notes indexed)",
                    value=with_memory.median,
                    unit="s",
                    baseline=plain.median,
                    baseline_name="plain jarvis ask",
                    note=f"CPU {with_memory.cpu_median * 1000:.0f} ms vs "
                    f"{plain.cpu_median * 1000:.0f} ms plain; peak RSS "
                    f"{with_memory.max_rss_kb / 1024:.0f} MB "
                    f"({plain.max_rss_kb / 1024:.0f} MB plain)",
                )
            )
    return rows


PARTS = ("add", "search", "ask")


async def run(ctx: BenchContext, parts: tuple[str, ...] = PARTS) -> list[Row]:
    sizes = [50, 200] if ctx.quick else [1000, 10_000]
    chunks = 2_000 if ctx.quick else 100_000
    runs = 3 if ctx.quick else 31
    rows: list[Row] = []
    if "add" in parts:
        rows += _add_rows(ctx, sizes)
    if "search" in parts:
        rows += await _search_rows(chunks, runs)
    if "ask" in parts and ctx.stub_url:
        rows += _ask_rows(ctx, 2 if ctx.quick else 7, quick=ctx.quick)
    return rows


def main() -> None:
    from bench.run import table
    from bench.stub_server import StubServer

    parser = argparse.ArgumentParser(description="the knowledge-base benchmarks alone")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only", choices=PARTS, action="append", help="run only this part (repeatable)"
    )
    args = parser.parse_args()
    env = dict(os.environ)
    parts = tuple(args.only or PARTS)
    with StubServer() as stub:
        ctx = BenchContext(stub_url=stub.url, env=env, quick=args.quick)
        print(table(asyncio.run(run(ctx, parts))))


if __name__ == "__main__":
    main()
