"""The engine's connection pool and proxies, on each wire, over real loopback sockets.

The server is a few lines of asyncio speaking HTTP/1.1 keep-alive: it counts the
connections it accepted and the requests it is holding, and holds every answer until the
test opens its gate, so that the tests know how many requests are in flight without
waiting on time.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bench.stub_server import StubServer
from jarvis.adapters.inference._wire import MAX_CONNECTIONS, EngineTransport
from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine
from jarvis.domain.errors import EngineUnavailableError
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message
from tests.support.ports import closed_port

pytestmark = pytest.mark.integration

COMPLETION = json.dumps(
    {
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
).encode()


class HoldingServer:
    def __init__(self) -> None:
        self.connections = 0
        self.held = 0
        self.most_held = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self._changed = asyncio.Condition()
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def wait_held(self, count: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.held >= count)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                async with self._changed:
                    self.held += 1
                    self.most_held = max(self.most_held, self.held)
                    self._changed.notify_all()
                await self.gate.wait()
                async with self._changed:
                    self.held -= 1
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(COMPLETION), COMPLETION)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> HoldingServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.gate.set()
        assert self._server is not None
        self._server.close()


@pytest.fixture
async def server() -> AsyncIterator[HoldingServer]:
    async with HoldingServer() as running:
        yield running


def _request() -> InferenceRequest:
    return InferenceRequest(messages=(Message.user("hello"),), model="m")


async def test_sequential_requests_share_one_kept_alive_connection(
    engine_wire: EngineTransport, server: HoldingServer
) -> None:
    engine = OpenAICompatibleEngine(server.url + "/v1", max_retries=0, wire=engine_wire)
    try:
        for _ in range(5):
            assert (await engine.generate(_request())).content == "hi"
    finally:
        await engine.aclose()
    assert server.connections == 1


async def test_requests_beyond_max_connections_wait_for_one(
    engine_wire: EngineTransport, server: HoldingServer
) -> None:
    server.gate.clear()
    engine = OpenAICompatibleEngine(server.url + "/v1", max_retries=0, wire=engine_wire)
    try:
        runs = [
            asyncio.create_task(engine.generate(_request())) for _ in range(MAX_CONNECTIONS + 5)
        ]
        await server.wait_held(MAX_CONNECTIONS)
        server.gate.set()
        answers = await asyncio.gather(*runs)
    finally:
        await engine.aclose()
    assert [a.content for a in answers] == ["hi"] * (MAX_CONNECTIONS + 5)
    assert server.most_held == MAX_CONNECTIONS  # the last five waited for a free connection


def test_each_wire_answers_and_streams_under_uvloop(engine_wire: EngineTransport) -> None:
    """``jarvis serve`` runs on uvloop, whose transports are not asyncio's classes."""
    uvloop = pytest.importorskip("uvloop")

    async def scenario(url: str) -> list[str]:
        engine = OpenAICompatibleEngine(url, max_retries=0, wire=engine_wire)
        try:
            request = InferenceRequest(messages=(Message.user("hello"),), model="stub-model")
            answers = await asyncio.gather(*(engine.generate(request) for _ in range(3)))
            streamed = [chunk.content async for chunk in engine.stream(request)]
            again = await engine.generate(request)
        finally:
            await engine.aclose()
        return [a.content for a in answers] + ["".join(streamed), again.content]

    with StubServer() as stub:
        contents = uvloop.run(scenario(stub.url))
        assert stub.connections == 3  # the pooled connections were reused
    assert contents == ["The capital of France is Paris."] * 5


async def test_a_key_with_a_line_break_is_refused_on_each_wire(
    engine_wire: EngineTransport, server: HoldingServer
) -> None:
    """A key pasted with its line end (or a line injected through it) is never written: the
    request ends as an engine error, not as a traceback of the HTTP client's."""
    key = "sk-test\r\nX-Injected: 1"
    engine = OpenAICompatibleEngine(
        server.url + "/v1", api_key=key, max_retries=0, wire=engine_wire
    )
    try:
        with pytest.raises(EngineUnavailableError):
            await engine.generate(_request())
    finally:
        await engine.aclose()
    assert server.most_held == 0


async def test_a_refused_connection_is_engine_unavailable(engine_wire: EngineTransport) -> None:
    with closed_port() as port:
        engine = OpenAICompatibleEngine(
            f"http://127.0.0.1:{port}/v1", max_retries=0, wire=engine_wire
        )
        with pytest.raises(EngineUnavailableError, match="ConnectError"):
            await engine.generate(_request())
        await engine.aclose()


def _proxy_environment(monkeypatch: pytest.MonkeyPatch, proxy: str, no_proxy: str) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy)
    if no_proxy:
        monkeypatch.setenv("NO_PROXY", no_proxy)


async def test_an_engine_behind_a_proxy_from_the_environment_is_reached_through_it(
    engine_wire: EngineTransport, server: HoldingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The "engine" here is a port nothing listens on; only the proxy (the holding server,
    which answers whatever it is asked) can answer."""
    with closed_port() as port:
        _proxy_environment(monkeypatch, server.url, "")
        engine = OpenAICompatibleEngine(
            f"http://127.0.0.1:{port}/v1", max_retries=0, wire=engine_wire
        )
        assert (await engine.generate(_request())).content == "hi"
        assert server.connections == 1
        await engine.aclose()


async def test_no_proxy_sends_an_engine_past_the_proxy(
    engine_wire: EngineTransport, server: HoldingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with HoldingServer() as proxy:
        _proxy_environment(monkeypatch, proxy.url, "127.0.0.1")
        engine = OpenAICompatibleEngine(server.url + "/v1", max_retries=0, wire=engine_wire)
        assert (await engine.generate(_request())).content == "hi"
        await engine.aclose()
        assert (proxy.connections, server.connections) == (0, 1)


def _self_signed(tmp_path: Path) -> ssl.SSLContext:
    """A server TLS context whose certificate no CA signed (made with ``cryptography``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    return context


async def test_an_engine_whose_certificate_no_ca_signed_is_refused(
    engine_wire: EngineTransport, tmp_path: Path
) -> None:
    """TLS is verified on both wires: the server answers whatever it is asked, but the
    handshake must fail before any request is sent."""
    holding = HoldingServer()
    listener = await asyncio.start_server(
        holding._serve, "127.0.0.1", 0, ssl=_self_signed(tmp_path)
    )
    port = listener.sockets[0].getsockname()[1]
    engine = OpenAICompatibleEngine(f"https://127.0.0.1:{port}/v1", max_retries=0, wire=engine_wire)
    try:
        with pytest.raises(EngineUnavailableError, match=r"(?i)certificate"):
            await engine.generate(_request())
    finally:
        await engine.aclose()
        listener.close()
    assert holding.held == 0
