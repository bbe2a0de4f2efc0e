"""What the loopback test engines share: a threaded HTTP server on a free port, a gate
that holds answers back until the test releases it, and the ``with`` lifetime."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that went away mid-stream is what these tests do; no traceback."""


class LoopbackEngine:
    """Base of the test engines: subclasses build their handler, then call :meth:`_serve`."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        """Set by :meth:`release` (and at the end of the block): held answers go on."""

    def _serve(self, handler: type[BaseHTTPRequestHandler], name: str) -> None:
        self._server = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def release(self) -> None:
        """Let every held-back answer finish."""
        self.gate.set()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)
