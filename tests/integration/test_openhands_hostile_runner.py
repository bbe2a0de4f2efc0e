"""The openhands adapter against a runner that misbehaves: an "interpreter" that passes the
probe and then, instead of the real runner, floods, hangs or lies. No SDK needed: this is
what a changed, broken or hostile runtime can do that the real one will not do on cue."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.external_runtime_contract import collect, done
from jarvis.adapters.openhands_sdk import OpenHandsRuntime
from jarvis.adapters.openhands_sdk.wire import END, MAX_LINE, START
from jarvis.domain.errors import ExternalRuntimeError
from jarvis.domain.external_runtime import ExternalRunRequest, ExternalTextDelta
from tests.support.jail import visible_python
from tests.support.openhands import openhands_processes, own_temp_dir, private_dirs

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _own_temp_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from own_temp_dir(monkeypatch)


FINAL = '{"content": "ok", "session_id": "%s", "turns": 1, "is_error": false}'


def _interpreter(tmp_path: Path, body: str) -> str:
    """A fake Python: answers the probe as a 3.12 with the SDK, runs ``body`` otherwise."""
    program = tmp_path / "behaviour.py"
    program.write_text(body)
    fake = tmp_path / "python3.12"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$2" = "-c" ]; then echo "3.12.9 1"; exit 0; fi\n'
        f'exec {visible_python()} -I {program} "$@"\n'
    )
    fake.chmod(0o755)
    return str(fake)


def _request(tmp_path: Path, timeout: float = 30) -> ExternalRunRequest:
    return ExternalRunRequest(
        prompt="x",
        workspace=str(tmp_path),
        model="m",
        base_url="http://127.0.0.1:9/v1",
        timeout=timeout,
    )


async def test_an_overlong_line_and_a_flooded_stderr_cost_nothing(tmp_path: Path) -> None:
    """A line past the bound is dropped unread into memory, 32 MiB on stderr is drained
    (a full pipe would stall the runner), the events and the result around them arrive."""
    body = f"""
import json, sys
request = json.load(sys.stdin)
sys.stderr.write(("e" * 1023 + "\\n") * 32 * 1024)
sys.stdout.write(json.dumps({{"type": "text_delta", "text": "o"}}) + "\\n")
sys.stdout.write("{{" + "x" * {MAX_LINE * 2} + "\\n")
sys.stdout.write(json.dumps({{"type": "text_delta", "text": "k"}}) + "\\n")
print({START!r}); print({FINAL!r} % request["conversation_id"]); print({END!r})
"""
    runtime = OpenHandsRuntime(data_dir=tmp_path / "data", python=_interpreter(tmp_path, body))
    events = await collect(runtime, _request(tmp_path))
    result = done(events)
    assert result.content == "ok"
    assert "".join(e.text for e in events if isinstance(e, ExternalTextDelta)) == "ok"


async def test_a_runner_that_exits_without_a_result_shows_its_last_words(tmp_path: Path) -> None:
    body = "import sys\nsys.stderr.write('something broke\\n')\n"
    runtime = OpenHandsRuntime(data_dir=tmp_path / "data", python=_interpreter(tmp_path, body))
    with pytest.raises(ExternalRuntimeError, match="ended without a result") as caught:
        await collect(runtime, _request(tmp_path))
    assert "something broke" in caught.value.hint


async def test_a_runner_that_closes_stdout_and_hangs_is_stopped_at_the_timeout(
    tmp_path: Path,
) -> None:
    """It hands back its stdout and stays, with a child that ignores SIGTERM: the deadline
    still holds and the whole tree goes."""
    body = """
import os, signal, subprocess, sys, time
subprocess.Popen(["/bin/sh", "-c", "trap '' TERM HUP; exec sleep 600"], start_new_session=True)
os.close(1)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(600)
"""
    runtime = OpenHandsRuntime(data_dir=tmp_path / "data", python=_interpreter(tmp_path, body))
    before = set(openhands_processes())
    started = time.monotonic()
    with pytest.raises(ExternalRuntimeError, match="did not finish within 2 s"):
        await collect(runtime, _request(tmp_path, timeout=2))
    assert time.monotonic() - started < 60  # the tree sleeps 600 s; a margin for load
    assert set(openhands_processes()) == before
    assert private_dirs() == []


async def test_a_runner_that_reports_success_without_the_marker_is_an_error(
    tmp_path: Path,
) -> None:
    body = f'import sys\nprint({START!r})\nprint(\'{{"is_error": false, "content": "half"\')\n'
    runtime = OpenHandsRuntime(data_dir=tmp_path / "data", python=_interpreter(tmp_path, body))
    with pytest.raises(ExternalRuntimeError, match="ended without a result"):
        await collect(runtime, _request(tmp_path))
    assert not runtime.running
    noted = tmp_path / "data" / "workspaces"
    assert not await asyncio.to_thread(noted.exists)  # a failed run is no "last session"


async def test_a_runner_naming_another_conversation_cannot_steer_the_files(
    tmp_path: Path,
) -> None:
    """Its result names a path as its conversation: the run keeps the conversation it
    asked for, and nothing is written outside the conversations dir."""
    escape = "../../escaped"
    body = (
        "import json, sys\nsys.stdin.read()\n"
        f"print({START!r}); print({FINAL!r} % {escape!r}); print({END!r})\n"
    )
    data = tmp_path / "deep" / "data"
    runtime = OpenHandsRuntime(data_dir=data, python=_interpreter(tmp_path, body))
    result = done(await collect(runtime, _request(tmp_path)))
    assert result.session_id != escape
    assert len(result.session_id) == 32
    assert not await asyncio.to_thread((tmp_path / "escaped").exists)
    assert not await asyncio.to_thread((tmp_path / "deep" / "escaped").exists)


_LEAVE_LOCKED_FOLDERS = """
import asyncio, os, sys
from pathlib import Path
from jarvis.adapters.openhands_sdk.process import RunnerProcess

def locked(runner):
    '''What the agent's tools may leave in their TMPDIR: a folder without write permission
    and one without read permission, each holding a file.'''
    for name, mode in (("readonly", 0o500), ("unlistable", 0o300)):
        folder = Path(runner.private) / "tmp" / name
        folder.mkdir(parents=True)
        (folder / "left").write_text("x")
        folder.chmod(mode)
    return runner.private

first = RunnerProcess(sys.executable, Path(sys.argv[1]))
private = locked(first)
first.stop_now()
second = RunnerProcess(sys.executable, Path(sys.argv[1]))
private_2 = locked(second)
asyncio.run(second.stop())
print(os.path.lexists(private), os.path.lexists(private_2))
"""


def test_folders_the_agent_locked_do_not_survive_the_cleanup(tmp_path: Path) -> None:
    """As an ordinary user (created here when the suite runs as root), where permissions
    bind: the private HOME/TMPDIR goes whatever the agent's tools did to its folders."""
    import os
    import shutil
    import subprocess

    from tests.integration.test_repl_attacks import ATTACK_USER, REPO, _site_packages

    command = [sys.executable, "-c", _LEAVE_LOCKED_FOLDERS]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{REPO / 'src'}:{_site_packages()}"}
    if os.geteuid() == 0:
        if subprocess.run(["id", ATTACK_USER], capture_output=True, check=False).returncode:
            useradd = shutil.which("useradd") or "/usr/sbin/useradd"
            subprocess.run([useradd, "--create-home", ATTACK_USER], check=True)
        python = Path("/usr/bin/python3")
        if not python.exists() or sys.version_info[:2] != (3, 11):
            pytest.skip("needs /usr/bin/python3 of the same minor version as the suite")
        runuser = shutil.which("runuser") or "/usr/sbin/runuser"
        command = [runuser, "-u", ATTACK_USER, "--", str(python), "-c", _LEAVE_LOCKED_FOLDERS]
    completed = subprocess.run(
        [*command, "/nonexistent"],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.split() == ["False", "False"], completed.stdout
