"""A loopback engine that misbehaves on purpose, in the OpenAI and in the Ollama dialect.

A few lines of asyncio that speak just enough HTTP/1.1. ``POST /v1/chat/completions``
answers as an OpenAI-compatible server (SSE when streaming), ``POST /api/chat`` as Ollama
(NDJSON when streaming); the request's ``model`` picks the misbehaviour:

* ``ok``: a short, correct answer;
* ``endless-tokens``: a content token every ``TICK`` seconds, forever (a model that never
  stops, served at a pace no per-read timeout ever notices);
* ``endless-pings``: SSE comments (``: ping``) every ``TICK`` seconds, or blank NDJSON
  lines, forever: no event at all, only time passes;
* ``flood``: content tokens as fast as the socket takes them, forever;
* ``empty-events``: events without content as fast as the socket takes them, forever;
* ``comments``: SSE comments / blank lines as fast as the socket takes them, forever;
* ``huge-body`` (not streamed): a valid answer whose content is ``HUGE_BODY`` bytes long,
  sent without a length (chunked) — a client without a size cap takes it all;
* ``long-content``: a valid answer of ``LONG_CONTENT`` characters, far beyond any small
  ``max_tokens``;
* ``echo-secret``: ``ECHOED_SECRET``, not JSON, as the body (or as one stream event/line);
* ``nested``: ``NESTING`` opening brackets as the body (or as one stream event/line);
* ``bad-usage-<kind>``: a correct answer whose usage figures cannot be true (``negative``,
  ``huge``, ``float``, ``text``; any other kind: honest figures);
* ``bad-text``: content with invalid UTF-8 bytes and a lone surrogate escape;
* ``gzip-bomb``: a body that claims ``Content-Encoding: gzip, gzip``.

Every ``GET`` (model lists, health checks) answers 200 with a body that never ends: as fast
as the socket takes it, or, for ``/api/version`` while ``version_drip`` is set, one byte
every ``TICK`` seconds.

Endless answers go on until the client hangs up: the server waits for the test, never the
other way round. ``sent`` counts the body bytes written, ``finished`` the connections whose
handler has ended (the client hung up, or the answer was complete).
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Awaitable, Callable

TICK = 0.05
HUGE_BODY = 48 * 1024 * 1024
LONG_CONTENT = 200_000
NESTING = 100_000
ECHOED_SECRET = b"x" * 180 + b" http://admin:Hunter2Secret@db.internal/ more"
"""A body an engine echoes: the first 200 characters end inside the URL's password."""
BAD_TEXT = b"caf\xc3\xa9 \xff\xfe ok \\ud800 end"
"""Raw bytes put inside a JSON string: invalid UTF-8, then a lone surrogate escape."""


class HostileEngine:
    """The server; use as ``async with HostileEngine() as engine: engine.openai_url``."""

    def __init__(self) -> None:
        self.sent = 0
        self.finished = 0
        self.requests: list[dict[str, object]] = []
        self.version_drip = False
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._ended = asyncio.Condition()

    @property
    def root_url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    @property
    def openai_url(self) -> str:
        return self.root_url + "/v1"

    async def __aenter__(self) -> HostileEngine:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for handler in self._handlers:
            handler.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def wait_finished(self, count: int = 1) -> None:
        """Until ``count`` connections have ended (the client hung up on an endless one)."""
        async with self._ended:
            await self._ended.wait_for(lambda: self.finished >= count)

    # --- HTTP --------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while True:
                request_line = await reader.readline()
                if not request_line:
                    return
                method, path = (part.decode("latin-1") for part in request_line.split()[:2])
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = json.loads(await reader.readexactly(length)) if length else {}
                self.requests.append(body)
                if method == "GET":
                    await self._endless_get(writer, drip=self.version_drip and "version" in path)
                    return
                if not await self._answer(path, body, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:  # the test is over: end quietly
            pass
        finally:
            self._handlers.discard(task)
            writer.close()
            async with self._ended:
                self.finished += 1
                self._ended.notify_all()

    async def _answer(
        self, path: str, body: dict[str, object], writer: asyncio.StreamWriter
    ) -> bool:
        """Answer one request; False when the connection must end afterwards."""
        ollama = path.startswith("/api/")
        model = str(body.get("model", "ok"))
        stream = bool(body.get("stream", ollama))  # Ollama streams unless told not to
        if model == "gzip-bomb":
            payload = gzip.compress(gzip.compress(b"{}" + b" " * 1_000_000))
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-encoding: gzip, gzip\r\n"
                + f"content-length: {len(payload)}\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
            return True
        if model == "echo-secret":  # not JSON, with a password where a quote is cut
            payload = ECHOED_SECRET
            if stream:
                payload = payload + b"\n" if ollama else b"data: " + payload + b"\n\n"
            await self._whole(writer, payload, "application/json")
            return True
        if model == "nested":
            payload = b"[" * NESTING
            if stream:
                payload = payload + b"\n" if ollama else b"data: " + payload + b"\n\n"
            await self._whole(writer, payload, "application/json")
            return True
        usage_kind = model.removeprefix("bad-usage-") if model.startswith("bad-usage-") else ""
        model = "bad-usage" if usage_kind else model
        if stream:
            await self._stream(writer, model, ollama=ollama, usage_kind=usage_kind)
            return False
        if model == "huge-body":
            await self._huge_body(writer, ollama=ollama)
            return False
        content: bytes = b"hello"
        if model == "long-content":
            content = b"x" * LONG_CONTENT
        elif model == "bad-text":
            content = BAD_TEXT
        usage = _bad_usage(usage_kind)
        payload = _whole_answer(content, usage, ollama=ollama)
        await self._whole(writer, payload, "application/json")
        return True

    async def _endless_get(self, writer: asyncio.StreamWriter, *, drip: bool) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        await self._chunk(writer, b'{"version": "')
        while True:
            await self._chunk(writer, b"0" if drip else b"0" * 65536)
            await (_tick() if drip else _no_pause())

    async def _whole(self, writer: asyncio.StreamWriter, payload: bytes, kind: str) -> None:
        writer.write(
            f"HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\n"
            f"content-length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        self.sent += len(payload)
        await writer.drain()

    async def _chunk(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.sent += len(data)
        await writer.drain()

    async def _huge_body(self, writer: asyncio.StreamWriter, *, ollama: bool) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        cut = b"\x01CUT\x01"
        head, tail = _whole_answer(cut, (3, 1), ollama=ollama).split(cut)
        await self._chunk(writer, head)
        piece = b"x" * 65536
        for _ in range(HUGE_BODY // len(piece)):
            await self._chunk(writer, piece)
        await self._chunk(writer, tail)
        await self._chunk(writer, b"")

    async def _stream(
        self, writer: asyncio.StreamWriter, model: str, *, ollama: bool, usage_kind: str
    ) -> None:
        kind = "application/x-ndjson" if ollama else "text/event-stream"
        writer.write(
            f"HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\n"
            "transfer-encoding: chunked\r\n\r\n".encode()
        )
        event: Callable[[bytes], bytes] = _ndjson_line if ollama else _sse_event
        pause: Callable[[], Awaitable[None]] = _no_pause
        if model == "endless-tokens":
            repeated, pause = event(_delta(b"tok ", ollama=ollama)), _tick
        elif model == "endless-pings":
            repeated, pause = (b"\n" if ollama else b": ping\n\n"), _tick
        elif model == "flood":
            repeated = event(_delta(b"word " * 40, ollama=ollama)) * 64
        elif model == "empty-events":
            repeated = event(_delta(b"", ollama=ollama)) * 64
        elif model == "comments":
            repeated = (b"\n" if ollama else b": keep-alive\n") * 4096
        else:
            await self._finite_stream(writer, model, ollama=ollama, usage_kind=usage_kind)
            return
        while True:
            await self._chunk(writer, repeated)
            await pause()

    async def _finite_stream(
        self, writer: asyncio.StreamWriter, model: str, *, ollama: bool, usage_kind: str
    ) -> None:
        content = BAD_TEXT if model == "bad-text" else b"hello"
        usage = _bad_usage(usage_kind) if model == "bad-usage" else (3, 1)
        if ollama:
            await self._chunk(writer, _ndjson_line(_delta(content, ollama=True)))
            done: dict[str, object] = {
                "model": model,
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": usage[0],
                "eval_count": usage[1],
            }
            await self._chunk(writer, _ndjson_line(json.dumps(done).encode()))
        else:
            await self._chunk(writer, _sse_event(_delta(content, ollama=False)))
            choice = {"index": 0, "delta": {}, "finish_reason": "stop"}
            finish = {"model": model, "choices": [choice]}
            await self._chunk(writer, _sse_event(json.dumps(finish).encode()))
            figures = {"prompt_tokens": usage[0], "completion_tokens": usage[1]}
            tail = {"model": model, "choices": [], "usage": figures}
            await self._chunk(writer, _sse_event(json.dumps(tail).encode()) + b"data: [DONE]\n\n")
        await self._chunk(writer, b"")


async def _tick() -> None:
    await asyncio.sleep(TICK)


async def _no_pause() -> None:
    await asyncio.sleep(0)


def _bad_usage(kind: str) -> tuple[object, object]:
    return {
        "negative": (-5, -1),
        "huge": (10**15, 10**12),
        "float": (3.5, 1e300),
        "text": ("many", "lots"),
    }.get(kind, (3, 1))


def _sse_event(data: bytes) -> bytes:
    return b"data: " + data + b"\n\n"


def _ndjson_line(data: bytes) -> bytes:
    return data + b"\n"


def _delta(content: bytes, *, ollama: bool) -> bytes:
    """One streamed piece; ``content`` goes into the JSON string as raw bytes."""
    marker = "\0"
    if ollama:
        piece: dict[str, object] = {
            "model": "m",
            "message": {"role": "assistant", "content": marker},
            "done": False,
        }
    else:
        piece = {"model": "m", "choices": [{"index": 0, "delta": {"content": marker}}]}
    return json.dumps(piece).encode().replace(b"\\u0000", content)


def _whole_answer(content: bytes, usage: tuple[object, object], *, ollama: bool) -> bytes:
    """A whole answer; ``content`` goes into the JSON string as raw bytes."""
    marker = "\0"
    if ollama:
        answer: dict[str, object] = {
            "model": "m",
            "message": {"role": "assistant", "content": marker},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": usage[0],
            "eval_count": usage[1],
        }
    else:
        answer = {
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": marker},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
        }
    return json.dumps(answer).encode().replace(b"\\u0000", content)
