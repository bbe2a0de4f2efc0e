"""What approving a tool call over HTTP costs in ``jarvis serve``, against the stub engine.

    python -m bench.bench_approvals [--quick]   # just this row
    python -m bench.run                         # with every other benchmark

Two servers (the real command, each with a config dir of its own, one SQLite session
store each) run the same managed agent: a turn in which the stub calls ``calculator``,
then the answer. On one, ``[tools.approval.tools] calculator = "ask"``: the client reads
``event: approval_required`` from the stream and at once answers ``POST
.../approvals/{id}`` on a second keep-alive connection. On the other, ``calculator =
"auto"``. Streams alternate between the two. The row is the round-trip as the client sees
it, p50: from reading ``approval_required`` to reading the ``approval`` event that follows
(the answer's request, storing it, waking the run, taking the decision); the note gives
the difference of the two runs' medians too (recording the call included), a noisier
figure on a busy machine.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.bench_serve import _server
from bench.common import BenchContext, Row, stub_process

AGENT = {"id": "ops", "agent": "orchestrator", "tools": ["calculator"]}
MESSAGE = {"content": "What is 2+2?", "stream": True}
_AGENT_NUMBERS = itertools.count()


def _home(root: str, mode: str) -> str:
    home = Path(root) / mode
    home.mkdir()
    (home / "config.toml").write_text(
        f'[tools.approval.tools]\ncalculator = "{mode}"\n', encoding="utf-8"
    )
    return str(home)


async def _run(
    stream: httpx.AsyncClient, answers: httpx.AsyncClient, trips: list[float] | None = None
) -> float:
    """One whole managed stream of a new agent (an agent's history would hold the call's
    result, and the stub calls a tool only when none came back yet), approving its call
    when asked: its wall seconds (the approval's round-trip into ``trips``)."""
    agent = f"ops-{next(_AGENT_NUMBERS)}"
    created = await stream.post("/v1/managed-agents", json={**AGENT, "id": agent})
    created.raise_for_status()
    started = time.perf_counter()
    asked_at = 0.0
    event, done = "", False
    async with stream.stream("POST", f"/v1/managed-agents/{agent}/messages", json=MESSAGE) as reply:
        async for line in reply.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                if event == "approval_required":
                    asked_at = time.perf_counter()
                    approval = json.loads(line[6:])["id"]
                    answered = await answers.post(
                        f"/v1/managed-agents/{agent}/approvals/{approval}", json={"allow": True}
                    )
                    answered.raise_for_status()
                elif event == "approval":
                    if '"decision":"deny"' in line:
                        raise RuntimeError("the call was denied")
                    if asked_at and trips is not None:
                        trips.append(time.perf_counter() - asked_at)
                done = line == "data: [DONE]"
                event = ""
    if not done:
        raise RuntimeError("the stream did not end with [DONE]")
    if trips is not None and not asked_at:
        raise RuntimeError("no approval was asked for")
    return time.perf_counter() - started


async def _measure(ask_url: str, auto_url: str, rounds: int) -> tuple[float, float, float]:
    clients = [httpx.AsyncClient(base_url=url, timeout=60) for url in (ask_url, auto_url)]
    answers = httpx.AsyncClient(base_url=ask_url, timeout=60)
    try:
        for _ in range(3):  # warm both servers
            await _run(clients[0], answers)
            await _run(clients[1], answers)
        asked: list[float] = []
        auto: list[float] = []
        trips: list[float] = []
        for _ in range(rounds):
            asked.append(await _run(clients[0], answers, trips))
            auto.append(await _run(clients[1], answers))
        return statistics.median(trips), statistics.median(asked), statistics.median(auto)
    finally:
        for client in (*clients, answers):
            await client.aclose()


async def run(ctx: BenchContext) -> list[Row]:
    rounds = 15 if ctx.quick else 100
    with (
        tempfile.TemporaryDirectory() as root,
        _server(ctx, _home(root, "ask")) as (ask_url, _pid),
        _server(ctx, _home(root, "auto")) as (auto_url, _pid2),
    ):
        trip, asked, auto = await _measure(ask_url, auto_url, rounds)
    difference = (asked - auto) * 1000
    return [
        Row(
            name="serve: approval round-trip over HTTP (managed stream, p50)",
            value=trip * 1000,
            unit="ms",
            baseline=auto * 1000,
            baseline_name="the whole run, call approved by policy",
            goal="<= 5 ms",
            ok=trip * 1000 <= 5.0,
            note=f"runs asked vs approved by policy: {difference:+.2f} ms (p50s); "
            f"{rounds} alternating runs, SQLite store",
        )
    ]


def main() -> None:
    from bench.run import table

    parser = argparse.ArgumentParser(description="the approval round-trip benchmark alone")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home, stub_process() as url:
        os.environ["OPENJARVIS_HOME"] = home
        ctx = BenchContext(stub_url=url, quick=args.quick)
        print(table(asyncio.run(run(ctx))))


if __name__ == "__main__":
    main()
