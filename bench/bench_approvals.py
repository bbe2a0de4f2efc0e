"""What approving a tool call over HTTP costs in ``jarvis serve``, against the stub engine.

    python -m bench.bench_approvals [--quick]   # just this row
    python -m bench.run                         # with every other benchmark

Two servers (the real command, each with a config dir of its own, one SQLite session
store each) run the same managed agent: a turn in which the stub calls ``calculator``,
then the answer. On one, ``[tools.approval.tools] calculator = "ask"``: the client reads
``event: approval_required`` from the stream and at once answers ``POST
.../approvals/{id}`` on a second keep-alive connection. On the other, ``calculator =
"auto"``. Streams alternate between the two; the row is the difference of the medians: the
round-trip (record the call, announce it, the answer's request, wake the run, take the
decision) that approval adds to a run.
"""

from __future__ import annotations

import argparse
import asyncio
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


def _home(root: str, mode: str) -> str:
    home = Path(root) / mode
    home.mkdir()
    (home / "config.toml").write_text(
        f'[tools.approval.tools]\ncalculator = "{mode}"\n', encoding="utf-8"
    )
    return str(home)


async def _run(stream: httpx.AsyncClient, answers: httpx.AsyncClient) -> float:
    """One whole managed stream, approving its call when asked: its wall seconds."""
    started = time.perf_counter()
    event, done = "", False
    async with stream.stream("POST", "/v1/managed-agents/ops/messages", json=MESSAGE) as reply:
        async for line in reply.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                if event == "approval_required":
                    approval = json.loads(line[6:])["id"]
                    answered = await answers.post(
                        f"/v1/managed-agents/ops/approvals/{approval}", json={"allow": True}
                    )
                    answered.raise_for_status()
                elif event == "approval" and '"decision":"deny"' in line:
                    raise RuntimeError("the call was denied")
                done = line == "data: [DONE]"
                event = ""
    if not done:
        raise RuntimeError("the stream did not end with [DONE]")
    return time.perf_counter() - started


async def _measure(ask_url: str, auto_url: str, rounds: int) -> tuple[float, float]:
    clients = [httpx.AsyncClient(base_url=url, timeout=60) for url in (ask_url, auto_url)]
    answers = httpx.AsyncClient(base_url=ask_url, timeout=60)
    try:
        for client in clients:
            (await client.post("/v1/managed-agents", json=AGENT)).raise_for_status()
        for _ in range(3):  # warm both servers
            await _run(clients[0], answers)
            await _run(clients[1], answers)
        asked: list[float] = []
        auto: list[float] = []
        for _ in range(rounds):
            asked.append(await _run(clients[0], answers))
            auto.append(await _run(clients[1], answers))
        return statistics.median(asked), statistics.median(auto)
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
        asked, auto = await _measure(ask_url, auto_url, rounds)
    overhead = (asked - auto) * 1000
    return [
        Row(
            name="serve: approval round-trip over HTTP (managed stream, p50)",
            value=asked * 1000,
            unit="ms",
            baseline=auto * 1000,
            baseline_name="the same run, call approved by policy",
            goal="overhead <= 5 ms",
            ok=overhead <= 5.0,
            note=f"overhead {overhead:.2f} ms, {rounds} alternating runs, SQLite store",
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
