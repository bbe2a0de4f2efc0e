"""An Anthropic Messages API on 127.0.0.1 that answers from a script and records every request.

The Claude Agent SDK's CLI talks to it through ``ANTHROPIC_BASE_URL``: ``POST /v1/messages``
(streamed as SSE when the body asks to stream, JSON otherwise) and
``POST /v1/messages/count_tokens``. Tests read what the CLI *sent* (``requests``: the JSON body
of every ``/v1/messages`` call, in order): the request after a tool round must carry the
``tool_result``, a resumed session the first exchange. A reply is text, ``tool_use`` blocks, an
HTTP error status, or a dropped connection; a reply made with ``hold=True`` streams its first
event, sets :attr:`AnthropicStub.first_chunk_sent` and waits for the gate, so a test that
interrupts a run never races it. Once the script runs out, the last reply repeats.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from tests.support.loopback_engine import LoopbackEngine

MODEL = "claude-stub-model"
HOLD_TIMEOUT = 120.0
"""A backstop only: a test that never releases a held reply ends it after this."""
MAX_BODY = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ToolUse:
    id: str
    name: str
    input: dict[str, object]


@dataclass(frozen=True, slots=True)
class AnthropicReply:
    text: str = ""
    tool_uses: list[ToolUse] = field(default_factory=list)
    status: int = 200
    """Anything but 200 answers with an Anthropic error body of that status."""
    drop: bool = False
    """Close the connection without answering."""
    hold: bool = False
    input_tokens: int = 17
    output_tokens: int = 5


def _sse(event: str, data: dict[str, object]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class AnthropicStub(LoopbackEngine):
    """``with AnthropicStub([AnthropicReply("Paris.")]) as stub:`` serves until the block ends."""

    def __init__(self, replies: list[AnthropicReply] | None = None) -> None:
        super().__init__()
        self.script = list(replies or [AnthropicReply("The capital of France is Paris.")])
        self.requests: list[dict[str, object]] = []
        """The body of every ``/v1/messages`` request, in order."""
        self.headers: list[dict[str, str]] = []
        self.count_token_calls = 0
        self.first_chunk_sent = threading.Event()
        self._lock = threading.Lock()
        self._cursor = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:
                self._json({"type": "error", "error": {"type": "not_found_error"}}, 404)

            def do_POST(self) -> None:
                length = min(int(self.headers.get("content-length") or 0), MAX_BODY)
                body = json.loads(self.rfile.read(length) or b"{}")
                path = self.path.split("?", 1)[0]
                if path == "/v1/messages/count_tokens":
                    with stub._lock:
                        stub.count_token_calls += 1
                    self._json({"input_tokens": 10})
                    return
                if path != "/v1/messages":
                    self._json({"type": "error", "error": {"type": "not_found_error"}}, 404)
                    return
                reply = stub._next(body, dict(self.headers.items()))
                if reply.drop:
                    self.close_connection = True
                    return
                if reply.status != 200:
                    error = {"type": "api_error", "message": "scripted failure"}
                    self._json({"type": "error", "error": error}, reply.status)
                elif body.get("stream"):
                    self._stream(reply)
                else:
                    if reply.hold:
                        stub.first_chunk_sent.set()
                        stub.gate.wait(HOLD_TIMEOUT)
                    self._json(stub.message(reply))

            def _stream(self, reply: AnthropicReply) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                start = stub.message(reply) | {"content": [], "stop_reason": None}
                start["usage"] = {"input_tokens": reply.input_tokens, "output_tokens": 1}
                self._send(_sse("message_start", {"type": "message_start", "message": start}))
                if reply.hold:
                    stub.first_chunk_sent.set()
                    stub.gate.wait(HOLD_TIMEOUT)
                for index, block in enumerate(stub.blocks(reply)):
                    self._send_block(index, block)
                delta = {"stop_reason": stub.stop_reason(reply), "stop_sequence": None}
                usage = {"output_tokens": reply.output_tokens}
                self._send(
                    _sse("message_delta", {"type": "message_delta", "delta": delta, "usage": usage})
                )
                self._send(_sse("message_stop", {"type": "message_stop"}))

            def _send_block(self, index: int, block: dict[str, object]) -> None:
                if block["type"] == "text":
                    first: dict[str, object] = {"type": "text", "text": ""}
                    words = str(block["text"]).split(" ")
                    pieces = [w + " " for w in words[:-1]] + words[-1:]
                    deltas = [{"type": "text_delta", "text": p} for p in pieces]
                else:
                    first = block | {"input": {}}
                    deltas = [
                        {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                    ]
                self._send(
                    _sse(
                        "content_block_start",
                        {"type": "content_block_start", "index": index, "content_block": first},
                    )
                )
                for delta in deltas:
                    event = {"type": "content_block_delta", "index": index, "delta": delta}
                    self._send(_sse("content_block_delta", event))
                stop = {"type": "content_block_stop", "index": index}
                self._send(_sse("content_block_stop", stop))

            def _send(self, data: bytes) -> None:
                self.wfile.write(data)
                self.wfile.flush()

            def _json(self, payload: dict[str, object], status: int = 200) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._serve(Handler, "anthropic-stub")

    @property
    def base_url(self) -> str:
        """What ``ANTHROPIC_BASE_URL`` is set to: the root, the SDK adds ``/v1/messages``."""
        return self.url.removesuffix("/v1")

    def _next(self, body: dict[str, object], headers: dict[str, str]) -> AnthropicReply:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            reply = self.script[min(self._cursor, len(self.script) - 1)]
            self._cursor += 1
        return reply

    def blocks(self, reply: AnthropicReply) -> list[dict[str, object]]:
        blocks: list[dict[str, object]] = []
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        for use in reply.tool_uses:
            blocks.append({"type": "tool_use", "id": use.id, "name": use.name, "input": use.input})
        return blocks

    def stop_reason(self, reply: AnthropicReply) -> str:
        return "tool_use" if reply.tool_uses else "end_turn"

    def message(self, reply: AnthropicReply) -> dict[str, object]:
        """The whole message, as a non-streaming answer returns it."""
        with self._lock:
            number = len(self.requests)
        return {
            "id": f"msg_stub_{number}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": self.blocks(reply),
            "stop_reason": self.stop_reason(reply),
            "stop_sequence": None,
            "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
        }
