"""Loopback ports for the services the tests start, and ports nothing listens on."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now. Another process may bind
    it before the caller does: a server started on it must retry on "address in use" (the
    llama.cpp and PostgreSQL fixtures do), and a server that can bind port 0 itself should."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def closed_port() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that refuses connections for the whole block: it is bound
    and not listened on, so no other process can start listening on it meanwhile."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        yield port
