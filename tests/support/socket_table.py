"""The kernel's own word on a loopback TCP socket, for tests that wait for its client to
let go of it: ``/proc/net/tcp`` lists every IPv4 socket with its state and inode, and a
socket no process holds any more has inode 0."""

from __future__ import annotations

import struct
import time
from pathlib import Path

TABLE = Path("/proc/net/tcp")


def _entry(host: str, port: int) -> str:
    packed = bytes(int(part) for part in host.split("."))
    return f"{struct.unpack('=I', packed)[0]:08X}:{port:04X}"


def inode_of(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The inode of the IPv4 socket from ``client`` to ``server``, or None when there is
    none."""
    local, remote = _entry(*client), _entry(*server)
    for line in TABLE.read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == local and fields[2] == remote:
            return int(fields[9])
    return None


def wait_until_let_go(
    client: tuple[str, int], server: tuple[str, int], timeout: float = 30.0
) -> None:
    """Until the socket from ``client`` to ``server`` is held by no process (its client
    closed it, and the kernel moved it on: an orphan or a TIME_WAIT entry)."""
    deadline = time.monotonic() + timeout
    while inode_of(client, server) != 0:
        assert time.monotonic() < deadline, f"{client} is still held after {timeout} s"
        time.sleep(0.01)
