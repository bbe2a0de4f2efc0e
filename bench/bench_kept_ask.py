"""A plain ``jarvis ask``, kept as a new session (the default), against the same ask that
stores nothing (``--no-keep``: the command as it was before asks were kept), end to end
against the stub server.

    python -m bench.bench_kept_ask [--quick]   # just this row
    python -m bench.run                        # with every other benchmark

The kept ask opens the SQLite store, finds no history to load for its new session, and
appends the exchange in one transaction; ``--no-keep`` imports nothing of the store. Each
round interleaves the runs of both commands (a burst of load from elsewhere hits both
alike) and takes the ratio of their medians; the row reports the median round.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile

from bench.common import BenchContext, Row, Timing, bytecode_env, stub_process, time_processes

QUESTION = "What is the capital of France?"


async def run(ctx: BenchContext) -> list[Row]:
    rounds, runs = (1, 2) if ctx.quick else (5, 9)
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-kept-ask-") as home:
        env = {**(ctx.env or dict(os.environ)), "OPENJARVIS_HOME": home}
        base = ("ask", "--base-url", ctx.stub_url, "-m", "stub-model")
        commands: dict[str, tuple[list[str], dict[str, str] | None]] = {
            "ephemeral": (ctx.jarvis_command(*base, "--no-keep", QUESTION), env),
            "kept": (ctx.jarvis_command(*base, QUESTION), env),
        }
        measured: list[tuple[float, Timing, Timing]] = []
        for _ in range(rounds):
            timings = await asyncio.to_thread(time_processes, commands, runs=runs)
            ephemeral, kept = timings["ephemeral"], timings["kept"]
            measured.append((kept.median / ephemeral.median, kept, ephemeral))
    measured.sort(key=lambda m: m[0])
    ratio, kept, ephemeral = measured[len(measured) // 2]
    low, high = measured[0][0], measured[-1][0]
    return [
        Row(
            name="jarvis ask kept as a new session (the default), end to end (stub), "
            "vs jarvis ask --no-keep",
            value=kept.median,
            unit="s",
            baseline=ephemeral.median,
            baseline_name="jarvis ask --no-keep (stores nothing)",
            goal="<= 1.05x",
            ok=ratio <= 1.05,
            note=f"median round of {rounds}, each the medians of {runs} interleaved runs; "
            f"rounds {low:.2f}-{high:.2f}x; CPU {kept.cpu_median:.3f} s "
            f"vs {ephemeral.cpu_median:.3f} s",
        )
    ]


def main() -> None:
    from bench.run import table

    parser = argparse.ArgumentParser(description="a kept jarvis ask against --no-keep")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as bytecode, stub_process() as url:
        env = bytecode_env(dict(os.environ), bytecode)
        print(table(asyncio.run(run(BenchContext(stub_url=url, env=env, quick=args.quick)))))


if __name__ == "__main__":
    main()
