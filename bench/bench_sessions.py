"""The SQLite session store: append latency, loading recent history, listing sessions.

    python -m bench.bench_sessions [--quick]   # just these rows
    python -m bench.run                        # with every other benchmark

* append one message (``SqlSessionStore.append`` on SQLite, WAL: the default ``synchronous=NORMAL``,
  and ``durable=True``, one fsync per append) against the same ``INSERT`` done with
  ``sqlite3`` directly, alternating, as fsync latency depends on the disk's load;
* the last 50 messages of a 10,000-message session, decoded to messages, against the bare
  ``SELECT`` of their rows;
* listing 10,000 sessions (``list_sessions``) against the bare ``SELECT``.

The stub server is not used: these are store figures, in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.common import BenchContext, Row
from jarvis.adapters.sql_store import SqlBackend, SqlSessionStore
from jarvis.adapters.sql_store.sqlite_driver import SqliteDriver
from jarvis.domain.llm.completion import Usage
from jarvis.domain.llm.messages import Message, ToolCall
from jarvis.domain.sessions.records import SessionMessage

SESSION_MESSAGES = 10_000
SESSIONS = 10_000
TEXT = "The capital of France is Paris. " * 8


def _sqlite(path: Path, *, durable: bool = False) -> SqlSessionStore:
    return SqlBackend(SqliteDriver(path, durable=durable)).sessions


def _records(n: int) -> list[SessionMessage]:
    call = ToolCall(id="call_1", name="calculator", arguments={"expression": "2+2"})
    cycle = [
        SessionMessage(message=Message.user(TEXT)),
        SessionMessage(message=Message.assistant("", (call,)), model="m", usage=Usage()),
        SessionMessage(message=Message.tool("4", tool_call_id="call_1", name="calculator")),
        SessionMessage(message=Message.assistant(TEXT), model="m", usage=Usage()),
    ]
    return [cycle[i % 4] for i in range(n)]


async def _median(action: Callable[[], Awaitable[object]], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await action()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def _raw_median(action: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


async def _append_rows(folder: Path, runs: int, *, durable: bool) -> Row:
    """Alternates the two, so that both see the same disk (fsync latency varies a lot)."""
    mode = "FULL" if durable else "NORMAL"
    store = _sqlite(folder / f"append-{mode}.db", durable=durable)
    message = [Message.assistant(TEXT)]
    await store.append("s", message)
    raw = sqlite3.connect(folder / f"raw-{mode}.db", isolation_level=None)
    raw.execute("PRAGMA journal_mode = WAL")
    raw.execute(f"PRAGMA synchronous = {mode}")
    raw.execute("CREATE TABLE m (session_id TEXT, seq INTEGER, record TEXT)")
    ours, baseline = [], []
    for seq in range(runs):
        started = time.perf_counter()
        await store.append("s", message)
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        raw.execute("BEGIN IMMEDIATE")
        raw.execute("INSERT INTO m VALUES ('s', ?, ?)", (seq, TEXT))
        raw.execute("COMMIT")
        baseline.append(time.perf_counter() - started)
    store.close()
    raw.close()
    p50 = statistics.median(ours) * 1000
    p90 = statistics.quantiles(ours, n=10)[-1] * 1000
    if durable:
        return Row(
            name="append one message, SQLite session store (durable = true: fsync per append)",
            value=p50,
            unit="ms",
            baseline=statistics.median(baseline) * 1000,
            baseline_name="bare sqlite3 INSERT, synchronous=FULL",
            note=f"p90 {p90:.2f} ms; bound by the disk's fsync, as the baseline is",
        )
    return Row(
        name="append one message, SQLite session store (the default: WAL, synchronous=NORMAL)",
        value=p50,
        unit="ms",
        baseline=statistics.median(baseline) * 1000,
        baseline_name="bare sqlite3 INSERT, synchronous=NORMAL",
        goal="<= 1 ms p50",
        ok=p50 <= 1.0,
        note=f"p90 {p90:.2f} ms; no fsync per append",
    )


async def _load_rows(folder: Path, runs: int) -> Row:
    path = folder / "long.db"
    filler = _sqlite(path, durable=False)
    records = _records(SESSION_MESSAGES)
    for start in range(0, SESSION_MESSAGES, 1000):
        await filler.append_records("long", records[start : start + 1000])
    filler.close()
    store = _sqlite(path)
    assert len(await store.load("long", limit=50)) == 50
    ours = await _median(lambda: store.load("long", limit=50), runs)
    store.close()
    raw = sqlite3.connect(path)
    query = "SELECT record FROM messages WHERE session_id = 'long' ORDER BY seq DESC LIMIT 50"
    baseline = _raw_median(lambda: raw.execute(query).fetchall(), runs)
    raw.close()
    return Row(
        name=f"load the last 50 messages of a {SESSION_MESSAGES:,}-message session",
        value=ours,
        unit="ms",
        baseline=baseline,
        baseline_name="bare SELECT of the rows",
        goal="<= 5 ms p50",
        ok=ours <= 5.0,
    )


async def _list_rows(folder: Path, runs: int) -> Row:
    path = folder / "many.db"
    filler = _sqlite(path, durable=False)
    [record] = _records(1)
    for n in range(SESSIONS):
        await filler.append_records(f"session-{n}", [record])
    filler.close()
    store = _sqlite(path)
    assert len(await store.list_sessions()) == SESSIONS
    ours = await _median(store.list_sessions, runs)
    store.close()
    raw = sqlite3.connect(path)
    query = (
        "SELECT id, message_count, created_us, updated_us, title FROM sessions"
        " ORDER BY touched DESC"
    )
    baseline = _raw_median(lambda: raw.execute(query).fetchall(), runs)
    raw.close()
    return Row(
        name=f"list {SESSIONS:,} sessions (list_sessions)",
        value=ours,
        unit="ms",
        baseline=baseline,
        baseline_name="bare SELECT of the rows",
        goal="<= 50 ms p50",
        ok=ours <= 50.0,
    )


async def run(ctx: BenchContext) -> list[Row]:
    quick = ctx.quick
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-sessions-") as folder:
        return [
            await _append_rows(Path(folder), 50 if quick else 500, durable=True),
            await _append_rows(Path(folder), 50 if quick else 500, durable=False),
            await _load_rows(Path(folder), 20 if quick else 200),
            await _list_rows(Path(folder), 3 if quick else 15),
        ]


def main() -> None:
    from bench.run import table

    parser = argparse.ArgumentParser(description="the session-store benchmarks alone")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    ctx = BenchContext(stub_url="", quick=args.quick)
    print(table(asyncio.run(run(ctx))))


if __name__ == "__main__":
    main()
