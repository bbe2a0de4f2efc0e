"""A loopback fake OpenAI-compatible server with canned answers, for benchmarks and tests.

It answers ``GET /v1/models``, ``GET /health`` and ``POST /v1/chat/completions``
(non-streaming JSON, or SSE when ``"stream": true``; ``--latency`` delays every completion
to play a slow engine), over HTTP/1.1 keep-alive, on the
standard library alone so that it costs as little as possible and measures the client,
not itself. When tools are offered and the conversation has no tool result yet, the
answer is a call of the first tool (``{"expression": "2+2"}`` when it takes an
``expression``, else ``{}``); otherwise it is :data:`ANSWER` (:data:`JSON_ANSWER` when a
``response_format`` asks for JSON). ``--tool-rounds N`` keeps
calling until N tool results have come back (a multi-turn tool loop).

Run it with ``python bench/stub_server.py [--port 0] [--chunk-delay SECONDS]``; it prints
``PORT <n>`` on stdout once it listens. In-process, use :class:`StubServer` as a context
manager.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import threading
from collections.abc import Iterator
from typing import cast

ANSWER = "The capital of France is Paris."
JSON_ANSWER = '{"city": "Paris", "country": "France"}'
"""The answer to a request with a ``response_format`` (a typed answer's benchmark)."""
MODEL = "stub-model"


def _json_bytes(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _usage(body: dict[str, object], content: str) -> dict[str, int]:
    messages = body.get("messages")
    prompt = sum(len(str(m)) for m in messages) // 4 if isinstance(messages, list) else 1
    completion = max(1, len(content) // 4)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _tool_call(body: dict[str, object], rounds: int = 1) -> dict[str, object] | None:
    """The tool call to make, when tools are offered and fewer than ``rounds`` tool results
    have come back yet."""
    tools = body.get("tools")
    messages = body.get("messages")
    if not isinstance(tools, list) or not tools or not isinstance(messages, list):
        return None
    answered = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "tool")
    if answered >= rounds:
        return None
    first = tools[0] if isinstance(tools[0], dict) else {}
    function = first.get("function") if isinstance(first.get("function"), dict) else {}
    assert isinstance(function, dict)
    parameters = function.get("parameters") if isinstance(function.get("parameters"), dict) else {}
    assert isinstance(parameters, dict)
    properties = parameters.get("properties")
    arguments = (
        {"expression": "2+2"} if isinstance(properties, dict) and "expression" in properties else {}
    )
    return {
        "id": f"call_stub_{answered + 1}",
        "type": "function",
        "function": {"name": str(function.get("name", "tool")), "arguments": json.dumps(arguments)},
    }


class _Handler:
    def __init__(self, chunk_delay: float, latency: float = 0.0, tool_rounds: int = 1) -> None:
        self.chunk_delay = chunk_delay
        self.latency = latency
        """Seconds every chat completion waits before it is answered (a slow engine)."""
        self.tool_rounds = tool_rounds
        """How many tool calls in a row a conversation with tools gets before the answer."""
        self.connections = 0
        self.requests = 0
        self.open = 0
        """TCP connections open now."""
        self.changed = threading.Condition()
        """Notified whenever a connection opens or closes."""

    def _count(self, delta: int) -> None:
        with self.changed:
            self.open += delta
            self.connections += max(delta, 0)
            self.changed.notify_all()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._count(+1)
        try:
            while True:
                request_line = await reader.readline()
                if not request_line:
                    return
                method, path, _ = request_line.decode("latin-1").split(" ", 2)
                length = 0
                while True:
                    line = await reader.readline()
                    if line in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                raw = await reader.readexactly(length) if length else b""
                self.requests += 1
                await self.respond(method, path, raw, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()
            self._count(-1)

    @staticmethod
    def _send(writer: asyncio.StreamWriter, status: str, payload: bytes) -> None:
        writer.write(
            f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(payload)}\r\n\r\n".encode()
            + payload
        )

    async def respond(
        self, method: str, path: str, raw: bytes, writer: asyncio.StreamWriter
    ) -> None:
        path = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and path in ("/v1/models", "/models"):
            data = {
                "object": "list",
                "data": [{"id": MODEL, "object": "model", "owned_by": "stub"}],
            }
            self._send(writer, "200 OK", _json_bytes(data))
        elif method == "GET" and path in ("/health", ""):
            self._send(writer, "200 OK", b"{}")
        elif method == "POST" and path in ("/v1/chat/completions", "/chat/completions"):
            body = cast("dict[str, object]", json.loads(raw or b"{}"))
            if self.latency:
                await asyncio.sleep(self.latency)
            if body.get("stream"):
                await self.stream(body, writer)
            else:
                self._send(writer, "200 OK", _json_bytes(self.completion(body)))
        else:
            error = {"error": {"message": f"no route {method} {path}", "type": "not_found"}}
            self._send(writer, "404 Not Found", _json_bytes(error))
        await writer.drain()

    def completion(self, body: dict[str, object]) -> dict[str, object]:
        call = _tool_call(body, self.tool_rounds)
        answer = JSON_ANSWER if "response_format" in body else ANSWER
        message: dict[str, object] = {"role": "assistant", "content": None if call else answer}
        if call:
            message["tool_calls"] = [call]
        return {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": 0,
            "model": str(body.get("model") or MODEL),
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}
            ],
            "usage": _usage(body, ANSWER),
        }

    async def stream(self, body: dict[str, object], writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        model = str(body.get("model") or MODEL)
        call = _tool_call(body, self.tool_rounds)
        base = {
            "id": "chatcmpl-stub",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
        }

        def event(choice: dict[str, object], **extra: object) -> None:
            data = b"data: " + _json_bytes({**base, "choices": [choice], **extra}) + b"\n\n"
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

        if call:
            event(
                {"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0, **call}]}}
            )
            event({"index": 0, "delta": {}, "finish_reason": "tool_calls"}, usage=_usage(body, ""))
        else:
            words = ANSWER.split(" ")
            for i, word in enumerate(words):
                piece = word if i == 0 else " " + word
                event({"index": 0, "delta": {"content": piece}, "finish_reason": None})
                if self.chunk_delay:
                    await writer.drain()
                    await asyncio.sleep(self.chunk_delay)
            event({"index": 0, "delta": {}, "finish_reason": "stop"}, usage=_usage(body, ANSWER))
        done = b"data: [DONE]\n\n"
        writer.write(f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")


async def serve(
    port: int = 0,
    *,
    chunk_delay: float = 0.0,
    latency: float = 0.0,
    tool_rounds: int = 1,
    started: asyncio.Future[int] | None = None,
    stop: asyncio.Event | None = None,
    handler: _Handler | None = None,
) -> None:
    """Serve until ``stop`` is set (forever without one)."""
    handler = handler or _Handler(chunk_delay, latency, tool_rounds)
    server = await asyncio.start_server(handler.serve, "127.0.0.1", port, backlog=512)
    bound = server.sockets[0].getsockname()[1]
    if started is not None:
        started.set_result(bound)
    else:
        sys.stdout.write(f"PORT {bound}\n")
        sys.stdout.flush()
    async with server:
        if stop is None:
            await server.serve_forever()
        else:
            await stop.wait()


class StubServer:
    """The stub in a background thread of this process: ``with StubServer() as stub: ...``."""

    def __init__(
        self, *, chunk_delay: float = 0.0, latency: float = 0.0, tool_rounds: int = 1
    ) -> None:
        self.chunk_delay = chunk_delay
        self.port = 0
        self._handler = _Handler(chunk_delay, latency, tool_rounds)
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def connections(self) -> int:
        """TCP connections accepted so far."""
        return self._handler.connections

    @property
    def requests(self) -> int:
        """HTTP requests answered so far."""
        return self._handler.requests

    @property
    def open_connections(self) -> int:
        """TCP connections open now (a client's pooled keep-alive ones included)."""
        return self._handler.open

    def wait_open_connections(self, at_most: int, timeout: float = 10.0) -> int:
        """Wait until at most ``at_most`` connections are open (the server sees each close
        when it reads the client's end of it); the number open then."""
        handler = self._handler
        with handler.changed:
            handler.changed.wait_for(lambda: handler.open <= at_most, timeout)
            return handler.open

    def __enter__(self) -> StubServer:
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)

            async def main() -> None:
                self._stop = asyncio.Event()
                started: asyncio.Future[int] = self._loop.create_future()
                task = asyncio.ensure_future(
                    serve(0, started=started, stop=self._stop, handler=self._handler)
                )
                self.port = await started
                ready.set()
                await task

            self._loop.run_until_complete(main())

        self._thread = threading.Thread(target=run, name="stub-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()


@contextlib.contextmanager
def running(*, chunk_delay: float = 0.0) -> Iterator[str]:
    """``with running() as base_url:`` — the stub in this process."""
    with StubServer(chunk_delay=chunk_delay) as stub:
        yield stub.url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between chunks")
    parser.add_argument(
        "--latency", type=float, default=0.0, help="seconds before each completion is answered"
    )
    parser.add_argument(
        "--tool-rounds", type=int, default=1, help="tool calls in a row before the answer"
    )
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(
            serve(
                args.port,
                chunk_delay=args.chunk_delay,
                latency=args.latency,
                tool_rounds=args.tool_rounds,
            )
        )


if __name__ == "__main__":
    main()
