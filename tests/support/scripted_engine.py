"""An OpenAI-compatible engine on 127.0.0.1 that answers from a script and logs every request.

Tests of conversations read what jarvis *sent* (``requests``: the JSON body of every chat
completion, in order): the second ``jarvis ask -c`` must carry the first exchange, a
replayed tool call its id and its result. A reply is text (streamed word by word when
asked to stream) or tool calls; a reply made with ``hold=True`` streams its first word,
sets :attr:`ScriptedEngine.first_word_sent` and waits for :meth:`ScriptedEngine.release`,
so a test interrupting an answer never races it. Once the script runs out, the last reply
repeats (without holding).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from tests.support.loopback_engine import LoopbackEngine

MODEL = "scripted-model"
HOLD_TIMEOUT = 120.0
"""A backstop only: a test that never releases a held reply ends it after this."""


@dataclass(frozen=True, slots=True)
class Reply:
    text: str = ""
    tool_calls: list[dict[str, object]] = field(default_factory=list)
    hold: bool = False


def tool_call(call_id: str, name: str, arguments: dict[str, object]) -> dict[str, object]:
    """One tool call as OpenAI's wire format writes it."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


class ScriptedEngine(LoopbackEngine):
    """``with ScriptedEngine([Reply("Paris."), ...]) as engine:`` serves until the block ends."""

    def __init__(self, replies: list[Reply] | None = None) -> None:
        super().__init__()
        self.script = list(replies or [Reply("The capital of France is Paris.")])
        self.requests: list[dict[str, object]] = []
        self.first_word_sent = threading.Event()
        self._lock = threading.Lock()
        self._cursor = 0
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

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
                reply = engine._next(body)
                if body.get("stream"):
                    self._stream(reply)
                else:
                    if reply.hold:
                        engine.first_word_sent.set()
                        engine.gate.wait(HOLD_TIMEOUT)
                    self._json(engine.completion(reply))

            def _stream(self, reply: Reply) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                if reply.tool_calls:
                    calls = [{"index": i, **c} for i, c in enumerate(reply.tool_calls)]
                    self._event({"role": "assistant", "tool_calls": calls})
                    self._event({}, finish_reason="tool_calls")
                else:
                    words = reply.text.split(" ")
                    for index, word in enumerate(words):
                        self._event({"content": word if index == 0 else " " + word})
                        if index == 0 and reply.hold:
                            engine.first_word_sent.set()
                            engine.gate.wait(HOLD_TIMEOUT)
                    self._event({}, finish_reason="stop")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _event(self, delta: dict[str, object], finish_reason: str | None = None) -> None:
                chunk: dict[str, object] = {
                    "id": "chatcmpl-scripted",
                    "object": "chat.completion.chunk",
                    "model": MODEL,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                }
                if finish_reason is not None:
                    chunk["usage"] = {
                        "prompt_tokens": 9,
                        "completion_tokens": 3,
                        "total_tokens": 12,
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

        self._serve(Handler, "scripted-engine")

    def _next(self, body: dict[str, object]) -> Reply:
        with self._lock:
            self.requests.append(body)
            if self._cursor < len(self.script):
                self._cursor += 1
                return self.script[self._cursor - 1]
            last = self.script[-1]
            return Reply(last.text, last.tool_calls)

    def add(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    def completion(self, reply: Reply) -> dict[str, object]:
        message: dict[str, object] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = reply.tool_calls
        return {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
        }

    def messages(self, index: int) -> list[dict[str, object]]:
        """The ``messages`` of request ``index`` (``-1``: the last)."""
        with self._lock:
            messages = self.requests[index]["messages"]
        assert isinstance(messages, list)
        return messages
