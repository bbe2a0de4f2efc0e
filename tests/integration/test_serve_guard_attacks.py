"""``jarvis serve`` attacked as an outsider would: a web page that rebinds its name to
127.0.0.1, a cross-site form or ``fetch``, another local user, and a caller that asks a run
to move its model or widen its rights. Each against a real ``jarvis serve`` process."""

from __future__ import annotations

import pwd
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bench.stub_server import StubServer
from tests.support.serve_process import ServeProcess, curl_as, jarvis_serve
from tests.support.users import open_directory, throwaway_user

pytestmark = pytest.mark.integration

KEY = "serve-guard-key-0123456789"


def _engine(stub: StubServer) -> tuple[str, ...]:
    return ("--engine", "openai", "--base-url", stub.url, "--model", "stub")


def _agents(served: ServeProcess) -> list[object]:
    listed = httpx.get(served.url + "/v1/managed-agents").json()
    data = listed["data"]
    assert isinstance(data, list)
    return data


def _code(reply: httpx.Response) -> object:
    return reply.json()["error"]["code"]


# -- DNS rebinding ---------------------------------------------------------------------------


def test_a_rebinding_host_is_refused_before_any_route_runs(stub_server: StubServer) -> None:
    """A page on attacker.example whose name now points at 127.0.0.1: its requests carry
    ``Host: attacker.example:PORT``. Nothing is created, listed or run for it."""
    with jarvis_serve(*_engine(stub_server)) as served:
        rebound = {"host": f"attacker.example:{served.port}"}
        created = httpx.post(
            served.url + "/v1/managed-agents",
            json={"id": "stolen", "agent": "orchestrator", "tools": ["file_read"]},
            headers=rebound,
        )
        listed = httpx.get(served.url + "/v1/managed-agents", headers=rebound)
        chat = httpx.post(
            served.url + "/v1/chat/completions",
            json={"model": "jarvis/simple", "messages": [{"role": "user", "content": "hi"}]},
            headers=rebound,
        )
        health = httpx.get(served.url + "/health", headers=rebound)
        other_port = httpx.get(
            served.url + "/v1/models", headers={"host": f"127.0.0.1:{served.port + 1}"}
        )
        own = [
            httpx.get(served.url + "/v1/models", headers={"host": f"{name}:{served.port}"})
            for name in ("localhost", "127.0.0.1", "[::1]", "LOCALHOST")
        ]
        remaining = _agents(served)
    for refused in (created, listed, chat, health, other_port):
        assert refused.status_code == 421, refused.text
        assert _code(refused) == "host_not_allowed"
        assert "--allowed-host" in refused.json()["error"]["message"]
    assert [r.status_code for r in own] == [200, 200, 200, 200]
    assert remaining == []


def test_every_worker_process_is_guarded(stub_server: StubServer) -> None:
    """``--workers 2``: each worker builds its application from the same options."""
    workers = jarvis_serve(*_engine(stub_server), "--workers", "2")
    with throwaway_user("jsg") as (uid, gid), workers as served:
        rebound = [
            httpx.get(served.url + "/v1/models", headers={"host": "attacker.example"})
            for _ in range(4)
        ]
        theirs = [curl_as(uid, gid, served.url + "/v1/models") for _ in range(4)]
        mine = [curl_as(None, None, served.url + "/v1/models") for _ in range(4)]
    assert [r.status_code for r in rebound] == [421] * 4
    assert [r.status for r in theirs] == [403] * 4
    assert [r.status for r in mine] == [200] * 4


def test_an_allowed_host_name_is_served(stub_server: StubServer) -> None:
    allowed = ("--allowed-host", "jarvis.lan", "--allowed-host", "Proxy.Example:443")
    with jarvis_serve(*_engine(stub_server), *allowed) as served:
        named = httpx.get(served.url + "/v1/models", headers={"host": "jarvis.lan:8443"})
        proxied = httpx.get(served.url + "/v1/models", headers={"host": "proxy.example"})
        other = httpx.get(served.url + "/v1/models", headers={"host": "jarvis.lan.evil:1"})
    assert named.status_code == 200
    assert proxied.status_code == 200
    assert other.status_code == 421


# -- cross-site requests ---------------------------------------------------------------------


def test_cross_site_requests_change_nothing_and_run_nothing(stub_server: StubServer) -> None:
    """A form or no-cors ``fetch`` from another site: creating, deleting, queueing and the
    body-less ``POST .../run`` are all refused; the queued message stays unanswered."""
    evil = {"origin": "https://attacker.example"}
    with jarvis_serve(*_engine(stub_server)) as served:
        base = served.url + "/v1/managed-agents"
        created = httpx.post(base, json={"id": "x"}, headers=evil)
        assert httpx.post(base, json={"id": "mine"}).status_code == 201
        queued = httpx.post(base + "/mine/messages", json={"content": "hello"})
        assert queued.status_code == 202
        refused = [
            httpx.post(base + "/mine/run", headers=evil),
            httpx.post(base + "/mine/run", headers={"origin": "null"}),
            httpx.post(base + "/mine/run", headers={"sec-fetch-site": "cross-site"}),
            httpx.post(base + "/mine/messages", json={"content": "x"}, headers=evil),
            httpx.delete(base + "/mine", headers=evil),
            httpx.post(
                base + "/mine/run", headers={"origin": f"http://127.0.0.1:{served.port + 1}"}
            ),
        ]
        messages = httpx.get(base + "/mine/messages").json()["data"]
        same_origin = httpx.post(
            base + "/mine/run", headers={"origin": f"http://localhost:{served.port}"}
        )
        reading = httpx.get(base, headers=evil)  # reads are the browser's CORS business
    assert created.status_code == 403
    assert _code(created) == "origin_not_allowed"
    assert "--allowed-origin" in created.json()["error"]["message"]
    assert [r.status_code for r in refused] == [403] * len(refused)
    assert [m["role"] for m in messages] == ["user"]
    assert same_origin.status_code == 200, same_origin.text
    assert reading.status_code == 200


def test_an_allowed_origin_may_change_things(stub_server: StubServer) -> None:
    with jarvis_serve(*_engine(stub_server), "--allowed-origin", "https://app.example") as served:
        allowed = httpx.post(
            served.url + "/v1/managed-agents",
            json={"id": "a"},
            headers={"origin": "https://app.example"},
        )
        other = httpx.post(
            served.url + "/v1/managed-agents",
            json={"id": "b"},
            headers={"origin": "https://app.example.evil"},
        )
    assert allowed.status_code == 201
    assert other.status_code == 403


# -- other local users -----------------------------------------------------------------------


def test_another_local_user_is_refused_without_a_key(stub_server: StubServer) -> None:
    """Every user can connect to a loopback port: without an API key only the server's own
    user is served. The other user's curl is refused on every route; the owner's is not."""
    with throwaway_user("jsg") as (uid, gid), jarvis_serve(*_engine(stub_server)) as served:
        theirs = [
            curl_as(uid, gid, served.url + "/v1/models"),
            curl_as(
                uid,
                gid,
                served.url + "/v1/managed-agents",
                method="POST",
                body={"id": "theirs", "agent": "orchestrator", "tools": ["file_read"]},
            ),
            curl_as(uid, gid, served.url + "/health"),
        ]
        mine = curl_as(None, None, served.url + "/v1/models")
        remaining = _agents(served)
    assert [r.status for r in theirs] == [403, 403, 403]
    assert '"code":"user_not_allowed"' in theirs[0].body.replace(" ", "")
    assert f"uid {uid}" in theirs[0].body
    assert mine.status == 200
    assert remaining == []


def test_an_allowed_user_or_a_key_lets_another_user_in(stub_server: StubServer) -> None:
    with throwaway_user("jsg") as (uid, gid):
        name = pwd.getpwuid(uid).pw_name
        with jarvis_serve(*_engine(stub_server), "--allow-user", name) as served:
            allowed = curl_as(uid, gid, served.url + "/v1/models")
        with jarvis_serve(*_engine(stub_server), env={"JARVIS_API_KEY": KEY}, key=KEY) as served:
            keyless = curl_as(uid, gid, served.url + "/v1/models")
            keyed = curl_as(uid, gid, served.url + "/v1/models", headers={"x-api-key": KEY})
    assert allowed.status == 200
    assert keyless.status == 401
    assert keyed.status == 200


# -- options and runtimes --------------------------------------------------------------------


def test_options_that_move_the_model_or_widen_a_run_need_the_operator(
    stub_server: StubServer,
) -> None:
    """The opencode attack: a managed agent on an external runtime, with the caller's own
    ``base_url`` and ``workspace=/``. Refused, naming the flag; so are the runtimes as chat
    models, and ``host_tools`` of a sandboxed run."""
    with jarvis_serve(*_engine(stub_server)) as served:
        base = served.url + "/v1/managed-agents"
        runtime = httpx.post(
            base,
            json={"agent": "opencode", "agent_options": {"base_url": "http://127.0.0.1:9/v1"}},
        )
        option = httpx.post(
            base, json={"agent": "simple", "agent_options": {"base_url": "http://x/v1"}}
        )
        host_tools = httpx.post(
            base, json={"agent": "sandboxed", "agent_options": {"host_tools": "web_search"}}
        )
        inner = httpx.post(
            base, json={"agent": "sandboxed", "agent_options": {"inner": "openhands"}}
        )
        assert httpx.post(base, json={"id": "plain"}).status_code == 201
        patched = httpx.patch(base + "/plain", json={"agent": "claude_code"})
        patched_options = httpx.patch(base + "/plain", json={"agent_options": {"workspace": "/"}})
        chat = httpx.post(
            served.url + "/v1/chat/completions",
            json={"model": "jarvis/opencode", "messages": [{"role": "user", "content": "id"}]},
        )
        anthropic = httpx.post(
            served.url + "/v1/messages",
            json={
                "model": "jarvis/claude_code",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": "x"}],
            },
        )
        models = [m["id"] for m in httpx.get(served.url + "/v1/models").json()["data"]]
        stored = httpx.get(base + "/plain").json()
    assert runtime.status_code == 403
    assert _code(runtime) == "runtime_not_enabled"
    assert "--enable-runtime opencode" in runtime.json()["error"]["message"]
    assert option.status_code == 403
    assert _code(option) == "option_not_allowed"
    assert "--allow-option base_url" in option.json()["error"]["message"]
    assert host_tools.status_code == 403
    assert "--allow-option host_tools" in host_tools.json()["error"]["message"]
    assert inner.status_code == 403
    assert patched.status_code == 403
    assert patched_options.status_code == 403
    assert chat.status_code == 403
    assert "--enable-runtime opencode" in chat.json()["error"]["message"]
    assert anthropic.status_code == 403
    assert "--enable-runtime claude_code" in anthropic.json()["error"]["message"]
    for name in ("opencode", "claude_code", "openhands"):
        assert f"jarvis/{name}" not in models
    assert "jarvis/simple" in models
    assert stored["agent"] == "simple"
    assert stored["agent_options"] == {}


def test_the_operator_can_allow_an_option_and_a_runtime(stub_server: StubServer) -> None:
    with jarvis_serve(
        *_engine(stub_server),
        "--allow-option",
        "host_tools",
        "--enable-runtime",
        "opencode",
    ) as served:
        host_tools = httpx.post(
            served.url + "/v1/managed-agents",
            json={"agent": "sandboxed", "agent_options": {"host_tools": "web_search"}},
        )
        still = httpx.post(
            served.url + "/v1/managed-agents",
            json={"agent": "simple", "agent_options": {"workspace": "/"}},
        )
        models = [m["id"] for m in httpx.get(served.url + "/v1/models").json()["data"]]
    assert host_tools.status_code == 201, host_tools.text
    assert still.status_code == 403
    assert "jarvis/opencode" in models
    assert "jarvis/claude_code" not in models


def test_a_stored_definition_loses_the_runtime_when_the_server_restarts_without_it(
    stub_server: StubServer,
) -> None:
    """Enabled once, stored; the next server without ``--enable-runtime`` runs it neither
    as a managed agent nor as a chat model."""
    with jarvis_serve(*_engine(stub_server), "--enable-runtime", "opencode") as served:
        created = httpx.post(
            served.url + "/v1/managed-agents", json={"id": "oc", "agent": "opencode"}
        )
    assert created.status_code == 201, created.text
    with jarvis_serve(*_engine(stub_server)) as served:
        base = served.url + "/v1/managed-agents/oc"
        assert httpx.post(base + "/messages", json={"content": "id"}).status_code == 202
        run = httpx.post(base + "/run")
        streamed = httpx.post(base + "/messages", json={"content": "id", "stream": True})
        chat = httpx.post(
            served.url + "/v1/chat/completions",
            json={"model": "oc", "messages": [{"role": "user", "content": "id"}]},
        )
        messages = httpx.get(base + "/messages").json()["data"]
    for refused in (run, streamed, chat):
        assert refused.status_code == 403, refused.text
        assert "--enable-runtime opencode" in refused.json()["error"]["message"]
    assert [m["role"] for m in messages] == ["user"]


def test_unknown_names_for_the_flags_are_usage_errors() -> None:
    for flag, value, listed in (
        ("--allow-option", "temperature", "host_tools"),
        ("--enable-runtime", "bash", "claude_code"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "jarvis", "serve", "--port", "0", flag, value],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        assert flag in done.stderr
        assert listed in done.stderr  # what the flag takes


# -- the API key -----------------------------------------------------------------------------


def test_the_key_comes_from_the_environment_or_a_private_file(
    stub_server: StubServer, tmp_path: Path
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    with jarvis_serve(*_engine(stub_server), "--api-key-file", str(key_file), key=KEY) as served:
        without = httpx.get(served.url + "/v1/models")
        bearer = httpx.get(served.url + "/v1/models", headers={"authorization": f"Bearer {KEY}"})
        cmdline = Path(f"/proc/{served.process.pid}/cmdline").read_bytes()
    assert without.status_code == 401
    assert bearer.status_code == 200
    assert KEY.encode() not in cmdline
    with jarvis_serve(*_engine(stub_server), env={"JARVIS_API_KEY": KEY}, key=KEY) as served:
        assert httpx.get(served.url + "/v1/models").status_code == 401
        cmdline = Path(f"/proc/{served.process.pid}/cmdline").read_bytes()
    assert KEY.encode() not in cmdline


def test_a_key_file_others_may_read_is_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    key_file.chmod(0o644)
    done = subprocess.run(
        [sys.executable, "-m", "jarvis", "serve", "--port", "0", "--api-key-file", str(key_file)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "chmod 600" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_key_flag_still_works_and_warns(stub_server: StubServer) -> None:
    with jarvis_serve(*_engine(stub_server), "--api-key", KEY, key=KEY) as served:
        assert httpx.get(served.url + "/v1/models").status_code == 401
        assert httpx.get(served.url + "/v1/models", headers={"x-api-key": KEY}).status_code == 200
        served.process.send_signal(signal.SIGTERM)
        served.process.wait(30)
        assert served.process.stderr is not None
        warning = served.startup + served.process.stderr.read().decode()
    assert "/proc/PID/cmdline" in warning
    assert "JARVIS_API_KEY" in warning


# -- a Unix socket ---------------------------------------------------------------------------


def _wait_for_socket(process: subprocess.Popen[bytes], client: httpx.Client) -> None:
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise AssertionError(process.stderr.read().decode() if process.stderr else "")
        try:
            if client.get("http://localhost/health").status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "jarvis serve --unix did not start"
        time.sleep(0.05)


def _curl_unix(path: Path, uid: int, gid: int, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["curl", "-sS", *args, "--unix-socket", str(path), "http://localhost/v1/models"],
        capture_output=True,
        timeout=60,
        user=uid,
        group=gid,
        extra_groups=[],
        cwd="/",
    )


def test_a_unix_socket_is_its_owners_alone(stub_server: StubServer) -> None:
    """``--unix PATH``: mode 0600 from its creation; the owner is served over it, another
    user cannot even connect (in a folder that user may walk through), and if the mode is
    opened the connection's ``SO_PEERCRED`` user is refused."""
    with open_directory("jsg") as folder, throwaway_user("jsg") as (uid, gid):
        path = folder / "jarvis.sock"
        process = subprocess.Popen(
            [sys.executable, "-m", "jarvis", "serve", "--unix", str(path), *_engine(stub_server)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            with httpx.Client(transport=httpx.HTTPTransport(uds=str(path))) as client:
                _wait_for_socket(process, client)
                mode = stat.S_IMODE(path.lstat().st_mode)
                mine = client.get("http://localhost/v1/models")
                created = client.post("http://localhost/v1/managed-agents", json={"id": "u"})
            theirs = _curl_unix(path, uid, gid)
            path.chmod(0o666)  # opened by mistake: the user check still refuses them
            opened = _curl_unix(path, uid, gid, "-w", "\n%{http_code}")
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(30)
    assert mode == 0o600
    assert mine.status_code == 200
    assert created.status_code == 201
    assert theirs.returncode == 7  # could not connect
    assert theirs.stdout == b""
    assert opened.returncode == 0
    assert opened.stdout.endswith(b"\n403")
    assert b"user_not_allowed" in opened.stdout
    assert not path.exists()  # removed when the server stopped
