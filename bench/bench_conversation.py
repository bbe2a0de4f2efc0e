"""``jarvis ask -c`` against ``jarvis ask``, end to end against the stub server.

    python -m bench.bench_conversation [--quick]   # just this row
    python -m bench.run                            # with every other benchmark

The conversation continued holds 20 earlier exchanges (40 messages, the default
``[sessions] history_messages``), so each ``-c`` run opens the SQLite store, loads and
bounds that history, sends it, and appends its own exchange; the one-off ``jarvis ask``
touches no store. Each round interleaves the runs of both commands (a burst of load from
elsewhere hits both alike) and takes the ratio of their medians; the row reports the
median round.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

from bench.common import BenchContext, Row, Timing, bytecode_env, stub_process, time_processes
from jarvis.adapters.sql_store import SqlBackend
from jarvis.adapters.sql_store.sqlite_driver import SqliteDriver
from jarvis.domain.llm.messages import Message

QUESTION = "What is the capital of France?"
SESSION = "bench"
EARLIER_EXCHANGES = 20


async def _seed(home: Path) -> None:
    store = SqlBackend(SqliteDriver(home / "sessions.db")).sessions
    try:
        for n in range(EARLIER_EXCHANGES):
            await store.append(
                SESSION,
                [Message.user(f"Question {n}: {QUESTION}"), Message.assistant("Paris. " * 8)],
            )
    finally:
        store.close()


async def run(ctx: BenchContext) -> list[Row]:
    rounds, runs = (1, 3) if ctx.quick else (5, 7)
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-conversation-") as home:
        await _seed(Path(home))
        env = {**(ctx.env or dict(os.environ)), "OPENJARVIS_HOME": home}
        base = ("ask", "--base-url", ctx.stub_url, "-m", "stub-model")
        commands: dict[str, tuple[list[str], dict[str, str] | None]] = {
            "ask": (ctx.jarvis_command(*base, QUESTION), env),
            "continue": (ctx.jarvis_command(*base, "-c", QUESTION), env),  # the one session
        }
        measured: list[tuple[float, Timing, Timing]] = []
        for _ in range(rounds):
            timings = await asyncio.to_thread(time_processes, commands, runs=runs)
            plain, continued = timings["ask"], timings["continue"]
            measured.append((continued.median / plain.median, continued, plain))
    measured.sort(key=lambda m: m[0])
    ratio, continued, plain = measured[len(measured) // 2]
    low, high = measured[0][0], measured[-1][0]
    return [
        Row(
            name="jarvis ask -c (40 messages of history), end to end (stub), vs jarvis ask",
            value=continued.median,
            unit="s",
            baseline=plain.median,
            baseline_name="jarvis ask (no session)",
            goal="<= 1.1x",
            ok=ratio <= 1.1,
            note=f"median round of {rounds}, each the medians of {runs} interleaved runs; "
            f"rounds {low:.2f}-{high:.2f}x; CPU {continued.cpu_median:.3f} s "
            f"vs {plain.cpu_median:.3f} s",
        )
    ]


def main() -> None:
    from bench.run import table

    parser = argparse.ArgumentParser(description="jarvis ask -c against jarvis ask")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as bytecode, stub_process() as url:
        env = bytecode_env(dict(os.environ), bytecode)
        print(table(asyncio.run(run(BenchContext(stub_url=url, env=env, quick=args.quick)))))


if __name__ == "__main__":
    main()
