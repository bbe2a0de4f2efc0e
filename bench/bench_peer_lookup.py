"""The owner of a loopback connection, as a keyless ``jarvis serve`` looks it up once per
connection (``entrypoints/http/peer_user.py``: the kernel is asked about the one socket),
against reading the whole socket table ``/proc/net/tcp`` (the lookup before it), with
thousands of idle loopback connections open, as another local user can hold them.

    python -m bench.bench_peer_lookup [--quick]   # just this row
    python -m bench.run                           # with every other benchmark

Both run on the event loop of the server, so what one costs is what every other request
waits: the table grows with every socket of the machine, the one-socket question does not.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import socket
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import BenchContext, Row
from jarvis.entrypoints.http import peer_user

TABLE = Path("/proc/net/tcp")


def _held(listener: socket.socket, count: int) -> list[socket.socket]:
    held = []
    for _ in range(count):
        held.append(socket.create_connection(listener.getsockname()))
        held.append(listener.accept()[0])
    return held


def _timed(action: Callable[[], object], repeat: int) -> float:
    """The median of ``repeat`` calls of ``action``, seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(connections: int) -> tuple[float, float, int] | None:
    """(one lookup, one table read, sockets open), with ``connections`` idle connections;
    None where there is no table or the kernel does not answer."""
    if not TABLE.is_file() or not peer_user.available():
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2 * connections + 64
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
        soft = min(wanted, hard)
    connections = min(connections, (soft - 64) // 2)
    with socket.create_server(("127.0.0.1", 0), backlog=connections + 1) as listener:
        held = _held(listener, connections)
        try:
            client = held[0].getsockname()
            server = listener.getsockname()
            assert peer_user.peer_uid(client, server) is not None
            lookup = _timed(lambda: peer_user.peer_uid(client, server), 500)
            table = _timed(TABLE.read_bytes, 50)
        finally:
            for sock in held:
                sock.close()
    return lookup, table, 2 * connections


async def run(ctx: BenchContext) -> list[Row]:
    measured = await asyncio.to_thread(measure, 1000 if ctx.quick else 4000)
    if measured is None:
        return []
    lookup, table, sockets = measured
    return [
        Row(
            name=f"the owner of a loopback connection (keyless jarvis serve), {sockets} "
            "sockets open, vs reading /proc/net/tcp whole",
            value=lookup * 1e6,
            unit="µs",
            baseline=table * 1e6,
            baseline_name="/proc/net/tcp read whole (the lookup before)",
            goal="<= 0.1x",
            ok=lookup <= 0.1 * table,
            note="medians of 500 lookups and 50 reads, on the event loop once per connection",
        )
    ]


def main() -> None:
    from bench.run import table

    parser = argparse.ArgumentParser(description="a connection's owner: one socket or all")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(table(asyncio.run(run(BenchContext(stub_url="", quick=args.quick)))))


if __name__ == "__main__":
    main()
