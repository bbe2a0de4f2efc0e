"""``jarvis mcp serve --http``: the ``mcp`` SDK's client over streamable HTTP (ask with
progress, cancellation, a session the client ends mid-run), and the listener attacked as
``jarvis serve`` is: another local user, a rebinding Host, a cross-site Origin, a missing
API key, a bind beyond loopback without one."""

from __future__ import annotations

import asyncio
import pwd
import subprocess
from pathlib import Path

import httpx
import pytest

from bench.stub_server import ANSWER, MODEL, StubServer
from tests.support.gated_engine import MODEL as GATED_MODEL
from tests.support.gated_engine import GatedEngine
from tests.support.mcp_serve import JARVIS, engine_options, http_server, http_session, text_of
from tests.support.serve_process import curl_as
from tests.support.users import throwaway_user

pytestmark = pytest.mark.integration

KEY = "mcp-serve-key-0123456789"
CALL_SECONDS = 120.0
"""A backstop only: every call here ends on its own well before this."""


@pytest.fixture
def patient_engine(jarvis_home: Path) -> None:
    """An engine timeout beyond the gate's backstop: only a cancellation closes a held
    request (never jarvis giving up on a silent engine)."""
    (jarvis_home / "config.toml").write_text("[engine]\ntimeout = 3600\n")


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"},
    },
}
JSON_AND_SSE = {"accept": "application/json, text/event-stream"}


class Progress:
    def __init__(self) -> None:
        self.messages: list[str] = []
        self.first = asyncio.Event()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.messages.append(message or "")
        self.first.set()


async def test_ask_over_streamable_http_with_progress(stub_server: StubServer) -> None:
    with http_server(*engine_options(stub_server.url, MODEL)) as served:
        async with http_session(served.url) as session:
            names = [tool.name for tool in (await session.list_tools()).tools]
            progress = Progress()
            result = await session.call_tool(
                "ask", {"question": "Capital?"}, progress_callback=progress
            )
    assert "ask" in names
    assert "sessions_list" in names
    assert not result.is_error, text_of(result)
    assert text_of(result) == ANSWER
    assert result.structured_content["stop_reason"] == "final_answer"
    assert result.structured_content["turns"] == 1
    assert "".join(progress.messages) == ANSWER


@pytest.mark.usefixtures("patient_engine")
async def test_a_cancelled_call_closes_the_engine_request() -> None:
    with (
        GatedEngine() as engine,
        http_server(*engine_options(engine.url, GATED_MODEL)) as served,
    ):
        async with http_session(served.url) as session:
            progress = Progress()
            call = asyncio.create_task(
                session.call_tool("ask", {"question": "q"}, progress_callback=progress)
            )
            await asyncio.wait_for(progress.first.wait(), CALL_SECONDS)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            closed = await asyncio.to_thread(engine.request_closed.wait, CALL_SECONDS)
            listed = await session.call_tool("sessions_list", {})
    assert closed, "the engine's request was left open"
    assert not listed.is_error


@pytest.mark.usefixtures("patient_engine")
@pytest.mark.parametrize("how", ["stream-dropped", "session-deleted"])
def test_a_client_that_goes_away_mid_run_leaves_nothing_running(how: str) -> None:
    """The client's stream drops before the answer (no event store could replay it), or it
    ends its session: the run ends with its engine request, and the server goes on."""
    with (
        GatedEngine() as engine,
        http_server(*engine_options(engine.url, GATED_MODEL)) as served,
        httpx.Client(timeout=CALL_SECONDS) as client,
    ):
        opened = client.post(served.url, headers=JSON_AND_SSE, json=INITIALIZE)
        session = opened.headers["mcp-session-id"]
        headers = {**JSON_AND_SSE, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
        client.post(
            served.url,
            headers=headers,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        ).raise_for_status()
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "ask",
                "arguments": {"question": "q"},
                "_meta": {"progressToken": 7},
            },
        }
        with client.stream("POST", served.url, headers=headers, json=call) as reply:
            for line in reply.iter_lines():  # up to the first progress notification
                if line.startswith("data:") and "notifications/progress" in line:
                    break
            if how == "session-deleted":
                ended = client.delete(served.url, headers=headers)
                assert ended.status_code in (200, 204)
        closed = engine.request_closed.wait(CALL_SECONDS)
        alive = served.process.poll() is None
        again = client.post(served.url, headers=JSON_AND_SSE, json=INITIALIZE)
    assert closed, "the engine's request was left open"
    assert alive
    assert again.status_code == 200


def test_a_rebinding_host_and_a_cross_site_origin_are_refused(stub_server: StubServer) -> None:
    before = stub_server.requests
    with http_server(*engine_options(stub_server.url, MODEL)) as served:
        port = httpx.URL(served.url).port
        rebound = httpx.post(
            served.url,
            json=INITIALIZE,
            headers={**JSON_AND_SSE, "host": f"attacker.example:{port}"},
        )
        cross = httpx.post(
            served.url,
            json=INITIALIZE,
            headers={**JSON_AND_SSE, "origin": "https://attacker.example"},
        )
        own = httpx.post(
            served.url,
            json=INITIALIZE,
            headers={**JSON_AND_SSE, "origin": f"http://127.0.0.1:{port}"},
        )
        elsewhere = httpx.get(served.url.removesuffix("/mcp") + "/other")
    assert rebound.status_code == 421
    assert rebound.json()["error"]["code"] == "host_not_allowed"
    assert cross.status_code == 403
    assert cross.json()["error"]["code"] == "origin_not_allowed"
    assert own.status_code == 200
    assert elsewhere.status_code == 404
    assert stub_server.requests == before


def test_another_local_user_is_refused_without_a_key(stub_server: StubServer) -> None:
    with (
        throwaway_user("jms") as (uid, gid),
        http_server(*engine_options(stub_server.url, MODEL)) as served,
    ):
        theirs = curl_as(uid, gid, served.url, method="POST", body=INITIALIZE, headers=JSON_AND_SSE)
        mine = curl_as(None, None, served.url, method="POST", body=INITIALIZE, headers=JSON_AND_SSE)
    assert theirs.status == 403
    assert '"code":"user_not_allowed"' in theirs.body.replace(" ", "")
    assert mine.status == 200


def test_an_allowed_user_or_a_key_lets_another_user_in(stub_server: StubServer) -> None:
    with throwaway_user("jms") as (uid, gid):
        name = pwd.getpwuid(uid).pw_name
        options = engine_options(stub_server.url, MODEL)
        with http_server(*options, "--allow-user", name) as served:
            allowed = curl_as(
                uid, gid, served.url, method="POST", body=INITIALIZE, headers=JSON_AND_SSE
            )
        with http_server(*options, env={"JARVIS_API_KEY": KEY}) as served:
            keyless = curl_as(
                uid, gid, served.url, method="POST", body=INITIALIZE, headers=JSON_AND_SSE
            )
            keyed = curl_as(
                uid,
                gid,
                served.url,
                method="POST",
                body=INITIALIZE,
                headers={**JSON_AND_SSE, "authorization": f"Bearer {KEY}"},
            )
    assert allowed.status == 200
    assert keyless.status == 401
    assert keyed.status == 200


async def test_the_sdk_client_sends_the_api_key(stub_server: StubServer) -> None:
    with http_server(
        *engine_options(stub_server.url, MODEL), env={"JARVIS_API_KEY": KEY}
    ) as served:
        refused = await asyncio.to_thread(
            httpx.post, served.url, json=INITIALIZE, headers=JSON_AND_SSE
        )
        async with http_session(served.url, {"authorization": f"Bearer {KEY}"}) as session:
            result = await session.call_tool("ask", {"question": "Capital?"})
    assert refused.status_code == 401
    assert text_of(result) == ANSWER


def test_listening_beyond_loopback_needs_a_key(stub_server: StubServer) -> None:
    done = subprocess.run(
        [*JARVIS, "mcp", "serve", "--http", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "without an API key" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_listener_flags_need_http() -> None:
    done = subprocess.run(
        [*JARVIS, "mcp", "serve", "--allowed-host", "example.org"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "--allowed-host only applies with --http" in done.stderr
