"""A small real HTTP site on 127.0.0.1 for the web tool tests: pages, redirects, a search API.

Hostile answers too: canned bodies with any headers (gzip bombs, stacked encodings), an
endless body and a slow drip. Nothing here sleeps against the test: a held answer waits on
``release``, which is set when the test leaves the site.
"""

from __future__ import annotations

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import parse_qs, urlsplit

PAGE = """<!doctype html>
<html><head><title>Jarvis &amp; friends</title>
<style>body { color: red }</style><script>alert("never shown")</script></head>
<body><h1>Local agents</h1><p>Jarvis runs   agents
on your own hardware.</p>
<ul><li>private</li><li>typed</li></ul><noscript>enable js</noscript>
<p>Caf&eacute; &lt;ok&gt;</p></body></html>"""


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that gave up (a timeout test) is expected; no traceback on stderr."""


class LocalSite:
    """Serves on a free loopback port; ``hits`` records (path, Host header) of each request."""

    def __init__(self, *, tls: ssl.SSLContext | None = None) -> None:
        self.hits: list[tuple[str, str]] = []
        self.canned: dict[str, tuple[dict[str, str], bytes]] = {}
        self.release = threading.Event()
        self.written: dict[str, int] = {}
        self.endless_limit = 64 * 1024 * 1024
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:
                site.hits.append((self.path, self.headers.get("Host", "")))
                site.route(self)

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def paths(self) -> list[str]:
        return [urlsplit(path).path for path, _ in self.hits]

    def __enter__(self) -> LocalSite:
        self.thread.start()
        return self

    def serve(self, path: str, body: bytes, headers: dict[str, str]) -> str:
        """Answer ``path`` with 200, exactly these headers (no length added) and ``body``."""
        self.canned[path] = (headers, body)
        return f"{self.base}{path}"

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def route(self, handler: BaseHTTPRequestHandler) -> None:
        url = urlsplit(handler.path)
        query = {key: values[0] for key, values in parse_qs(url.query).items()}
        path = url.path
        if path in self.canned:
            self.send_canned(handler, *self.canned[path])
        elif path == "/endless":
            self.endless(handler, path)
        elif path == "/drip":
            self.drip(handler, path)
        elif path == "/page":
            self.send(handler, 200, "text/html; charset=utf-8", PAGE.encode())
        elif path == "/plain":
            self.send(handler, 200, "text/plain", b"just text\n")
        elif path == "/secret":
            self.send(handler, 200, "text/plain", b"internal admin data")
        elif path == "/big":
            self.send(handler, 200, "text/plain", b"a" * 50_000)
        elif path == "/pdf":
            self.send(handler, 200, "application/pdf", b"%PDF-1.7\n")
        elif path == "/missing":
            self.send(handler, 404, "text/plain", b"not here")
        elif path == "/slow":
            self.release.wait(30)  # held until the test is over: the client gives up first
            self.send(handler, 200, "text/plain", b"late")
        elif path == "/redirect":
            self.redirect(handler, query["to"])
        elif path.startswith("/chain/"):
            left = int(path.rsplit("/", 1)[1])
            self.redirect(handler, f"/chain/{left - 1}" if left > 0 else "/plain")
        elif path == "/search":
            results = [
                {
                    "title": f"Result {i} for {query.get('q', '')}",
                    "url": f"https://r{i}.example/",
                    "content": f"Snippet {i}.",
                }
                for i in range(1, 8)
            ]
            results.insert(1, {"title": "no url"})
            body = json.dumps({"query": query.get("q"), "results": results}).encode()
            self.send(handler, 200, "application/json", body)
        elif path == "/empty-search":
            self.send(handler, 200, "application/json", b'{"results": []}')
        elif path == "/broken-search":
            self.send(handler, 200, "text/html", b"<html>not json</html>")
        else:
            self.send(handler, 404, "text/plain", b"unknown")

    @staticmethod
    def send_canned(handler: BaseHTTPRequestHandler, headers: dict[str, str], body: bytes) -> None:
        handler.send_response(200)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(body)

    def endless(self, handler: BaseHTTPRequestHandler, path: str) -> None:
        """A body with no length that goes on until the client hangs up (or the limit)."""
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.end_headers()
        chunk = b"[" + b"1," * 32767
        self.written[path] = 0
        try:
            while self.written[path] < self.endless_limit and not self.release.is_set():
                handler.wfile.write(chunk)
                self.written[path] += len(chunk)
        except OSError:  # the client stopped reading: what this route is for
            return
        handler.close_connection = True

    def drip(self, handler: BaseHTTPRequestHandler, path: str) -> None:
        """One byte every 50 ms, far inside any per-read timeout, until the test is over."""
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.end_headers()
        self.written[path] = 0
        try:
            for _ in range(400):
                handler.wfile.write(b" ")
                handler.wfile.flush()
                self.written[path] += 1
                if self.release.wait(0.05):
                    break
        except OSError:
            return
        handler.close_connection = True

    @staticmethod
    def send(handler: BaseHTTPRequestHandler, status: int, kind: str, body: bytes) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    @staticmethod
    def redirect(handler: BaseHTTPRequestHandler, location: str) -> None:
        handler.send_response(302)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()
