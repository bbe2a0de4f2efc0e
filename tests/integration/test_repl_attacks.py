"""Hostile model-written code against the REPL, as an attacker would try it.

Every test runs as whoever runs the suite (root on CI) and, through
``test_every_attack_holds_as_an_ordinary_user``, once more as an ordinary user the test
creates (``useradd``), on Debian's ``/usr/bin/python3``. Each attack checks the host side
too: the secret never appears in what the code saw, nothing was written outside, nothing
of the code is left running, its directory is gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from jarvis.adapters.subprocess_repl import SubprocessRepl, SubprocessReplSession
from jarvis.domain.repl import ReplLimits
from tests.support.users import ensure_user

pytestmark = pytest.mark.integration

LIMITS = ReplLimits(timeout_seconds=15.0, memory_mb=256, max_processes=32, max_output_chars=20_000)
REPO = Path(__file__).resolve().parents[2]

SPAWN = textwrap.dedent(
    """
    import os, _posixsubprocess
    def spawn(*argv, setsid=True):
        r, w = os.pipe()
        pid = _posixsubprocess.fork_exec(
            [a.encode() for a in argv], [argv[0].encode()], True, (), None, None,
            -1, -1, -1, -1, -1, -1, r, w, True, setsid, -1, None, None, None, -1, None,
            False)
        os.close(w)
        os.read(r, 100)
        os.close(r)
        return pid
    """
)


def _marker() -> str:
    """A number no other process has on its command line (``sleep`` takes it)."""
    return f"{3000 + int(uuid.uuid4().int % 500)}.{uuid.uuid4().int % 10**9:09d}"


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def _exists(path: str) -> bool:
    return os.path.lexists(path)


def _wait_until(condition: object, timeout: float = 10.0) -> bool:
    """Poll a condition the system settles into (processes dying), at most ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return bool(condition())  # type: ignore[operator]


@pytest.fixture(scope="module")
def repl() -> Iterator[SubprocessRepl]:
    repl = SubprocessRepl(limits=LIMITS)
    isolation = repl.isolation()
    if not getattr(isolation, "runs_code", True):
        pytest.skip(f"no OS sandbox here: {isolation.describe()}")
    yield repl
    with contextlib.suppress(AttributeError):
        repl.close()


@pytest.fixture
async def session(repl: SubprocessRepl) -> AsyncIterator[SubprocessReplSession]:
    session = await repl.start()
    try:
        yield session
    finally:
        await session.aclose()


@pytest.fixture
def secret_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """``~/.ssh/id_rsa`` (mode 600) of the running user; as root, in a stand-in home
    (the real /root is not touched)."""
    secret = "-----BEGIN OPENSSH PRIVATE KEY----- " + uuid.uuid4().hex
    home = Path.home() if os.geteuid() != 0 else tmp_path_factory.mktemp("home")
    ssh = home / ".ssh"
    ssh.mkdir(mode=0o700, exist_ok=True)
    key = ssh / "id_rsa"
    key.write_text(secret)
    key.chmod(0o600)
    yield key, secret
    key.unlink()


# -- reading what belongs to the user or the host -------------------------------------------


async def test_the_users_private_key_is_out_of_reach(
    session: SubprocessReplSession, secret_file: tuple[Path, str]
) -> None:
    key, secret = secret_file
    result = await session.execute(
        f"import os\nout = []\nfor p in [{str(key)!r}, os.path.expanduser('~/.ssh/id_rsa'), "
        f"{str(Path.home() / '.ssh' / 'id_rsa')!r}]:\n"
        "    try:\n        out.append(open(p).read())\n"
        "    except OSError as e:\n        out.append(type(e).__name__)\n"
        f"try:\n    out.append(os.listdir({str(key.parent.parent)!r}))\n"
        "except OSError as e:\n    out.append(type(e).__name__)\nout"
    )
    assert secret not in result.observation(), result
    assert "id_rsa" not in (result.value or ""), result


async def test_the_hosts_environment_and_memory_are_out_of_reach(
    session: SubprocessReplSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-attack-" + uuid.uuid4().hex
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    host = os.getpid()
    result = await session.execute(
        f"out = []\nfor p in ['/proc/{host}/environ', '/proc/{host}/mem', '/proc/1/environ']:\n"
        "    try:\n        f = open(p, 'rb')\n        out.append(f.read(1 << 20))\n"
        "    except OSError as e:\n        out.append(type(e).__name__)\nout"
    )
    assert secret not in result.observation(), result
    assert str(REPO) not in result.observation()


async def test_the_hosts_sys_is_not_there(session: SubprocessReplSession) -> None:
    result = await session.execute(
        "import os\nout = []\nfor p in ['/sys', '/sys/class/net', '/sys/kernel']:\n"
        "    try:\n        out.append(os.listdir(p))\n"
        "    except OSError as e:\n        out.append(type(e).__name__)\nout"
    )
    assert result.value is not None, result
    assert "'lo'" not in result.value, result
    assert "'mm'" not in result.value, result
    assert "FileNotFoundError" in result.value


# -- writing outside -----------------------------------------------------------------------


async def test_dir_fd_writes_after_chdir_stay_inside(session: SubprocessReplSession) -> None:
    name = f"jarvis-escape-{uuid.uuid4().hex}"
    parent = session.workdir.parent
    result = await session.execute(
        "import os\nos.makedirs('sub', exist_ok=True)\nfd = os.open('.', os.O_RDONLY)\n"
        "os.chdir('sub')\n"
        f"os.close(os.open('../{name}', os.O_WRONLY | os.O_CREAT, dir_fd=fd))\n'written'"
    )
    assert not (parent / name).exists(), result
    assert not (Path.home() / name).exists()


async def test_nothing_is_left_in_tmp(session: SubprocessReplSession) -> None:
    name = f"jarvis-left-{uuid.uuid4().hex}"
    result = await session.execute(
        SPAWN + f"import os\npid = spawn('/bin/sh', '-c', 'echo x > /tmp/{name}')\n"
        "os.waitpid(pid, 0)\nos.path.exists('/tmp/" + name + "')"
    )
    assert result.error is None or "not allowed" not in result.error, result
    assert not _exists(os.path.join(tempfile.gettempdir(), name)), result
    assert not _exists(f"/tmp/{name}")


# -- processes -----------------------------------------------------------------------------


async def test_programs_started_behind_the_hooks_back_die_with_the_session(
    repl: SubprocessRepl,
) -> None:
    marker, forked = _marker(), _marker()
    session = await repl.start()
    try:
        result = await session.execute(
            SPAWN + f"spawn('/bin/sleep', '{marker}')\n"
            "import os\npid = os.fork()\nif pid == 0:\n    os.setsid()\n"
            f"    spawn('/bin/sleep', '{forked}', setsid=False)\n    os._exit(0)\n"
            "os.waitpid(pid, 0)\n'started'"
        )
        assert result.error is None or "not allowed" in result.error, result
    finally:
        await session.aclose()
    assert _wait_until(lambda: not _processes_with(marker) and not _processes_with(forked))


async def test_a_hundred_processes_against_a_limit_of_32(session: SubprocessReplSession) -> None:
    marker = _marker()
    result = await session.execute(
        SPAWN + "started = 0\nfor _ in range(100):\n    try:\n"
        f"        spawn('/bin/sleep', '{marker}')\n        started += 1\n"
        "    except OSError:\n        break\nstarted"
    )
    running = len(_processes_with(marker))
    assert running <= LIMITS.max_processes, (running, result)
    if result.value is not None:
        assert int(result.value) < LIMITS.max_processes, result


async def test_forks_cannot_hold_more_memory_than_the_session_has(
    repl: SubprocessRepl,
) -> None:
    if repl.plan().cgroups is None:
        pytest.skip(
            "no cgroup for this user: the session's memory is sampled instead, which "
            "test_repl_attacks_memory.py attacks"
        )
    session = await repl.start()
    try:
        result = await session.execute(
            "import os, time\nr, w = os.pipe()\nfor i in range(8):\n"
            "    pid = os.fork()\n    if pid == 0:\n        try:\n"
            "            b = bytearray(150 * 1024 * 1024)\n"
            "            for j in range(0, len(b), 4096):\n                b[j] = 1\n"
            "            os.write(w, os.getpid().to_bytes(4, 'big'))\n"
            "        except MemoryError:\n            pass\n"
            "        time.sleep(60)\n        os._exit(0)\n"
            "os.close(w)\ntime.sleep(4)\nos.set_blocking(r, False)\n"
            "try:\n    data = os.read(r, 1000)\nexcept BlockingIOError:\n    data = b''\n"
            "holders = [int.from_bytes(data[i:i + 4], 'big') for i in range(0, len(data), 4)]\n"
            "sum(1 for p in holders if os.waitpid(p, os.WNOHANG) == (0, 0))"
        )
    finally:
        await session.aclose()
    assert result.value is not None, result
    assert int(result.value) * 150 <= LIMITS.memory_mb, result


# -- the network and the host's sockets ---------------------------------------------------------


async def test_no_loopback_listener_and_no_unix_socket_of_the_host_is_reachable(
    session: SubprocessReplSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tempfile.mkdtemp(prefix="jarvis-attack-sock-")
    os.chmod(folder, 0o777)
    path = Path(folder) / "s"
    with socket.socket() as tcp, socket.socket(socket.AF_UNIX) as unix:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        port = tcp.getsockname()[1]
        unix.bind(str(path))
        os.chmod(path, 0o777)
        unix.listen()
        probe = (
            "import socket\nout = []\n"
            f"for family, address in [(socket.AF_INET, ('127.0.0.1', {port})), "
            f"(socket.AF_UNIX, {str(path)!r})]:\n"
            "    try:\n        s = socket.socket(family)\n        s.settimeout(2)\n"
            "        s.connect(address)\n        out.append('CONNECTED')\n"
            "    except OSError as e:\n        out.append(type(e).__name__)\n"
        )
        # once in the interpreter, once in a program started behind the audit hook's back
        result = await session.execute(
            probe + "print(out)\n" + SPAWN + "import os, sys\n"
            f"pid = spawn(sys.executable, '-I', '-S', '-c', {probe!r} + "
            '\'open("probe.txt", "w").write(repr(out))\')\n'
            "os.waitpid(pid, 0)\nopen('probe.txt').read()"
        )
        assert result.value is not None, result
        assert "CONNECTED" not in result.value + result.stdout, result
        for server in (tcp, unix):
            server.settimeout(0.2)
            with pytest.raises(TimeoutError):
                server.accept()
    os.unlink(path)
    os.rmdir(folder)


# -- the audit hook --------------------------------------------------------------------------


async def test_a_str_subclass_cannot_switch_the_audit_hook_off(
    session: SubprocessReplSession,
) -> None:
    target = f"/tmp/jarvis-hook-{uuid.uuid4().hex}"
    attack = textwrap.dedent(
        f"""
        import sys
        class Path(str):
            def _disarm(self):
                frame = sys._getframe(1)
                while frame is not None:
                    for value in list(frame.f_locals.values()):
                        code = getattr(value, '__code__', None)
                        if callable(value) and code is not None and code.co_name != '_disarm':
                            try:
                                value.__code__ = (lambda *a, **k: None).__code__
                            except Exception:
                                pass
                    frame = frame.f_back
            def __repr__(self):
                self._disarm()
                return 'harmless'
            def __fspath__(self):
                self._disarm()
                return str.__str__(self)
            def startswith(self, *a):
                self._disarm()
                return True
            def __eq__(self, other):
                self._disarm()
                return True
            __hash__ = str.__hash__
        try:
            open(Path({target!r}), 'w').write('x')
        except OSError:
            pass
        """
    )
    await session.execute(attack)
    after = await session.execute("import ctypes")
    assert after.error is not None, after
    assert "not allowed" in after.error, after
    assert not _exists(target)


# -- cleanup -----------------------------------------------------------------------------------


async def test_a_read_only_subfolder_does_not_keep_the_directory(repl: SubprocessRepl) -> None:
    session = await repl.start()
    workdir = session.workdir
    result = await session.execute(
        "import os\nos.makedirs('a/b')\nopen('a/b/f', 'w').write('x')\n"
        "os.chmod('a/b', 0o500)\nos.chmod('a', 0o500)\n'locked'"
    )
    assert result.value == "'locked'", result
    await session.aclose()
    assert not workdir.exists()


@pytest.mark.parametrize("mode", [0o300, 0o000])
async def test_an_unreadable_subfolder_and_working_directory_do_not_stay(
    repl: SubprocessRepl, mode: int
) -> None:
    """Folders the host's user may not list or enter (as an ordinary user permissions
    bind): one inside, and the working directory itself made so once the code is done."""
    session = await repl.start()
    workdir = session.workdir
    result = await session.execute(
        "import os\nos.makedirs('a/b')\nopen('a/b/f', 'w').write('x')\n"
        f"os.chmod('a/b', {mode})\nos.chmod('a', {mode})\nos.chmod('/work', {mode})\n'locked'"
    )
    assert result.value == "'locked'", result
    await session.aclose()
    assert not workdir.exists()


_HOST_SCRIPT = textwrap.dedent(
    """
    import asyncio, signal, sys
    # a host as a terminal starts it: a suite run under nohup would pass SIGHUP on ignored
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    sys.path[:0] = {paths!r}
    from jarvis.adapters.subprocess_repl import SubprocessRepl
    from jarvis.domain.repl import ReplLimits

    class Callbacks:
        async def llm_query(self, prompt):
            print("READY", session.workdir, flush=True)
            await asyncio.sleep(3600)
        async def llm_batch(self, prompts):
            return []
        async def tool_call(self, name, arguments):
            raise RuntimeError("no tools")

    async def main():
        global session
        repl = SubprocessRepl(limits=ReplLimits(timeout_seconds=600))
        session = await repl.start(callbacks=Callbacks())
        await session.execute({code!r})

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_a_signal_to_the_host_leaves_no_sandbox_and_no_directory(
    number: signal.Signals, repl: SubprocessRepl
) -> None:
    marker, forked = _marker(), _marker()
    code = (
        SPAWN + f"spawn('/bin/sleep', '{marker}')\n"
        "import os\npid = os.fork()\nif pid == 0:\n    os.setsid()\n"
        f"    spawn('/bin/sleep', '{forked}', setsid=False)\n    os._exit(0)\n"
        "llm_query('ready?')"
    )
    script = _HOST_SCRIPT.format(paths=[str(REPO / "src"), *sys.path], code=code)
    host = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert host.stdout is not None
        line = host.stdout.readline()
        assert line.startswith("READY"), (line, host.stderr.read() if host.stderr else "")
        workdir = Path(line.split()[1])
        assert workdir.exists()
        assert _processes_with(marker)
        assert _processes_with(forked)
        host.send_signal(number)
        host.wait(timeout=30)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
    assert _wait_until(lambda: not _processes_with(marker) and not _processes_with(forked))
    assert _wait_until(lambda: not workdir.exists()), workdir


# -- the same as an ordinary user --------------------------------------------------------------


ATTACK_USER = "jarvis-attacker"


def _readable_by_others(path: Path) -> bool:
    return all(folder.stat().st_mode & 0o001 for folder in [path, *path.parents])


def _site_packages() -> Path:
    import pydantic

    return Path(pydantic.__file__).resolve().parents[1]


def test_every_attack_holds_as_an_ordinary_user() -> None:
    """This file and the end-to-end attacks again, as a user created here, on Debian's
    python3 with jarvis on its path."""
    if os.environ.get("JARVIS_ATTACK_AS_USER") == "1":
        pytest.skip("this is the ordinary user's run")
    if os.geteuid() != 0:
        pytest.skip("creating a user needs root")
    python = Path("/usr/bin/python3")
    if not python.exists() or sys.version_info[:2] != (3, 11):
        pytest.skip("needs /usr/bin/python3 of the same minor version as the suite")
    site = _site_packages()
    for needed in (REPO / "src", REPO / "tests", site):
        if not _readable_by_others(needed):
            pytest.skip(f"{needed} is not readable by other users (a private checkout)")
    ensure_user(ATTACK_USER)
    home = Path(f"~{ATTACK_USER}").expanduser()
    # the user lasts, and other runs of the suite may use it at the same time: this run's
    # pytest files are its own
    run_dir = home / f"run-{uuid.uuid4().hex}"
    run_dir.mkdir()
    shutil.chown(run_dir, ATTACK_USER)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONPATH": f"{REPO / 'src'}:{REPO}:{site}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "JARVIS_ATTACK_AS_USER": "1",
        "OPENAI_API_KEY": "sk-user-" + uuid.uuid4().hex,
    }
    completed = subprocess.run(
        [
            shutil.which("runuser") or "/usr/sbin/runuser", "-u", ATTACK_USER, "--",
            str(python), "-m", "pytest", str(Path(__file__)),
            str(Path(__file__).with_name("test_repl_attacks_end_to_end.py")),
            str(Path(__file__).with_name("test_repl_attacks_memory.py")),
            # (the inner run needs neither plugin; schemathesis's hooks for xdist crash
            # Debian's Python 3.11 while pytest rewrites their module)
            "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:schemathesis",
            "-o", f"cache_dir={run_dir}/.pytest-cache", "--rootdir", str(REPO),
            "--basetemp", f"{run_dir}/pytest-tmp", "-rs",
        ],
        cwd=run_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )  # fmt: skip
    shutil.rmtree(run_dir, ignore_errors=True)
    report = completed.stdout[-6000:] + completed.stderr[-2000:]
    assert completed.returncode == 0, report
    assert " passed" in completed.stdout, report
