"""The session-memory sampler on a plain process tree (no sandbox needed): what it counts,
that orphans stay counted, that it kills past the limit and only then."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jarvis.adapters.subprocess_repl.memory_watch import (
    MemoryWatch,
    directory_bytes,
    process_bytes,
    resident_bytes,
    session_bytes,
    session_pids,
    socket_allowance,
)

if not sys.platform.startswith("linux"):
    pytest.skip("reads Linux's /proc", allow_module_level=True)

MB = 1024 * 1024
TREE = textwrap.dedent(
    """
    import os, sys, time
    def hold(mb):
        block = bytearray(mb << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        return block
    kids, mb, orphan = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
    for _ in range(kids):
        pid = os.fork()
        if pid == 0:
            if orphan and os.fork() != 0:
                os._exit(0)  # the holder below is re-parented away from this tree
            kept = hold(mb)
            os.write(1, b"x")
            time.sleep(600)
    os.write(1, b"parent")
    time.sleep(600)
    """
)


def _start(kids: int, mb: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", TREE, str(kids), str(mb), "0"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdout is not None
    seen = b""
    while seen.count(b"x") < kids or b"parent" not in seen:  # every holder holds its memory
        chunk = os.read(process.stdout.fileno(), 64)
        assert chunk, seen
        seen += chunk
    return process


def _watch(
    tree: subprocess.Popen[bytes], limit_bytes: int, *, socket_bytes: int | None = 0
) -> MemoryWatch:
    """A watch on ``tree``, which runs in the host's network namespace: by default the
    host's sockets, which are not the tree's, are not counted (see the sockets test)."""
    return MemoryWatch(
        root=tree.pid,
        init=tree.pid,
        limit_bytes=limit_bytes,
        max_processes=16,
        mounts=(),
        socket_bytes=socket_bytes,
    )


@pytest.fixture
def trees() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_every_process_of_the_tree_is_counted_with_its_memory(
    trees: list[subprocess.Popen[bytes]],
) -> None:
    trees.append(tree := _start(4, 40))
    pids = session_pids(tree.pid, 100)
    assert len(pids) == 5
    assert all(process_bytes(pid) >= 40 * MB for pid in pids[1:])
    assert all(resident_bytes(pid) >= process_bytes(pid) for pid in pids)
    limit = 1 << 40
    assert session_bytes(tree.pid, tree.pid, max_processes=100, limit_bytes=limit, mounts=()) >= (
        160 * MB
    )


def test_the_walk_is_bounded(trees: list[subprocess.Popen[bytes]]) -> None:
    trees.append(tree := _start(6, 1))
    assert len(session_pids(tree.pid, 3)) == 3


def test_shared_pages_after_a_fork_are_counted_once(
    trees: list[subprocess.Popen[bytes]],
) -> None:
    code = (
        "import os, time\nb = bytearray(64 << 20)\nfor i in range(0, len(b), 4096):\n"
        "    b[i] = 1\nfor _ in range(4):\n    if os.fork() == 0:\n        break\n"
        "os.write(1, b'x')\ntime.sleep(600)"
    )
    tree = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", code], stdout=subprocess.PIPE, start_new_session=True
    )
    trees.append(tree)
    assert tree.stdout is not None
    seen = b""
    while seen.count(b"x") < 5:
        chunk = os.read(tree.stdout.fileno(), 64)
        assert chunk, seen
        seen += chunk
    pids = session_pids(tree.pid, 100)
    assert sum(resident_bytes(pid) for pid in pids) >= 5 * 64 * MB  # counted in every fork
    limit = 200 * MB
    total = session_bytes(tree.pid, tree.pid, max_processes=100, limit_bytes=limit, mounts=())
    assert 64 * MB <= total < 2 * 64 * MB, total // MB


def test_past_the_limit_the_tree_is_killed(trees: list[subprocess.Popen[bytes]]) -> None:
    trees.append(tree := _start(4, 40))
    watch = _watch(tree, 100 * MB)
    watch.start()
    try:
        assert tree.wait(timeout=30) == -signal.SIGKILL
    finally:
        watch.stop()
    assert watch.exceeded_bytes is not None
    assert watch.exceeded_bytes > 100 * MB


def test_orphans_in_a_subreaper_tree_stay_counted(trees: list[subprocess.Popen[bytes]]) -> None:
    """Outside a PID namespace an orphan goes to the host's init: this is what the sandbox's
    own init prevents. Here the tree's root is made a subreaper to stand in for it."""
    code = (
        "import ctypes, sys\nctypes.CDLL(None).prctl(36, 1, 0, 0, 0)\n"  # PR_SET_CHILD_SUBREAPER
        f"sys.argv = ['-', '3', '40', '1']\nexec({TREE!r})"
    )
    tree = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", code], stdout=subprocess.PIPE, start_new_session=True
    )
    trees.append(tree)
    assert tree.stdout is not None
    seen = b""
    while seen.count(b"x") < 3 or b"parent" not in seen:
        chunk = os.read(tree.stdout.fileno(), 64)
        assert chunk, seen
        seen += chunk
    limit = 1 << 40
    assert session_bytes(tree.pid, tree.pid, max_processes=100, limit_bytes=limit, mounts=()) >= (
        120 * MB
    )


def test_under_the_limit_nothing_is_killed(trees: list[subprocess.Popen[bytes]]) -> None:
    trees.append(tree := _start(2, 40))
    watch = _watch(tree, 200 * MB)
    watch.start()
    try:
        deadline = time.monotonic() + 60
        while watch.samples < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watch.samples >= 20
        assert tree.poll() is None
    finally:
        watch.stop()
    assert watch.exceeded_bytes is None


def test_the_sockets_of_the_namespace_are_charged_only_when_asked(
    trees: list[subprocess.Popen[bytes]],
) -> None:
    """A tree in the host's network namespace is charged every socket of the host (what
    else runs on the machine) unless ``socket_bytes=0``: the tests above watch such trees,
    and 400 sockets opened elsewhere pushed one of them over its limit."""
    trees.append(tree := _start(2, 40))
    held = session_bytes(tree.pid, tree.pid, max_processes=16, limit_bytes=1 << 40, mounts=())
    pairs = [socket.socketpair() for _ in range(200)]
    try:
        used = session_bytes(
            tree.pid,
            tree.pid,
            max_processes=16,
            limit_bytes=1 << 40,
            mounts=(),
            socket_bytes=socket_allowance(),
        )
        for socket_bytes, killed in ((0, False), (None, True)):
            watch = _watch(tree, held + 100 * MB, socket_bytes=socket_bytes)
            watch.start()
            try:
                if killed:
                    assert tree.wait(timeout=30) == -signal.SIGKILL
                else:
                    deadline = time.monotonic() + 60
                    while watch.samples < 5 and time.monotonic() < deadline:
                        time.sleep(0.01)
                    assert watch.samples >= 5
                    assert tree.poll() is None
            finally:
                watch.stop()
            assert (watch.exceeded_bytes is not None) is killed
    finally:
        for left, right in pairs:
            left.close()
            right.close()
    assert used - held >= 400 * socket_allowance()


def test_the_working_directory_walk_counts_blocks_once_and_follows_no_link(
    tmp_path: Path,
) -> None:
    """A hard link is one file; a link to a large file or folder outside (the host's ``/``)
    is an entry, not what it points to."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big").write_bytes(b"x" * 8 * MB)
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "file").write_bytes(b"x" * 2 * MB)
    os.link(work / "sub" / "file", work / "again")
    (work / "root").symlink_to("/")
    (work / "big").symlink_to(outside / "big")
    used = directory_bytes(str(work), 100 * MB)
    assert 2 * MB <= used <= 2 * MB + 6 * 4096, used


def test_the_working_directory_walk_stops_past_its_budget(tmp_path: Path) -> None:
    """Many small entries: each costs at least a block, and the walk ends once over."""
    for index in range(300):
        (tmp_path / f"f{index}").touch()
    assert directory_bytes(str(tmp_path), 100 * 4096) == 101 * 4096


def test_a_folder_nested_too_deep_to_walk_counts_as_over_the_limit(tmp_path: Path) -> None:
    deep = tmp_path
    for _ in range(70):
        deep = deep / "d"
    deep.mkdir(parents=True)
    assert directory_bytes(str(tmp_path), 100 * MB) == 100 * MB + 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every folder")
def test_a_folder_the_walk_may_not_read_counts_as_over_the_limit(tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "file").write_bytes(b"x" * MB)
    hidden.chmod(0o300)
    try:
        assert directory_bytes(str(tmp_path), 100 * MB) == 100 * MB + 1
    finally:
        hidden.chmod(0o700)
