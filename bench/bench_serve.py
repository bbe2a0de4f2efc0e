"""``jarvis serve`` under load, against the stub engine.

    python -m bench.bench_serve [--quick]   # just these rows
    python -m bench.run                     # with every other benchmark

The server is the real command (``jarvis serve --engine openai --base-url <stub>``) in a
process of its own; the stub engine is a process of its own too (as in ``bench.run``), so
that neither side shares its interpreter with the load.

* 100 concurrent streaming clients (``/v1/chat/completions`` with ``stream``, and the
  managed-agent stream, httpx in this process): every one must get its whole answer and
  ``[DONE]``;
* time to the first token through the server against a direct streamed call to the stub,
  alternating, one request at a time: the server's overhead (p50);
* non-streamed throughput at 50 concurrent requests against the same agent through
  ``Jarvis.aask`` in this process, interleaved blocks; in each, 50 clients ask one
  question after another, the next as soon as the last is answered. Both sides reach the
  stub the same way (the engine adapter, keep-alive). The clients of the server are 50
  persistent HTTP/1.1 keep-alive connections, each a bare asyncio protocol
  (:class:`_KeepAlive`), every answer checked: about 10 us of CPU per request, where an
  ``httpx.AsyncClient`` costs more than the server itself does (its row is reported
  beside, for comparison). Every ratio is of one run;
* the server's peak RSS (``VmHWM``) after that load;
* the same throughput with ``--workers 2`` (no goal: the goal compares one server process
  with one ``Jarvis.aask`` process).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import httpx

from bench.common import BenchContext, Row, stub_process
from bench.stub_server import ANSWER

CLIENTS = 100
WIDTH = 50
WORKERS = 2
QUESTION = "What is the capital of France?"
CHAT = {"model": "jarvis/simple", "messages": [{"role": "user", "content": QUESTION}]}
STARTUP = 60.0


def _serving_url(process: subprocess.Popen[bytes]) -> str:
    """The URL ``jarvis serve --port 0`` says it serves on, read from its stderr (which a
    thread then drains, so that the server never blocks writing to it)."""
    import queue
    import re
    import threading

    assert process.stderr is not None
    found: queue.Queue[str] = queue.Queue()

    def read(stream: IO[bytes]) -> None:
        told = False
        for line in iter(stream.readline, b""):
            match = None if told else re.search(rb"serving on http://\S+:(\d+)", line)
            if match:
                told = True
                found.put(f"http://127.0.0.1:{int(match.group(1))}")
        found.put("")

    threading.Thread(target=read, args=(process.stderr,), daemon=True).start()
    try:
        url = found.get(timeout=STARTUP)
    except queue.Empty:
        raise RuntimeError("jarvis serve did not start") from None
    if not url:
        raise RuntimeError("jarvis serve exited at start")
    return url


@contextmanager
def _server(ctx: BenchContext, home: str, *options: str) -> Iterator[tuple[str, int]]:
    env = {**os.environ, **ctx.env, "OPENJARVIS_HOME": home}
    process = subprocess.Popen(
        ctx.jarvis_command(
            "serve",
            "--port",
            "0",  # the server binds a port the system picks, and says which
            "--engine",
            "openai",
            "--base-url",
            ctx.stub_url,
            "--model",
            "stub-model",
            *options,
        ),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        url = _serving_url(process)
        deadline = time.monotonic() + STARTUP
        while True:  # with --workers, the supervisor listens before a worker answers
            if process.poll() is not None:
                raise RuntimeError("jarvis serve exited at start")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("jarvis serve did not start")
            time.sleep(0.05)
        yield url, process.pid
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _stream(client: httpx.AsyncClient, path: str, body: dict[str, object]) -> bool:
    """One whole stream: True when it ended with ``[DONE]`` after some content."""
    content = False
    async with client.stream("POST", path, json=body) as reply:
        if reply.status_code != 200:
            return False
        last = ""
        async for line in reply.aiter_lines():
            if line.startswith("data: "):
                last = line
                content = content or '"content":"' in line
    return content and last == "data: [DONE]"


async def _concurrent_streams(url: str) -> tuple[int, int]:
    limits = httpx.Limits(max_connections=CLIENTS * 2, max_keepalive_connections=CLIENTS)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:
        await client.post("/v1/managed-agents", json={"id": "bench"})
        chat = [
            _stream(client, "/v1/chat/completions", {**CHAT, "stream": True})
            for _ in range(CLIENTS)
        ]
        managed = [
            _stream(
                client, "/v1/managed-agents/bench/messages", {"content": QUESTION, "stream": True}
            )
            for _ in range(CLIENTS)
        ]
        results = await asyncio.gather(*chat, *managed, return_exceptions=True)
    errors = sum(1 for r in results if r is not True)
    return len(results), errors


async def _first_token(client: httpx.AsyncClient, url: str, body: dict[str, object]) -> float:
    started = time.perf_counter()
    async with client.stream("POST", url, json=body) as reply:
        async for line in reply.aiter_lines():
            if '"content":"' in line and '"content":""' not in line:
                return time.perf_counter() - started
    raise RuntimeError("no token")


async def _first_token_rows(ctx: BenchContext, url: str) -> Row:
    runs = 30 if ctx.quick else 200
    direct_body = {
        "model": "stub-model",
        "stream": True,
        "messages": [{"role": "user", "content": QUESTION}],
    }
    ours, direct = [], []
    async with httpx.AsyncClient(timeout=60) as client:
        for _ in range(10):  # warm both paths (connections, the server's first run)
            await _first_token(client, url + "/v1/chat/completions", {**CHAT, "stream": True})
            await _first_token(client, ctx.stub_url + "/chat/completions", direct_body)
        for _ in range(runs):
            ours.append(
                await _first_token(client, url + "/v1/chat/completions", {**CHAT, "stream": True})
            )
            direct.append(
                await _first_token(client, ctx.stub_url + "/chat/completions", direct_body)
            )
    ours_ms, direct_ms = statistics.median(ours) * 1000, statistics.median(direct) * 1000
    overhead = ours_ms - direct_ms
    return Row(
        name="serve: first token, /v1/chat/completions stream (p50)",
        value=ours_ms,
        unit="ms",
        baseline=direct_ms,
        baseline_name="direct stub stream",
        goal="overhead <= 5 ms p50",
        ok=overhead <= 5.0,
        note=f"overhead {overhead:.2f} ms, {runs} alternating runs",
    )


class _Reply(asyncio.Protocol):
    """One keep-alive connection of :class:`_KeepAlive`: hands each whole answer (its
    status line and body, read by its ``content-length``) to the request waiting for it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[bytes, bytes]] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0 or self.waiter is None:
            return
        head = bytes(self.buffer[:end]).lower()
        at = head.find(b"\r\ncontent-length:")
        if at < 0:
            self.waiter.set_exception(RuntimeError(f"no content-length: {head!r}"))
            return
        length = int(head[at + 17 :].split(b"\r\n", 1)[0])
        if len(self.buffer) < end + 4 + length:
            return
        status = head.split(b"\r\n", 1)[0]
        body = bytes(self.buffer[end + 4 : end + 4 + length])
        del self.buffer[: end + 4 + length]
        self.waiter.set_result((status, body))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(RuntimeError("jarvis serve closed the connection"))


class _KeepAlive:
    """``WIDTH`` persistent HTTP/1.1 keep-alive connections to the server, one request at a
    time on each: the load generator of the throughput row.

    Each connection is a bare asyncio protocol (:class:`_Reply`): it writes a prepared
    request and hands back the answer by its ``content-length``, and the answer is checked,
    at about 10 us of CPU per request. A load generator built on httpx costs some 1.5 ms
    per request at this concurrency (its pool walks every connection on each request), and
    one on asyncio streams with a ``wait_for`` per read about 50 us: on a machine of two
    cores, whatever the generator takes is taken from the server it measures.
    """

    def __init__(self, url: str, body: Mapping[str, object]) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self.host, self.port = host, int(port)
        payload = json.dumps(body).encode()
        self.request = (
            f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}:{port}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
        ).encode() + payload
        self.connections: list[_Reply] = []

    async def __aenter__(self) -> _KeepAlive:
        loop = asyncio.get_running_loop()
        for _ in range(WIDTH):
            _, reply = await loop.create_connection(_Reply, self.host, self.port)
            self.connections.append(reply)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for reply in self.connections:
            if reply.transport is not None:
                reply.transport.close()

    async def ask(self, index: int) -> str:
        reply = self.connections[index]
        if reply.transport is None or reply.transport.is_closing():
            # the server closed it while it sat idle (its keep-alive timeout): as any
            # keep-alive client does, ask on a new one
            loop = asyncio.get_running_loop()
            _, reply = await loop.create_connection(_Reply, self.host, self.port)
            self.connections[index] = reply
        assert reply.transport is not None
        reply.waiter = asyncio.get_running_loop().create_future()
        reply.transport.write(self.request)
        status, body = await reply.waiter
        reply.waiter = None
        if not status.startswith(b"http/1.1 200"):
            raise RuntimeError(f"jarvis serve answered {status!r}")
        content: str = json.loads(body)["choices"][0]["message"]["content"]
        return content


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _throughput_rows(ctx: BenchContext, url: str, *, pid: int, workers: int = 1) -> list[Row]:
    """The throughput rows; with several ``workers`` only the keep-alive one (no goal: the
    goal compares one server process with one ``Jarvis.aask`` process). With one, the note
    says the CPU each request cost the server process and the ``Jarvis.aask`` process:
    what bounds each side's rate once a process has a core to itself."""
    from jarvis import Jarvis

    rounds, blocks = (4, 2) if ctx.quick else (20, 9)
    slow_rounds = 4  # httpx as the client: some 200 requests a second

    async def rate(one: Callable[[int], Awaitable[object]], rounds: int = rounds) -> float:
        """Requests a second of ``WIDTH`` clients, each asking its next question as soon as
        it has its answer (as ``wrk -c`` does; a barrier after every ``WIDTH`` answers
        would measure the slowest answer of each round instead)."""

        async def client(index: int) -> None:
            for _ in range(rounds):
                answer = await one(index)
                if answer != ANSWER:
                    raise RuntimeError(f"a wrong answer: {answer!r}")

        started = time.perf_counter()
        async with asyncio.timeout(120):
            await asyncio.gather(*(client(i) for i in range(WIDTH)))
        return WIDTH * rounds / (time.perf_counter() - started)

    limits = httpx.Limits(max_connections=WIDTH * 2, max_keepalive_connections=WIDTH * 2)
    async with (
        _KeepAlive(url, CHAT) as keep_alive,
        httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client,
        Jarvis(engine="openai", base_url=ctx.stub_url, model="stub-model") as j,
    ):

        async def served(_: int) -> object:
            reply = await client.post("/v1/chat/completions", json=CHAT)
            reply.raise_for_status()
            return reply.json()["choices"][0]["message"]["content"]

        async def sdk(_: int) -> object:
            return await j.aask(QUESTION, agent="simple")

        for _ in range(2):
            await rate(keep_alive.ask)
            await rate(served, slow_rounds)
            await rate(sdk)
        ours, through_httpx, theirs = [], [], []
        server_cpu = own_cpu = 0.0
        for _ in range(blocks):
            before = _cpu_seconds(pid)
            ours.append(await rate(keep_alive.ask))
            server_cpu += _cpu_seconds(pid) - before
            before = time.process_time()
            theirs.append(await rate(sdk))
            own_cpu += time.process_time() - before
            if workers == 1:
                through_httpx.append(await rate(served, slow_rounds))
    value, baseline = statistics.median(ours), statistics.median(theirs)

    def blocks_of(requests: int) -> str:
        return f"median of {blocks} interleaved blocks of {WIDTH} clients x {requests} requests"

    note = blocks_of(rounds)
    if workers > 1:
        return [
            Row(
                name=f"serve --workers {workers}: {WIDTH} concurrent non-streamed completions",
                value=value,
                unit="runs/s",
                baseline=baseline,
                baseline_name="Jarvis.aask in one process",
                note=f"{WIDTH} keep-alive connections; {note}",
            )
        ]
    slow_client = statistics.median(through_httpx)
    runs = blocks * rounds * WIDTH
    cpu = (
        f"CPU per request: server {server_cpu / runs * 1e6:.0f} us, "
        f"Jarvis.aask process {own_cpu / runs * 1e6:.0f} us"
    )
    return [
        Row(
            name=f"serve: {WIDTH} concurrent non-streamed completions",
            value=value,
            unit="runs/s",
            baseline=baseline,
            baseline_name="Jarvis.aask in one process",
            goal=">= 0.8x",
            ok=value >= 0.8 * baseline,
            note=f"{WIDTH} keep-alive connections; {note}; {cpu}",
        ),
        Row(
            name="serve: the same, httpx as the client",
            value=slow_client,
            unit="runs/s",
            baseline=baseline,
            baseline_name="Jarvis.aask in one process",
            note=f"one httpx.AsyncClient; {blocks_of(slow_rounds)}",
        ),
    ]


async def run(ctx: BenchContext) -> list[Row]:
    with (
        tempfile.TemporaryDirectory(prefix="jarvis-bench-serve-") as home,
        _server(ctx, home) as (url, pid),
    ):
        total, errors = await _concurrent_streams(url)
        streams = Row(
            name=f"serve: {CLIENTS} concurrent streams x 2 (chat, managed agent)",
            value=errors,
            unit="errors",
            goal="0 errors",
            ok=errors == 0,
            note=f"{total} streams, each to [DONE]",
        )
        first = await _first_token_rows(ctx, url)
        throughput = await _throughput_rows(ctx, url, pid=pid)
        rss = Row(
            name="serve: peak RSS after the load",
            value=_peak_rss_mb(pid),
            unit="MB",
            note="VmHWM of the jarvis serve process",
        )
    with (
        tempfile.TemporaryDirectory(prefix="jarvis-bench-serve-") as home,
        _server(ctx, home, "--workers", str(WORKERS)) as (url, pid),
    ):
        workers = await _throughput_rows(ctx, url, pid=pid, workers=WORKERS)
    return [streams, first, *throughput, rss, *workers]


def main() -> None:
    from bench.run import table

    parser = argparse.ArgumentParser(description="the jarvis serve benchmarks alone")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with stub_process() as url:  # as bench.run does: not in this process's GIL
        ctx = BenchContext(stub_url=url, quick=args.quick)
        print(table(asyncio.run(run(ctx))))


if __name__ == "__main__":
    main()
