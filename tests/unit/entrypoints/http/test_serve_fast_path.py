"""``POST /v1/chat/completions`` answers the same through the fast path as through FastAPI.

Each request goes to two real servers over the same kind of engine, one with the fast path
in front of FastAPI and one without it, and the answers are compared: status, every header
but ``Date``, and the body byte for byte (the reply's random id and its timestamp aside).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import pytest

from jarvis.entrypoints.http.fast_path import ChatFastPath
from jarvis.entrypoints.http.security import Message, Receive, Scope, Send
from jarvis.entrypoints.http.state import ServeLimits
from jarvis.testing import ScriptedInference
from tests.support.serve import API_KEY, serving

PATH = "/v1/chat/completions"
USER = [{"role": "user", "content": "Capital of France?"}]
CHAT: dict[str, Any] = {"model": "jarvis/simple", "messages": USER}
JSON = {"content-type": "application/json"}
KEY = {"authorization": "Bearer " + API_KEY}

# name -> (request body, headers)
CASES: dict[str, tuple[bytes, dict[str, str]]] = {
    "success": (json.dumps(CHAT).encode(), JSON),
    "success, streamed": (json.dumps({**CHAT, "stream": True}).encode(), JSON),
    "success, charset": (
        json.dumps(CHAT).encode(),
        {"content-type": "Application/JSON; charset=utf-8"},
    ),
    "malformed JSON": (b'{"model": "jarvis/simple", "messages": [', JSON),
    "empty body": (b"", JSON),
    "not an object": (b"[1, 2]", JSON),
    "not UTF-8": (b'{"model": "\xff\xfe"}', JSON),
    "nested too deep": (b"[" * 100_000 + b"]" * 100_000, JSON),
    "bad temperature": (json.dumps({**CHAT, "temperature": 5}).encode(), JSON),
    "no messages": (json.dumps({**CHAT, "messages": []}).encode(), JSON),
    "n of 2": (json.dumps({**CHAT, "n": 2}).encode(), JSON),
    "unknown role": (
        json.dumps({**CHAT, "messages": [{"role": "robot", "content": "x"}]}).encode(),
        JSON,
    ),
    "unknown agent": (json.dumps({**CHAT, "model": "jarvis/nope"}).encode(), JSON),
    "unknown managed agent": (json.dumps({**CHAT, "model": "no-such-agent"}).encode(), JSON),
    "invalid agent id": (json.dumps({**CHAT, "model": "../../etc"}).encode(), JSON),
    "unknown agent, streamed": (
        json.dumps({**CHAT, "model": "jarvis/nope", "stream": True}).encode(),
        JSON,
    ),
    "last message not the user's": (
        json.dumps({**CHAT, "messages": [{"role": "assistant", "content": "x"}]}).encode(),
        JSON,
    ),
    "an image part": (
        json.dumps(
            {**CHAT, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}
        ).encode(),
        JSON,
    ),
    "text/plain": (json.dumps(CHAT).encode(), {"content-type": "text/plain"}),
    "success, +json": (json.dumps(CHAT).encode(), {"content-type": "application/vnd.api+json"}),
    "no content type": (json.dumps(CHAT).encode(), {}),
    "oversized body": (json.dumps({**CHAT, "pad": "x" * 400_000}).encode(), JSON),
}

_ID = re.compile(rb'"id":"chatcmpl-[0-9a-f]{24}"')
_CREATED = re.compile(rb'"created":\d+')


def _normal(reply: httpx.Response) -> tuple[int, list[tuple[str, str]], bytes]:
    headers = sorted((k, v) for k, v in reply.headers.items() if k != "date")
    body = _CREATED.sub(b'"created":0', _ID.sub(b'"id":"chatcmpl-0"', reply.content))
    return reply.status_code, headers, body


@contextmanager
def _both(**options: Any) -> Iterator[tuple[str, str]]:
    """A server with the fast path and one without, each over its own scripted engine."""
    limits = ServeLimits(max_body_bytes=300_000)
    with ExitStack() as stack:
        urls = [
            stack.enter_context(
                serving(ScriptedInference(["Paris."]), limits=limits, fast_path=fast, **options)
            ).url
            for fast in (True, False)
        ]
        yield urls[0], urls[1]


def _post(url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(url + PATH, content=body, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str]]:
    with _both() as urls:
        yield urls


@pytest.mark.parametrize("case", list(CASES))
def test_the_fast_path_answers_as_fastapi_does(servers: tuple[str, str], case: str) -> None:
    body, headers = CASES[case]
    fast, slow = (_post(url, body, headers) for url in servers)
    assert _normal(fast) == _normal(slow)
    if case.startswith("success"):
        assert fast.status_code == 200
        assert b"Paris." in fast.content
    else:
        assert 400 <= fast.status_code < 500
        assert "error" in fast.json()


def test_a_body_sent_in_chunks_answers_alike(servers: tuple[str, str]) -> None:
    payload = json.dumps(CHAT).encode()

    def chunks() -> Iterator[bytes]:
        yield payload[:10]
        yield payload[10:]

    replies = [
        httpx.post(url + PATH, content=chunks(), headers=JSON, timeout=30) for url in servers
    ]
    assert replies[0].status_code == 200
    assert _normal(replies[0]) == _normal(replies[1])


def test_an_unavailable_engine_answers_alike() -> None:
    urls = []
    with ExitStack() as stack:
        for fast in (True, False):
            urls.append(
                stack.enter_context(serving(ScriptedInference(healthy=False), fast_path=fast)).url
            )
        for stream in (False, True):
            body = json.dumps({**CHAT, "stream": stream}).encode()
            fast_reply, slow_reply = (_post(url, body, JSON) for url in urls)
            assert fast_reply.status_code == 503
            assert _normal(fast_reply) == _normal(slow_reply)


@pytest.mark.parametrize(
    "headers",
    [JSON, {**JSON, "authorization": "Bearer wrong-key-0123456789"}, {**JSON, **KEY}],
    ids=["no key", "wrong key", "right key"],
)
def test_the_api_key_is_asked_for_alike(headers: dict[str, str]) -> None:
    with _both(api_key=API_KEY) as servers:
        fast, slow = (_post(url, json.dumps(CHAT).encode(), headers) for url in servers)
    assert _normal(fast) == _normal(slow)
    assert fast.status_code == (
        200 if headers.get("authorization") == KEY["authorization"] else 401
    )


class _Recorder:
    """The application behind the fast path: records what reaches it, answers 418."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        chunks = []
        while True:
            message: Message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        self.bodies.append(b"".join(chunks))
        await send({"type": "http.response.start", "status": 418, "headers": []})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def test_the_fast_path_serves_what_it_can_and_passes_the_rest_on_whole() -> None:
    with serving(ScriptedInference(["Paris."])) as served:
        behind = _Recorder()
        app = ChatFastPath(behind, served.state)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            served_here = await client.post(PATH, json=CHAT)
            malformed = b'{"model": "jarvis/simple", "messages": ['
            passed = await client.post(PATH, content=malformed, headers=JSON)
            other = await client.post("/v1/messages", content=json.dumps(CHAT), headers=JSON)
            listed = await client.get(PATH)
    assert served_here.status_code == 200
    assert served_here.json()["choices"][0]["message"]["content"] == "Paris."
    assert passed.status_code == other.status_code == listed.status_code == 418
    assert behind.bodies == [malformed, json.dumps(CHAT).encode(), b""]


def test_cors_headers_come_alike() -> None:
    with _both(cors_origins=["https://app.example"]) as servers:
        fast, slow = (
            _post(url, json.dumps(CHAT).encode(), {**JSON, "origin": "https://app.example"})
            for url in servers
        )
    assert fast.status_code == 200
    assert fast.headers["access-control-allow-origin"] == "https://app.example"
    assert _normal(fast) == _normal(slow)
