"""Hostile code against the memory bound of the whole session, where no cgroup holds it.

An ordinary user has no cgroup it may limit here, so the session's memory is sampled
(``memory_watch.py``) and the sandbox killed past ``memory_mb``. As root the session has a
cgroup; these tests then take the plan without it (what root gets where no cgroup can be
made), so that the sampler is attacked in both runs: ``test_repl_attacks.py`` runs this
file again as an ordinary user it creates. The hostile code holds its memory and then
blocks until it is killed; the execution's own time limit (60 s) is the test's deadline.
"""

from __future__ import annotations

import contextlib
import os
import textwrap
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from jarvis.adapters.subprocess_repl import SubprocessRepl, SubprocessReplSession
from jarvis.domain.repl import ExecutionResult, ReplLimits
from tests.integration.test_repl_attacks import SPAWN, _wait_until
from tests.support.users import ensure_user

pytestmark = pytest.mark.integration

LIMITS = ReplLimits(timeout_seconds=60.0, memory_mb=256, max_processes=32)
STOPPED = "the session used more than 256 MB of memory in total"

HOLD = textwrap.dedent(
    """
    import os, time
    def hold(mb):
        block = bytearray(mb << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        return block
    def holder(mb, ready):
        '''A child that holds ``mb`` MB, says so on ``ready`` and waits to be killed.'''
        pid = os.fork()
        if pid == 0:
            kept = hold(mb)
            os.write(ready, b'x')
            while True:
                time.sleep(60)
        return pid
    """
)


def watched(repl: SubprocessRepl) -> SubprocessRepl:
    """``repl`` where the session's memory is sampled: as it is for an ordinary user, and
    for root where no cgroup can be made."""
    plan = repl.plan()
    if plan.cgroups is None:
        return repl
    without = SubprocessRepl(limits=repl.limits)
    without._plan = replace(plan, cgroups=None)  # the plan root gets without a cgroup
    return without


@pytest.fixture(scope="module")
def repl() -> Iterator[SubprocessRepl]:
    base = SubprocessRepl(limits=LIMITS)
    isolation = base.isolation()
    if not isolation.runs_code:
        pytest.skip(f"no OS sandbox here: {isolation.describe()}")
    repl = watched(base)
    yield repl
    repl.close()
    base.close()


@pytest.fixture
async def session(repl: SubprocessRepl) -> AsyncIterator[SubprocessReplSession]:
    session = await repl.start()
    try:
        yield session
    finally:
        await session.aclose()


def _namespace(session: SubprocessReplSession) -> str:
    """The sandbox's PID namespace (``pid:[N]``), through the host's view of its tree."""
    root = session.worker_pid
    assert root is not None
    for task in os.listdir(f"/proc/{root}/task"):
        children = Path(f"/proc/{root}/task/{task}/children").read_text().split()
        if children:
            return os.readlink(f"/proc/{children[0]}/ns/pid")
    raise AssertionError("the sandbox has no init")


def _members(namespace: str) -> list[int]:
    """Host pids of the processes still in ``namespace`` (ours to read)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(entry / "ns" / "pid") == namespace:
                    found.append(int(entry.name))
    return found


async def _attack(session: SubprocessReplSession, code: str) -> ExecutionResult:
    """Run ``code`` (it ends blocked) and check the session was stopped, nothing of it is
    left, and the next execution works in a fresh interpreter."""
    await session.execute("1")
    namespace = _namespace(session)
    result = await session.execute(HOLD + code)
    assert result.error_kind == "memory_limit", result
    assert result.error is not None
    assert STOPPED in result.error, result
    assert _wait_until(lambda: not _members(namespace)), _members(namespace)
    after = await session.execute("21 * 2")
    assert after.value == "42", after
    assert after.restarted, after
    return result


async def test_forks_each_under_the_limit_together_over_it_are_stopped(
    session: SubprocessReplSession,
) -> None:
    """8 x 100 MB: every process is far below its own 256 MB, the sum far above."""
    await _attack(
        session,
        "r, w = os.pipe()\nfor _ in range(8):\n    holder(100, w)\n"
        "os.close(w)\nwhile os.read(r, 1):\n    pass\ntime.sleep(600)",
    )


async def test_orphans_double_forked_into_new_sessions_are_counted(
    session: SubprocessReplSession,
) -> None:
    """Each holder is a grandchild in a session of its own whose parent exited: it is
    re-parented to the namespace's init, away from the code's own process."""
    await _attack(
        session,
        "r, w = os.pipe()\nfor _ in range(5):\n    pid = os.fork()\n    if pid == 0:\n"
        "        os.setsid()\n        holder(80, w)\n        os._exit(0)\n"
        "    os.waitpid(pid, 0)\nos.close(w)\nwhile os.read(r, 1):\n    pass\ntime.sleep(600)",
    )


async def test_files_in_tmp_and_dev_shm_held_by_no_process_are_counted(
    session: SubprocessReplSession,
) -> None:
    """60 MB in /tmp and 60 MB in /dev/shm (each is capped at 64 MB), written by a program
    started behind the audit hook's back and mapped by no process, plus 3 x 60 MB held:
    over 256 MB only when the files count."""
    await _attack(
        session,
        SPAWN + "pid = spawn('/bin/sh', '-c', 'head -c 62914560 /dev/zero > /tmp/held; "
        "head -c 62914560 /dev/zero > /dev/shm/held')\nos.waitpid(pid, 0)\n"
        "r, w = os.pipe()\nfor _ in range(3):\n    holder(60, w)\n"
        "os.close(w)\nwhile os.read(r, 1):\n    pass\ntime.sleep(600)",
    )


async def test_files_in_the_working_directory_are_counted(
    session: SubprocessReplSession,
) -> None:
    """Five files of 60 MB, each below ``file_size_mb`` (64): the working directory is on
    the host's filesystem (a tmpfs on many systems), where only each file was bounded —
    twenty such files wrote 1.2 GB."""
    result = await _attack(
        session,
        "chunk = b'x' * (1 << 20)\nfor i in range(5):\n    with open(f'/work/f{i}', 'wb') as f:\n"
        "        for _ in range(60):\n            f.write(chunk)\ntime.sleep(600)",
    )
    # written a megabyte at a time, the files are nearly all the session holds when it is
    # stopped (over 256 MB less the interpreter's own few MB), whichever sample sees it:
    # more than a fresh interpreter leaves room for, so they are removed (kept, they would
    # stop every later execution at once)
    assert result.error is not None
    assert "it was emptied" in result.error, result
    assert list(session.workdir.iterdir()) == []
    later = await session.execute("import time\ntime.sleep(1)\n'still here'")
    assert later.value == "'still here'", later


async def test_files_that_leave_room_are_kept_after_a_stop(
    session: SubprocessReplSession,
) -> None:
    """100 MB of files and 3 x 60 MB held: stopped, but the files alone fit beside a
    fresh interpreter, so they stay."""
    result = await _attack(
        session,
        "with open('/work/kept', 'wb') as f:\n    f.write(b'x' * (50 << 20))\n"
        "with open('/work/kept2', 'wb') as f:\n    f.write(b'x' * (50 << 20))\n"
        "r, w = os.pipe()\nfor _ in range(3):\n    holder(60, w)\n"
        "os.close(w)\nwhile os.read(r, 1):\n    pass\ntime.sleep(600)",
    )
    assert result.error is not None
    assert "emptied" not in result.error, result
    assert sorted(p.name for p in session.workdir.iterdir()) == ["kept", "kept2"]


async def test_files_in_a_folder_the_host_may_not_list_are_not_hidden(
    session: SubprocessReplSession,
) -> None:
    """A folder without read permission (write and search only) would hide its files
    from a walk as the same ordinary user: it stops the session at once."""
    await _attack(
        session,
        "os.mkdir('/work/d', 0o300)\nfor i in range(5):\n"
        "    with open(f'/work/d/f{i}', 'wb') as f:\n        f.write(b'x' * (60 << 20))\n"
        "time.sleep(600)",
    )


async def test_files_removed_but_held_open_are_counted(
    session: SubprocessReplSession,
) -> None:
    """Five files of 60 MB, each removed once written but kept open: no walk of the
    directory sees them, the filesystem still holds them."""
    await _attack(
        session,
        "held = []\nfor i in range(5):\n"
        "    fd = os.open(f'/work/u{i}', os.O_RDWR | os.O_CREAT, 0o600)\n"
        "    os.write(fd, b'x' * (60 << 20))\n    os.unlink(f'/work/u{i}')\n"
        "    held.append(fd)\ntime.sleep(600)",
    )


async def test_files_removed_but_still_mapped_are_counted(
    session: SubprocessReplSession,
) -> None:
    """Four forks each map two files of 60 MB, then close and remove them: only the
    mappings hold them."""
    await _attack(
        session,
        "import mmap\nr, w = os.pipe()\nfor p in range(4):\n    if os.fork() == 0:\n"
        "        maps = []\n        for i in range(2):\n            name = f'/work/m{p}_{i}'\n"
        "            fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o600)\n"
        "            os.write(fd, b'x' * (60 << 20))\n"
        "            maps.append(mmap.mmap(fd, 60 << 20))\n"
        "            os.close(fd)\n            os.unlink(name)\n"
        "        os.write(w, b'x')\n        time.sleep(600)\n"
        "os.close(w)\nwhile os.read(r, 1):\n    pass\ntime.sleep(600)",
    )


_FILL_SOCKETS = textwrap.dedent(
    """
    import socket
    def fill(pairs):
        '''``pairs`` socket pairs, both directions queued full: kernel memory, mapped by
        no process.'''
        kept = []
        for _ in range(pairs):
            a, b = socket.socketpair()
            for end in (a, b):
                end.setblocking(False)
                try:
                    while True:
                        end.send(b'x' * 65536)
                except BlockingIOError:
                    pass
            kept.append((a, b))
        return kept
    """
)


async def test_socket_buffers_held_by_no_process_are_counted(
    session: SubprocessReplSession,
) -> None:
    """8 forks fill 100 socket pairs each: about 330 MB queued in socket buffers, while
    every process's own pages are a few MB (28 such forks held 1.7 GB uncounted)."""
    await _attack(
        session,
        _FILL_SOCKETS + "r, w = os.pipe()\nfor _ in range(8):\n    if os.fork() == 0:\n"
        "        kept = fill(100)\n        os.write(w, b'x')\n        time.sleep(600)\n"
        "os.close(w)\nwhile os.read(r, 1):\n    pass\ntime.sleep(600)",
    )


async def test_a_socket_cannot_raise_its_buffers(session: SubprocessReplSession) -> None:
    """Raising a buffer to the host's ``wmem_max`` let 60 socket pairs of one process hold
    941 MB; every socket keeps the host's default, which the sampler charges."""
    result = await session.execute(
        "import socket\na, b = socket.socketpair()\nrefused = []\n"
        "for option in (socket.SO_SNDBUF, socket.SO_RCVBUF, 32, 33):\n"
        "    try:\n        a.setsockopt(socket.SOL_SOCKET, option, 4 << 20)\n"
        "    except PermissionError:\n        refused.append(option)\n"
        "(refused, a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) < 1 << 20)"
    )
    assert result.error is None, result
    assert result.value == "([7, 8, 32, 33], True)", result


_RAW_SYSCALLS = textwrap.dedent(
    """
    import ctypes, json
    libc = ctypes.CDLL(None, use_errno=True)
    calls = {'ptrace': (101, 16, 1), 'keyctl': (250, 0, 0), 'add_key': (248, 0, 0),
             'userfaultfd': (323, 0), 'io_uring_setup': (425, 4, 0), 'memfd_create': (319, 0, 0),
             'bpf': (321, 0, 0, 0), 'perf_event_open': (298, 0, 0, -1, -1, 0),
             'unshare': (272, 0x10000000), 'mount': (165, 0, 0, 0, 0, 0),
             'shmget': (29, 0, 4096, 0o1600), 'clone3': (435, 0, 0)}
    found = {}
    for name, (number, *args) in calls.items():
        result = libc.syscall(number, *args)
        found[name] = 'ran' if result >= 0 else ctypes.get_errno()
    with open('/work/raw.json', 'w') as report:
        report.write(json.dumps(found))
    """
)


async def test_the_kernel_interfaces_that_hold_memory_unseen_are_refused(
    session: SubprocessReplSession,
) -> None:
    """Raw system calls from an interpreter started behind the audit hook's back (so only
    the seccomp filter stands): memfd, System V shared memory, io_uring, userfaultfd,
    keyrings, BPF, perf, ptrace, namespaces and mounts all fail (EPERM; clone3 ENOSYS)."""
    import ast
    import json
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("the system call numbers are x86_64's")
    result = await session.execute(
        SPAWN + "import sys\npid = spawn(sys.executable, '-I', '-S', '-c', "
        f"{_RAW_SYSCALLS!r})\nos.waitpid(pid, 0)\nopen('/work/raw.json').read()"
    )
    assert result.error is None, result
    assert result.value is not None
    found = json.loads(ast.literal_eval(result.value))  # the repr of the report's text
    assert found.pop("clone3") == 38, found  # ENOSYS: the C library falls back to clone
    assert set(found.values()) == {1}, found  # EPERM


async def test_no_tmpfs_the_code_can_write_is_without_a_size(
    session: SubprocessReplSession,
) -> None:
    """/dev is read-only and /dev/shm holds at most 64 MB: the code cannot hold more than
    its processes' limits and the two tmpfs sizes, even between two samples."""
    result = await session.execute(
        SPAWN + "pid = spawn('/bin/sh', '-c', 'touch /dev/held; echo $? > /work/dev; "
        "for i in 1 2 3; do head -c 41943040 /dev/zero > /dev/shm/held$i; done; "
        "df -k /dev/shm | tail -1 > /work/shm')\nos.waitpid(pid, 0)\n"
        "(open('dev').read().strip(), int(open('shm').read().split()[1]))"
    )
    assert result.error is None, result
    assert result.value == "('1', 65536)", result


async def test_memory_held_after_an_execution_stops_the_session_and_the_next_one_says_so(
    session: SubprocessReplSession,
) -> None:
    """Interpreters started behind the audit hook's back outlive the execution that
    started them (forks do not: the worker ends those); the sandbox is stopped while no
    code runs, and the next execution reports why rather than a broken protocol. The
    interpreters take their memory only once the test says so (a file it puts in the
    working directory), after the execution that started them has returned."""
    await session.execute("1")
    namespace = _namespace(session)
    started = await session.execute(
        SPAWN + "import sys\nfor _ in range(8):\n    spawn(sys.executable, '-I', '-S', '-c', "
        '\'import os, time\\nwhile not os.path.exists("/work/go"):\\n    time.sleep(0.01)\\n'
        "b = bytearray(100 << 20)\\nfor i in range(0, len(b), 4096):\\n"
        "    b[i] = 1\\ntime.sleep(600)')\n'started'"
    )
    assert started.value == "'started'", started
    (session.workdir / "go").touch()
    assert _wait_until(lambda: not _members(namespace), timeout=60), _members(namespace)
    result = await session.execute("21 * 2")
    assert result.error_kind == "memory_limit", result
    assert result.error is not None
    assert STOPPED in result.error, result
    after = await session.execute("21 * 2")
    assert after.value == "42", after


async def test_a_session_under_its_limit_runs_to_completion(
    session: SubprocessReplSession,
) -> None:
    """150 MB of 256 held for a second (forty samples); then 100 MB shared by six forks,
    which ``VmRSS`` would count seven times (700 MB) and the sampler counts once."""
    result = await session.execute(
        HOLD + "kept = hold(150)\ntime.sleep(1)\ndel kept\nkept = hold(100)\npids = []\n"
        "for _ in range(6):\n    pid = os.fork()\n    if pid == 0:\n        time.sleep(1)\n"
        "        os._exit(0)\n    pids.append(pid)\n"
        "sum(os.waitpid(p, 0)[1] == 0 for p in pids)"
    )
    assert result.error is None, result
    assert result.value == "6", result


_DELEGATED_HOST = textwrap.dedent(
    """
    import asyncio, json, sys
    from jarvis.adapters.subprocess_repl import SubprocessRepl
    from jarvis.domain.repl import ReplLimits

    CODE = {code!r}

    async def main():
        repl = SubprocessRepl(limits=ReplLimits(timeout_seconds=60, memory_mb=256))
        session = await repl.start()
        group = None if session.cgroup is None else str(session.cgroup.memory)
        try:
            result = await session.execute(CODE)
        finally:
            await session.aclose()
        repl.close()
        print(json.dumps({{"group": group, "value": result.value, "error": result.error,
                          "memory": repl.isolation().memory}}))

    asyncio.run(main())
    """
)
_EACH_REPORTS_OR_DIES = (
    "import select\npipes = {}\nfor _ in range(8):\n    r, w = os.pipe()\n"
    "    pid = holder(100, w)\n    os.close(w)\n    pipes[r] = pid\nheld = []\n"
    "while pipes:\n    for r in select.select(list(pipes), [], [])[0]:\n"
    "        if os.read(r, 1):\n            held.append(pipes[r])\n        del pipes[r]\n"
    "sum(1 for p in held if os.waitpid(p, os.WNOHANG) == (0, 0))"
)
"""8 holders of 100 MB, each with a pipe of its own: readable when it holds its memory
(a byte) or when it died (end of file); then how many still hold theirs."""


def test_a_cgroup_delegated_to_an_ordinary_user_bounds_its_session() -> None:
    """An administrator (here the test, as root) delegates a cgroup to the ordinary user:
    the REPL finds it writable, checks it can use it, and the session's group is made
    inside it; the kernel then holds the session to 256 MB."""
    import json
    import secrets
    import shutil
    import subprocess
    import sys

    from jarvis.adapters.subprocess_repl.cgroup import find_layout
    from tests.integration.test_repl_attacks import ATTACK_USER, REPO, _site_packages

    if os.environ.get("JARVIS_ATTACK_AS_USER") == "1":
        pytest.skip("this is the ordinary user's run")
    if os.geteuid() != 0:
        pytest.skip("delegating a cgroup needs root")
    layout = find_layout()
    if layout is None or layout.unified:
        pytest.skip("needs cgroup v1 (a v2 group delegated to a user must be a leaf)")
    python = Path("/usr/bin/python3")
    if not python.exists() or sys.version_info[:2] != (3, 11):
        pytest.skip("needs /usr/bin/python3 of the same minor version as the suite")
    uid = ensure_user(ATTACK_USER)
    name = f"jarvis-delegated-{secrets.token_hex(4)}"
    groups = list(dict.fromkeys((layout.memory / name, layout.pids / name)))
    for group in groups:
        group.mkdir()
        for entry in [group, *group.iterdir()]:
            os.chown(entry, uid, uid)
    script = _DELEGATED_HOST.format(code=HOLD + _EACH_REPORTS_OR_DIES)
    join = " ".join(f"echo $$ > {group / 'cgroup.procs'};" for group in groups)
    home = Path(f"~{ATTACK_USER}").expanduser()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONPATH": f"{REPO / 'src'}:{_site_packages()}",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    try:
        completed = subprocess.run(
            ["/bin/sh", "-c", f'{join} exec "$@"', "sh", runuser, "-u", ATTACK_USER, "--",
             str(python), "-c", script],
            cwd=home, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    finally:
        for group in reversed(groups):
            for child in [p for p in group.iterdir() if p.is_dir()] + [group]:
                with contextlib.suppress(OSError):
                    child.rmdir()
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["group"] is not None, report
    assert Path(report["group"]).parent == layout.memory / name, report
    assert report["memory"].endswith("cgroup)"), report
    assert report["value"] is not None, report
    assert int(report["value"]) * 100 <= 256, report
