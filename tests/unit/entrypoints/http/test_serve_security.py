"""Safe by default, tested as a client that does not play by the rules would."""

from __future__ import annotations

import json
import logging
import socket

import httpx
import openai
import pytest

from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.http.security import supplied_key
from jarvis.entrypoints.http.server import check_bind, is_loopback
from jarvis.entrypoints.http.state import ServeLimits
from jarvis.testing import ScriptedInference
from tests.support.serve import API_KEY, serving

CHAT = {"model": "jarvis/simple", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.org", "[::]"])
def test_listening_beyond_loopback_needs_an_api_key(host: str) -> None:
    with pytest.raises(ConfigurationError, match="without an API key"):
        check_bind(host, None)
    check_bind(host, API_KEY)  # with one it may


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.1", "::1", "localhost", "[::1]"])
def test_loopback_needs_no_key(host: str) -> None:
    assert is_loopback(host)
    check_bind(host, None)


def test_a_short_key_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="too short"):
        check_bind("0.0.0.0", "secret")


def test_requests_without_the_key_are_refused_and_the_key_never_echoed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with serving(ScriptedInference(["ok"]), api_key=API_KEY) as served:
        url = served.url
        none = httpx.post(url + "/v1/chat/completions", json=CHAT)
        wrong = httpx.post(
            url + "/v1/chat/completions",
            json=CHAT,
            headers={"authorization": "Bearer " + API_KEY[:-1] + "X"},
        )
        almost = httpx.post(
            url + "/v1/chat/completions", json=CHAT, headers={"x-api-key": API_KEY + "extra"}
        )
        basic = httpx.post(
            url + "/v1/chat/completions", json=CHAT, headers={"authorization": "Basic " + API_KEY}
        )
        managed = httpx.get(url + "/v1/managed-agents")
        schema = httpx.get(url + "/openapi.json")
        health = httpx.get(url + "/health")
        bearer = httpx.post(
            url + "/v1/chat/completions", json=CHAT, headers={"authorization": "Bearer " + API_KEY}
        )
        header = httpx.post(url + "/v1/chat/completions", json=CHAT, headers={"x-api-key": API_KEY})
        sdk = openai.OpenAI(base_url=url + "/v1", api_key=API_KEY, max_retries=0)
        answer = sdk.chat.completions.create(
            model="jarvis/simple", messages=[{"role": "user", "content": "hi"}]
        )
    for refused in (none, wrong, almost, basic, managed, schema):
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "invalid_api_key"
        assert API_KEY not in refused.text
    assert health.status_code == 200
    assert (bearer.status_code, header.status_code) == (200, 200)
    assert answer.choices[0].message.content == "ok"
    assert API_KEY not in caplog.text


def test_supplied_key_reads_both_headers() -> None:
    assert supplied_key([(b"x-api-key", b" k ")]) == b"k"
    assert supplied_key([(b"authorization", b"bearer k")]) == b"k"
    assert supplied_key([(b"authorization", b"Bearer  ")]) is None
    assert supplied_key([]) is None


def test_oversized_bodies_are_refused_before_and_while_reading() -> None:
    limits = ServeLimits(max_body_bytes=4096, max_message_chars=1000)
    with serving(ScriptedInference(), limits=limits) as served:
        declared = httpx.post(
            served.url + "/v1/chat/completions",
            content=b"x" * 5000,
            headers={"content-type": "application/json"},
        )

        def chunks() -> object:
            for _ in range(10):
                yield b"x" * 1000

        chunked = httpx.post(served.url + "/v1/chat/completions", content=chunks())  # type: ignore[arg-type]
        long_message = httpx.post(
            served.url + "/v1/chat/completions",
            json={"model": "jarvis/simple", "messages": [{"role": "user", "content": "y" * 2000}]},
        )
    assert declared.status_code == 413
    assert chunked.status_code == 413
    assert long_message.status_code == 413
    for reply in (declared, chunked, long_message):
        assert reply.json()["error"]["message"]


def _one_answer(sock: socket.socket) -> tuple[bytes, bytes]:
    """The status line and body of one answer read whole from ``sock`` (by its length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head.split(b"\r\n", 1)[0], body


@pytest.mark.parametrize("after_a_whole_request", [False, True])
def test_a_body_that_never_finishes_arriving_is_timed_out(after_a_whole_request: bool) -> None:
    """Also on a connection whose last request came whole: what the server knew of that
    body (all of it in, no timer needed) is not taken for the next one's."""
    limits = ServeLimits(body_timeout=0.3)
    with serving(ScriptedInference(["first"]), limits=limits) as served:
        port = int(served.url.rsplit(":", 1)[1])
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
            "content-type: application/json\r\ncontent-length: {}\r\n\r\n"
        )
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            if after_a_whole_request:
                whole = json.dumps(
                    {"model": "jarvis/simple", "messages": [{"role": "user", "content": "x"}]}
                ).encode()
                sock.sendall(head.format(len(whole)).encode() + whole)
                status, body = _one_answer(sock)
                assert status.startswith(b"HTTP/1.1 200")
                assert b"first" in body
            sock.sendall(head.format(100).encode() + b'{"mo')
            reply = sock.recv(65536).decode()  # waits for the server, not a timer of ours
    assert reply.startswith("HTTP/1.1 408")
    assert "request_timeout" in reply


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b"[]",
        b"null",
        b'{"model": 3, "messages": []}',
        b'{"model": "jarvis/simple", "messages": [{"role": "wizard", "content": "x"}]}',
        b'{"model": "jarvis/simple", "messages": [{"role": "user", "content": "x"}],'
        b' "temperature": "hot"}',
        b'{"model": "jarvis/simple", "messages": [{"role": "assistant", "content": "x"}]}',
        b'{"model": "jarvis/simple", "messages": [{"role": "user", "content":'
        b' [{"type": "image_url", "image_url": {"url": "http://x"}}]}]}',
        b'{"model": "jarvis/simple", "messages": [{"role": "user", "content": "x"}], "n": 3}',
        b'{"model": "jarvis/simple", "messages": [{"role": "tool", "content": "x"}],'
        b' "tools": [{"type": "function", "function": {"name": "bad name!"}}]}',
        b'{"model": "jarvis/simple", "messages": [{"role": "user", "content": "\\ud800"}]}',
        b'{"model": "jarvis/simple", "messages": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    ],
)
def test_malformed_requests_are_4xx_json_never_500(body: bytes) -> None:
    with serving(ScriptedInference(["ok"])) as served:
        reply = httpx.post(
            served.url + "/v1/chat/completions",
            content=body,
            headers={"content-type": "application/json"},
        )
    assert 400 <= reply.status_code < 500 or reply.status_code == 200, reply.text
    if reply.status_code != 200:
        assert reply.json()["error"]["message"]
        assert "Traceback" not in reply.text


def test_unknown_routes_and_methods_are_json_errors() -> None:
    with serving(ScriptedInference()) as served:
        missing = httpx.get(served.url + "/v2/nothing")
        method = httpx.delete(served.url + "/v1/chat/completions")
    assert missing.status_code == 404
    assert missing.json()["error"]
    assert method.status_code == 405
    assert method.json()["error"]


def test_cors_is_off_unless_configured() -> None:
    preflight = {"origin": "https://evil.example", "access-control-request-method": "POST"}
    with serving(ScriptedInference()) as served:
        off = httpx.options(served.url + "/v1/chat/completions", headers=preflight)
    with serving(ScriptedInference(), cors_origins=["https://app.example"]) as served:
        evil = httpx.options(served.url + "/v1/chat/completions", headers=preflight)
        good = httpx.options(
            served.url + "/v1/chat/completions",
            headers={**preflight, "origin": "https://app.example"},
        )
    assert "access-control-allow-origin" not in off.headers
    assert "access-control-allow-origin" not in evil.headers
    assert good.headers["access-control-allow-origin"] == "https://app.example"


def test_with_a_key_a_browser_preflight_is_answered_and_nothing_else_passes_without_it() -> None:
    """A browser asks before a cross-origin request with ``Authorization`` (a preflight, which
    never carries credentials): an allowed origin's preflight gets its CORS allowance with a
    key set. The request it announces, an ``OPTIONS`` that is not a preflight and a ``POST``
    dressed as one still need the key; another origin's preflight gets no allowance."""
    url = "/v1/chat/completions"
    preflight = {
        "origin": "https://app.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization,content-type",
    }
    keyed = {"origin": "https://app.example", "authorization": f"Bearer {API_KEY}"}
    with serving(
        ScriptedInference(["Hi."]), api_key=API_KEY, cors_origins=["https://app.example"]
    ) as served:
        allowed = httpx.options(served.url + url, headers=preflight)
        other = httpx.options(
            served.url + url, headers={**preflight, "origin": "https://evil.example"}
        )
        refused = [
            httpx.options(served.url + url, headers={"origin": "https://app.example"}),
            httpx.options(served.url + url, headers={"access-control-request-method": "POST"}),
            httpx.post(served.url + url, json=CHAT, headers=preflight),
            httpx.post(served.url + url, json=CHAT, headers={"origin": "https://app.example"}),
            httpx.get(served.url + "/v1/models", headers=preflight),
        ]
        answered = httpx.post(served.url + url, json=CHAT, headers=keyed)
    assert allowed.status_code == 200, allowed.text
    assert allowed.headers["access-control-allow-origin"] == "https://app.example"
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
    assert "access-control-allow-origin" not in other.headers
    assert [r.status_code for r in refused] == [401] * len(refused)
    # the allowed page may read why: its 401 carries the allowance
    assert refused[3].headers["access-control-allow-origin"] == "https://app.example"
    assert answered.status_code == 200, answered.text
    assert answered.headers["access-control-allow-origin"] == "https://app.example"


def test_engine_credentials_never_reach_an_error_body() -> None:
    with serving(
        engine="openai", base_url="http://user:hunter2secret@127.0.0.1:9/v1", model="m"
    ) as served:
        reply = httpx.post(served.url + "/v1/chat/completions", json=CHAT)
    assert reply.status_code == 503
    assert "hunter2secret" not in reply.text
