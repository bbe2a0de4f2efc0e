"""The isolated REPL with real worker processes: the contract, then everything hostile code
tries. Every hostile test also checks that the host is unharmed and the session goes on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from contracts.repl_contract import RecordingCallbacks, ReplContract
from jarvis.adapters.subprocess_repl import SubprocessRepl, SubprocessReplSession
from jarvis.adapters.subprocess_repl.sandbox import NetworkMode
from jarvis.domain.repl import ReplLimits

pytestmark = pytest.mark.integration

HOSTILE = ReplLimits(
    timeout_seconds=3.0,
    cpu_seconds=30.0,
    memory_mb=256,
    max_processes=16,
    max_output_chars=2000,
)


@pytest.fixture(scope="module")
def auto_repl() -> SubprocessRepl:
    """The REPL as jarvis uses it: the strongest sandbox plan this machine allows."""
    repl = SubprocessRepl(limits=HOSTILE)
    repl.plan()
    _ = repl.python
    return repl


@pytest.fixture(scope="module")
def audit_repl() -> SubprocessRepl:
    """The fallback plan (audit hook, no namespaces), forced even where namespaces work."""
    repl = SubprocessRepl(limits=HOSTILE, network="unsafe-audit-hook-only")
    repl.plan()
    _ = repl.python
    return repl


@pytest.fixture(params=["auto", "unsafe-audit-hook-only"])
def any_repl(
    request: pytest.FixtureRequest, auto_repl: SubprocessRepl, audit_repl: SubprocessRepl
) -> SubprocessRepl:
    mode: NetworkMode = request.param
    return auto_repl if mode == "auto" else audit_repl


@pytest.fixture
async def session(any_repl: SubprocessRepl) -> AsyncIterator[SubprocessReplSession]:
    session = await any_repl.start(callbacks=RecordingCallbacks())
    try:
        yield session
    finally:
        await session.aclose()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError):
        return status.read_text().split()[2] != "Z"
    return False


def _processes_of(uid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("Uid:") and int(line.split()[1]) == uid:
                    found.append(int(entry.name))
    return found


def _host_untouched(outside: Path, target: Path) -> bool:
    """Nothing was created outside the working directory and the victim file is intact."""
    return (
        not outside.exists()
        and target.read_text() == "original"
        and not Path("/etc/jarvis-escape").exists()
        and not Path("/tmp/jarvis-escape").exists()
        and not Path("/tmp/jarvis-escape-dir").exists()
    )


class TestSubprocessRepl(ReplContract[SubprocessRepl]):
    @pytest.fixture
    def repl(self, auto_repl: SubprocessRepl) -> SubprocessRepl:
        return auto_repl


class TestSubprocessReplInAuditMode(ReplContract[SubprocessRepl]):
    @pytest.fixture
    def repl(self, audit_repl: SubprocessRepl) -> SubprocessRepl:
        return audit_repl


# -- what is in force -----------------------------------------------------------------------


def test_the_os_sandbox_is_chosen_where_the_os_allows(auto_repl: SubprocessRepl) -> None:
    isolation = auto_repl.isolation()
    if not isolation.runs_code:
        pytest.skip(f"no OS sandbox on this machine: {isolation.unavailable_reason}")
    assert isolation.isolated
    assert isolation.sandbox == "bubblewrap"
    assert isolation.network == "namespace"
    assert isolation.processes == "pid_namespace"
    assert auto_repl.plan().name == ("bwrap-root" if os.geteuid() == 0 else "bwrap-user")
    assert "NO" not in isolation.describe()


def test_the_unsafe_opt_out_says_so(audit_repl: SubprocessRepl) -> None:
    isolation = audit_repl.isolation()
    assert not isolation.isolated
    described = isolation.describe()
    assert "NO OS SANDBOX" in described
    assert "audit hook only" in described
    assert "WRITES NOT CONFINED" in described


def test_the_worker_runs_without_jarvis_site_packages(auto_repl: SubprocessRepl) -> None:
    command = auto_repl.command()
    assert command[:4] == (auto_repl.python, "-I", "-S", "-B")


async def test_the_worker_has_no_interfaces_but_loopback_in_its_namespace(
    auto_repl: SubprocessRepl,
) -> None:
    if auto_repl.isolation().network != "namespace":
        pytest.skip("no network namespace on this machine")
    session = await auto_repl.start()
    try:
        result = await session.execute(
            "lines = open('/proc/net/dev').read().splitlines()[2:]\n"
            "sorted(line.split(':')[0].strip() for line in lines)"
        )
        assert result.value == "['lo']"
    finally:
        await session.aclose()


# -- limits ---------------------------------------------------------------------------------


async def test_an_endless_loop_is_killed_at_the_timeout_and_the_session_goes_on(
    session: SubprocessReplSession,
) -> None:
    await session.set_variable("context", "kept by the host")
    await session.execute("mine = 'lost'")
    old_pid = session.worker_pid
    assert old_pid is not None
    started = time.monotonic()
    result = await session.execute("while True:\n    pass")
    elapsed = time.monotonic() - started
    assert result.error_kind == "timeout"
    assert result.error is not None
    assert "timed out" in result.error
    assert "lost" in result.error
    # killed at the timeout: never before it, and not long after (the margin is for a
    # loaded machine: an execution that is not killed runs forever)
    assert HOSTILE.timeout_seconds <= elapsed < HOSTILE.timeout_seconds + 30
    assert not _alive(old_pid)
    after = await session.execute("context")
    assert after.restarted
    assert after.value == "'kept by the host'"
    assert "restarted" in after.observation()
    gone = await session.execute("mine")
    assert gone.error is not None
    assert "NameError" in gone.error
    assert not gone.restarted


async def test_cpu_time_is_limited_per_execution(any_repl: SubprocessRepl) -> None:
    session = await any_repl.start(
        limits=ReplLimits(timeout_seconds=30, cpu_seconds=1.0, max_output_chars=500)
    )
    try:
        await session.execute("kept = 1")
        result = await session.execute("while True:\n    pass")
        assert result.error_kind == "cpu_limit"  # not "timeout": the CPU limit stopped it
        assert (await session.execute("kept")).value == "1"
    finally:
        await session.aclose()


async def test_a_memory_bomb_hits_the_memory_limit(any_repl: SubprocessRepl) -> None:
    """The memory limit stops the bomb, whatever the time it takes to get there: a machine
    busy compacting or reclaiming memory can make 256 MB of page faults take seconds, so
    the session's timeout is far beyond it (with ``HOSTILE``'s 3 s, the timeout could
    stop the bomb first)."""
    session = await any_repl.start(limits=replace(HOSTILE, timeout_seconds=120.0))
    try:
        await session.execute("kept = 'still here'")
        big = await session.execute("blob = bytearray(4 * 1024 ** 3)")
        assert big.error_kind == "memory_limit"
        growing = await session.execute(
            "chunks = []\nwhile True:\n    chunks.append(' ' * 10 ** 6)"
        )
        assert growing.error_kind in ("memory_limit", "crashed"), growing
        after = await session.execute("kept if 'kept' in dir() else 'restarted'")
        assert after.ok
    finally:
        await session.aclose()


async def test_a_fork_bomb_hits_its_limit_and_leaves_nothing_behind(
    session: SubprocessReplSession,
) -> None:
    uid_result = await session.execute("import os\nos.getuid()")
    assert uid_result.value is not None
    uid = int(uid_result.value)
    result = await session.execute("import os\nwhile True:\n    os.fork()")
    assert not result.ok
    assert result.error_kind in ("exception", "timeout")
    if session.isolation.processes == "pid_namespace":
        assert result.error is not None
        assert "BlockingIOError" in result.error
    else:
        assert result.error is not None
        assert "not allowed" in result.error
    assert (await session.execute("1 + 1")).value == "2"
    if uid != os.geteuid():
        # the throwaway user has nothing left but the worker itself (in the sandbox: with
        # bwrap and its init)
        assert len(_processes_of(uid)) <= (3 if session.isolation.sandbox else 1)


async def test_a_forked_child_cannot_answer_for_the_worker(auto_repl: SubprocessRepl) -> None:
    if not auto_repl.plan().allow_fork:
        pytest.skip("this plan refuses forking")
    session = await auto_repl.start(callbacks=RecordingCallbacks())
    try:
        result = await session.execute(
            "import os, time\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    print('child')\n"
            "    llm_query('from the child')\n"
            "else:\n"
            "    os.waitpid(pid, 0)\n"
            "    print('parent')\n"
        )
        assert result.ok, result
        assert result.stdout == "parent\n"
    finally:
        await session.aclose()


async def test_a_big_file_hits_the_file_size_limit(any_repl: SubprocessRepl) -> None:
    session = await any_repl.start(
        limits=ReplLimits(timeout_seconds=20, file_size_mb=1, max_output_chars=500)
    )
    try:
        result = await session.execute("open('big.bin', 'wb').write(b'x' * (2 * 1024 * 1024))")
        assert result.error is not None
        assert "File too large" in result.error
        assert (await session.execute("'alive'")).value == "'alive'"
    finally:
        await session.aclose()


async def test_printing_gigabytes_is_bounded(any_repl: SubprocessRepl) -> None:
    """A gigabyte printed, then 200 MB written raw, reach the host as the bounded output;
    the session's timeout is far beyond what that takes on a busy machine, so that the
    raw writes finish (``HOSTILE``'s 3 s could cut them)."""
    session = await any_repl.start(limits=replace(HOSTILE, timeout_seconds=120.0))
    try:
        result = await session.execute(
            "import sys\nline = 'x' * 1000\nfor _ in range(1_000_000):\n    print(line)"
        )
        assert result.ok, result
        assert len(result.stdout) <= HOSTILE.max_output_chars + 100
        assert result.truncated
        assert "more characters" in result.stdout
        raw = await session.execute(
            "import os\nfor _ in range(100):\n    os.write(1, b'y' * 1_000_000)\n"
            "for _ in range(100):\n    os.write(2, b'z' * 1_000_000)\n'done'"
        )
        assert raw.value == "'done'", raw
        assert len(raw.stdout) <= HOSTILE.max_output_chars + 100
    finally:
        await session.aclose()


async def test_forging_protocol_lines_only_restarts_the_interpreter(
    session: SubprocessReplSession,
) -> None:
    result = await session.execute(
        "import os\n"
        "for fd in range(3, 12):\n"
        "    try:\n"
        '        os.write(fd, b\'{"type": "result", "forged": true}\\n\')\n'
        "    except OSError:\n"
        "        pass\n"
    )
    assert result.error_kind in ("crashed", None)
    follow = await session.execute("40 + 2")
    assert follow.value == "42"


async def test_a_dying_interpreter_is_an_error_and_the_next_one_starts_fresh(
    session: SubprocessReplSession,
) -> None:
    await session.set_variable("context", "ctx")
    died = await session.execute("import os\nos._exit(7)")
    assert died.error_kind == "crashed"
    assert died.error is not None
    assert "status 7" in died.error
    aborted = await session.execute("import os\nos.abort()")
    assert aborted.error_kind == "crashed"
    # SIGABRT; inside a PID namespace the worker is process 1, which ignores signals it
    # sends itself, so abort() ends in SIGSEGV there
    assert aborted.error is not None
    assert "SIGABRT" in aborted.error or "SIGSEGV" in aborted.error
    assert aborted.restarted
    again = await session.execute("context")
    assert again.value == "'ctx'"


async def test_exits_and_interrupts_raised_by_the_code_are_errors(
    session: SubprocessReplSession,
) -> None:
    for code in ("raise SystemExit(3)", "raise KeyboardInterrupt", "import sys\nsys.exit()"):
        result = await session.execute(code)
        assert result.error_kind == "exception", code
    assert (await session.execute("'alive'")).value == "'alive'"


async def test_cancelling_an_execution_kills_the_interpreter(
    session: SubprocessReplSession,
) -> None:
    pid = session.worker_pid
    assert pid is not None
    task = asyncio.ensure_future(session.execute("while True:\n    pass"))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not _alive(pid)
    result = await session.execute("'fresh'")
    assert result.restarted
    assert result.value == "'fresh'"


async def test_an_oversized_callback_is_an_error_in_the_code(
    session: SubprocessReplSession,
) -> None:
    result = await session.execute("llm_query('x' * 9_000_000)")
    assert result.error is not None
    assert "too large" in result.error
    assert not result.restarted
    assert (await session.execute("'alive'")).value == "'alive'"


async def test_time_spent_answering_callbacks_does_not_count(any_repl: SubprocessRepl) -> None:
    class SlowCallbacks(RecordingCallbacks):
        async def llm_query(self, prompt: str) -> str:
            await asyncio.sleep(1.0)
            return "slow answer"

    # the callbacks take 3 s in all, past the 2 s timeout; the code's own time (with the
    # round trips, slower on a loaded machine) has the whole 2 s
    session = await any_repl.start(
        callbacks=SlowCallbacks(), limits=ReplLimits(timeout_seconds=2.0)
    )
    try:
        result = await session.execute("[llm_query(str(i)) for i in range(3)][-1]")
        assert result.value == "'slow answer'"
    finally:
        await session.aclose()


# -- escapes --------------------------------------------------------------------------------


async def test_the_host_environment_does_not_reach_the_code(
    any_repl: SubprocessRepl, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-" + uuid.uuid4().hex
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    session = await any_repl.start()
    try:
        env = await session.execute("import os\ndict(os.environ)")
        assert env.value is not None
        assert secret not in env.value
        assert "OPENAI_API_KEY" not in env.value
        key = await session.execute("os.environ['OPENAI_API_KEY']")
        assert key.error is not None
        assert "KeyError" in key.error
        parent = await session.execute(f"open('/proc/{os.getpid()}/environ', 'rb').read()")
        assert parent.error is not None
        assert secret not in parent.observation()
        home = await session.execute("os.environ['HOME'] == os.getcwd()")
        assert home.value == "True"
    finally:
        await session.aclose()


async def test_writing_outside_the_working_directory_fails(
    session: SubprocessReplSession, tmp_path: Path
) -> None:
    outside = Path("/tmp") / f"jarvis-escape-{uuid.uuid4().hex}"
    target = tmp_path / "victim.txt"
    target.write_text("original")
    attempts = [
        f"open({str(outside)!r}, 'w').write('x')",
        f"import pathlib\npathlib.Path({str(outside)!r}).write_text('x')",
        f"import os\nos.mkdir({str(outside)!r})",
        f"import os\nos.open({str(outside)!r}, os.O_WRONLY | os.O_CREAT)",
        f"open({str(target)!r}, 'a').write('x')",
        f"import os\nos.remove({str(target)!r})",
        "import os\nos.symlink('/etc', 'link')\nopen('link/jarvis-escape', 'w')",
        f"import shutil\nshutil.copy('/etc/hostname', {str(outside)!r})",
        f"import sqlite3\nsqlite3.connect({str(outside)!r}).execute('create table t (x)')",
        "import os\nfd = os.open('/tmp', os.O_RDONLY)\nos.mkdir('jarvis-escape-dir', dir_fd=fd)",
        "import os\nfd = os.open('/tmp', os.O_RDONLY)\n"
        "os.open('jarvis-escape', os.O_WRONLY | os.O_CREAT, dir_fd=fd)",
    ]
    for code in attempts:
        result = await session.execute(code)
        assert result.error is not None, code
    assert _host_untouched(outside, target)
    inside = await session.execute("open('notes.txt', 'w').write('mine')\nopen('notes.txt').read()")
    assert inside.value == "'mine'"
    tidy = await session.execute(
        "import os, shutil, sqlite3\nos.makedirs('a/b')\nopen('a/b/c', 'w').close()\n"
        "sqlite3.connect('db.sqlite').execute('create table t (x)')\n"
        "shutil.rmtree('a')\nsorted(os.listdir('.')), len(os.listdir('/usr')) > 0"
    )
    assert tidy.value == "(['db.sqlite', 'link', 'notes.txt'], True)", tidy


async def test_opening_a_network_connection_fails(session: SubprocessReplSession) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        attempts = [
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)",
            f"import socket\ns = socket.socket()\ns.connect(('127.0.0.1', {port}))",
            f"import urllib.request\nurllib.request.urlopen('http://127.0.0.1:{port}/', timeout=2)",
            "import socket\nsocket.socket().bind(('0.0.0.0', 0))",
            "import socket\nsocket.getaddrinfo('example.org', 80)",
        ]
        for code in attempts:
            result = await session.execute(code)
            assert result.error is not None, code
        server.settimeout(0.2)
        with pytest.raises(TimeoutError):
            server.accept()


async def test_programs_ctypes_and_heap_walking_are_refused(
    session: SubprocessReplSession,
) -> None:
    for code in (
        "import subprocess\nsubprocess.run(['id'])",
        "import os\nos.system('id')",
        "import os\nos.execv('/bin/sh', ['sh'])",
        "import ctypes",
        "import gc\ngc.get_objects()",
    ):
        result = await session.execute(code)
        assert result.error is not None, code
        assert "not allowed" in result.error, code
    assert (await session.execute("'alive'")).value == "'alive'"


async def test_closing_removes_the_working_directory_and_the_process(
    any_repl: SubprocessRepl,
) -> None:
    session = await any_repl.start()
    await session.execute("open('scratch.txt', 'w').write('x')")
    workdir = session.workdir
    pid = session.worker_pid
    assert pid is not None
    assert (workdir / "scratch.txt").exists()
    await session.aclose()
    assert not workdir.exists()
    assert not _alive(pid)


async def test_a_one_megabyte_context_round_trips(session: SubprocessReplSession) -> None:
    text = ("0123456789abcdef" * 65536)[:1_000_000]
    await session.set_variable("context", text)
    result = await session.execute("len(context), context[:4], context[-4:]")
    assert result.value == repr((1_000_000, "0123", text[-4:]))


async def test_without_an_os_sandbox_code_does_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """No bwrap (or no user namespaces): a clear refusal, never a weaker fallback."""
    from jarvis.adapters.subprocess_repl import sandbox
    from jarvis.application.tools.code_interpreter import CodeInterpreterTool
    from jarvis.domain.errors import SandboxError

    monkeypatch.setattr(sandbox, "bwrap_candidates", list)
    repl = SubprocessRepl(limits=HOSTILE)
    assert not repl.isolation().runs_code
    assert "NO SANDBOX AVAILABLE" in repl.isolation().describe()
    with pytest.raises(SandboxError) as raised:
        await repl.start()
    message = f"{raised.value} {getattr(raised.value, 'hint', '')}"
    assert "-a sandboxed" in message
    assert "unsafe-audit-hook-only" in message
    outcome = await CodeInterpreterTool(repl, limits=HOSTILE).execute({"code": "print(1)"})
    assert not outcome.success
    assert "does not run here" in outcome.content
    assert "unsafe-audit-hook-only" in outcome.content


async def test_at_most_max_sessions_interpreters_run_at_once() -> None:
    repl = SubprocessRepl(limits=HOSTILE, max_sessions=2)
    if not repl.isolation().runs_code:
        pytest.skip(repl.isolation().describe())
    from jarvis.application.tools.code_interpreter import CodeInterpreterTool
    from jarvis.domain.errors import SandboxError

    first, second = await repl.start(), await repl.start()
    try:
        with pytest.raises(SandboxError, match="at most 2"):
            await repl.start()
        refused = await CodeInterpreterTool(repl, limits=HOSTILE).execute({"code": "1"})
        assert not refused.success
        assert "Too many Python interpreters" in refused.content
    finally:
        await first.aclose()
    third = await repl.start()  # a slot is free again
    await third.aclose()
    await second.aclose()


async def test_a_flood_of_callbacks_hits_the_sessions_budget(any_repl: SubprocessRepl) -> None:
    limits = ReplLimits(timeout_seconds=20, max_callbacks=50, max_output_chars=2000)
    session = await any_repl.start(callbacks=RecordingCallbacks(), limits=limits)
    try:
        result = await session.execute(
            "n = 0\ntry:\n    while True:\n        tool_call('calculator', expression='1')\n"
            "        n += 1\nexcept ReplCallbackError as e:\n    print(e)\nn"
        )
        assert result.value == "50", result
        assert "callback budget exhausted" in result.stdout
        # the budget is the session's: later executions do not get a fresh one
        again = await session.execute("llm_query('more?')")
        assert again.error is not None
        assert "budget" in again.error
    finally:
        await session.aclose()


async def test_slow_callbacks_cannot_stretch_an_execution_forever(any_repl: SubprocessRepl) -> None:
    class StuckCallbacks(RecordingCallbacks):
        async def llm_query(self, prompt: str) -> str:
            await asyncio.Event().wait()  # never answers
            return ""

    # the execution's own timeout is far away, so only the callback bound can end it soon
    limits = ReplLimits(timeout_seconds=120, callback_seconds=1.0)
    session = await any_repl.start(callbacks=StuckCallbacks(), limits=limits)
    try:
        started = time.monotonic()
        result = await session.execute("llm_query('hello?')")
        assert result.error_kind == "timeout", result
        assert time.monotonic() - started < 60
        assert (await session.execute("'alive'")).value == "'alive'"
    finally:
        await session.aclose()
