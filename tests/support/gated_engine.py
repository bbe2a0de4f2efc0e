"""An OpenAI-compatible engine on 127.0.0.1 that streams its first word, then waits for the test.

A test that interrupts a stream (Ctrl-C, a reader closing the pipe) must not race the
answer: with a server that merely sleeps between chunks, a busy machine lets the whole
answer through before the signal lands. Here the rest of the answer is held back until
the test calls :meth:`GatedEngine.release`, so the interruption always happens mid-answer,
however slow or fast the machine. ``first_word_sent`` says when the stream has started.

A non-streamed request is held whole at the gate, a streamed one after its first word;
while held, the engine watches its connection, so a test sees how many requests wait
(``held``) and how many were closed by the caller before the answer (``abandoned``):
:meth:`GatedEngine.wait_for` waits for either.
``request_closed`` says that a caller closed a held request's connection (a run that was
cancelled let go of its engine request).
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

from tests.support.loopback_engine import LoopbackEngine

ANSWER = "The capital of France is Paris."
MODEL = "gated-model"
GATE_TIMEOUT = 120.0
"""A backstop only: a test that never releases the gate ends its stream after this."""


class GatedEngine(LoopbackEngine):
    """``with GatedEngine() as engine:`` serves on a free port until the block ends."""

    def __init__(self, *, answer: str = ANSWER) -> None:
        super().__init__()
        self.answer = answer
        self.first_word_sent = threading.Event()
        self.request_closed = threading.Event()
        self.requests = 0
        self.changed = threading.Condition()
        self.held = 0
        """Requests waiting at the gate now."""
        self.abandoned = 0
        """Requests whose caller closed the connection while they waited."""
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # close-delimited bodies: no chunked framing

            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:
                if self.path.rstrip("/") in ("/v1/models", "/models"):
                    self._json({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
                else:
                    self._json({"error": {"message": "not found"}}, status=404)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                engine.requests += 1
                if not body.get("stream"):
                    if engine._hold(self.connection):
                        self._json(engine.completion())
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                words = engine.answer.split(" ")
                self._event({"content": words[0]})
                engine.first_word_sent.set()
                if not engine._hold(self.connection):
                    return
                for word in words[1:]:
                    self._event({"content": " " + word})
                self._event({}, finish_reason="stop")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _event(self, delta: dict[str, str], finish_reason: str | None = None) -> None:
                chunk = {
                    "id": "chatcmpl-gated",
                    "object": "chat.completion.chunk",
                    "model": MODEL,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                }
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.flush()

            def _json(self, value: object, status: int = 200) -> None:
                payload = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._serve(Handler, "gated-engine")

    def wait_for(self, condition: Callable[[GatedEngine], bool], timeout: float) -> bool:
        """Wait (bounded) until ``condition(engine)`` holds; False when it never did."""
        with self.changed:
            return self.changed.wait_for(lambda: condition(self), timeout)

    def _count(self, held: int = 0, abandoned: int = 0) -> None:
        with self.changed:
            self.held += held
            self.abandoned += abandoned
            self.changed.notify_all()

    def _hold(self, connection: socket.socket) -> bool:
        """Hold a request until the gate opens (True) or its caller closes the connection
        (False)."""
        self._count(held=1)
        try:
            deadline = time.monotonic() + GATE_TIMEOUT
            while not self.gate.wait(0.02):
                readable, _, _ = select.select([connection], [], [], 0.02)
                if readable and _closed(connection):
                    self._count(abandoned=1)
                    self.request_closed.set()
                    return False
                if time.monotonic() > deadline:
                    return True
            return True
        finally:
            self._count(held=-1)

    def completion(self) -> dict[str, object]:
        return {
            "id": "chatcmpl-gated",
            "object": "chat.completion",
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.answer},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
        }


def _closed(connection: socket.socket) -> bool:
    """The caller closed (or reset) a connection that has something to read."""
    try:
        return not connection.recv(1, socket.MSG_PEEK)
    except OSError:
        return True
