"""Hostile PDFs against the reader of ``jarvis memory add``: pypdf runs in a child process
that stops at its CPU and memory limits, so a small file built to loop or to inflate costs
only itself, and a hostile package in the working directory is never imported."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from jarvis.adapters.pypdf_documents import PdfLimits, pdf_text
from jarvis.adapters.pypdf_documents.text import _child_environment
from jarvis.domain.knowledge import DocumentError
from tests.integration.test_file_read_attacks import _SOURCE, _as_user, _interpreter_for
from tests.support.hostile_pdfs import looping_pdf, one_page, surrogate_pdf
from tests.support.users import throwaway_user

pypdf = pytest.importorskip("pypdf")


async def test_a_pdf_built_to_loop_is_stopped_at_its_page_limit() -> None:
    data = looping_pdf()
    assert len(data) < 2048
    with pytest.raises(DocumentError, match="takes too long to read") as refused:
        await pdf_text(data, "loop.pdf", limits=PdfLimits(page_seconds=1))
    assert "over 1 s of CPU for a page" in refused.value.message


async def test_the_whole_file_has_a_limit_too() -> None:
    with pytest.raises(DocumentError, match="takes too long to read"):
        await pdf_text(
            looping_pdf(), "loop.pdf", limits=PdfLimits(page_seconds=60, total_seconds=1)
        )


async def test_a_pdf_that_inflates_past_the_memory_limit_is_refused_alone() -> None:
    """59 KB that pypdf turns into 60 MB of text, and over 700 MB of memory on the way."""
    data = one_page(b"BT /F1 12 Tf (" + b"a" * 60_000_000 + b") Tj ET")
    assert len(data) < 100_000
    with pytest.raises(DocumentError, match="needs more memory to read than it is given"):
        await pdf_text(data, "inflate.pdf", limits=PdfLimits(memory_bytes=250 * 1024**2))


async def test_a_plain_pdf_is_read_by_the_child_and_a_hostile_package_beside_it_is_not_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder being added is often the working directory: a ``jarvis`` package in it
    must not be what the child imports."""
    planted = tmp_path / "jarvis"
    planted.mkdir()
    marker = tmp_path / "imported"
    (planted / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    text = await pdf_text(one_page(b"BT /F1 12 Tf 72 720 Td (The quokka smiles) Tj ET"), "a.pdf")
    assert text == "The quokka smiles"
    assert not marker.exists()


async def test_an_encrypted_pdf_is_still_named_as_one() -> None:
    encrypt = b"/Encrypt << /Filter /Standard /V 1 /R 2 /O (x) /U (y) /P -4 >> "
    data = one_page(b"BT /F1 12 Tf (secret) Tj ET").replace(
        b"/Root 1 0 R", b"/Root 1 0 R " + encrypt
    )
    with pytest.raises(DocumentError, match=r"^an encrypted PDF \(decrypt it to add it\)$"):
        await pdf_text(data, "locked.pdf")


def children_of(pid: int) -> set[int]:
    """The processes whose parent is ``pid``, from the process table."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with (
                contextlib.suppress(OSError, IndexError, ValueError),
                open(f"/proc/{entry}/stat", "rb") as handle,
            ):
                if int(handle.read().rsplit(b")", 1)[1].split()[1]) == pid:
                    found.add(int(entry))
    return found


async def test_reading_a_pdf_leaves_the_event_loop_free() -> None:
    """The child is awaited: another task runs at once, long before the PDF's limit."""
    order: list[str] = []

    async def read() -> None:
        with contextlib.suppress(DocumentError):
            await pdf_text(looping_pdf(), "loop.pdf", limits=PdfLimits(page_seconds=1))
        order.append("pdf")

    async def other() -> None:
        order.append("other")

    await asyncio.gather(read(), other())
    assert order == ["other", "pdf"]


async def test_a_cancelled_read_kills_its_child_before_it_ends() -> None:
    """Ctrl-C, SIGTERM or a caller's timeout while a PDF is read: the child (which would
    run up to its limit) is killed and reaped before the cancellation goes on."""
    before = children_of(os.getpid())
    reading = asyncio.create_task(pdf_text(looping_pdf(), "loop.pdf"))
    for _ in range(3000):  # the child starts: wait for it (at most 30 s)
        started = children_of(os.getpid()) - before
        if started:
            break
        await asyncio.sleep(0.01)
    assert started, "the PDF reader's process never started"
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    for pid in started:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # gone and reaped, not a zombie left to the test


def test_sigterm_to_memory_add_during_a_pdf_ends_it_with_its_child(
    tmp_path: Path, jarvis_home: Path
) -> None:
    """``jarvis memory add`` stopped while it reads a PDF ends as Ctrl-C ends it (130),
    and takes the PDF reader's process with it."""
    loop = tmp_path / "loop.pdf"
    loop.write_bytes(looping_pdf())
    add = subprocess.Popen(
        [sys.executable, "-m", "jarvis", "memory", "add", str(loop), "--no-embed"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        reader: set[int] = set()
        for _ in range(6000):  # wait for the PDF reader's process (at most 60 s)
            reader = children_of(add.pid)
            if reader or add.poll() is not None:
                break
            time.sleep(0.01)
        assert reader, add.communicate()
        add.send_signal(signal.SIGTERM)
        _, err = add.communicate(timeout=60)
    finally:
        add.kill()
    assert add.returncode == 130, err
    assert b"Traceback" not in err
    assert not any(os.path.exists(f"/proc/{pid}") for pid in reader)


async def test_a_lone_surrogate_in_a_pdf_is_replaced_not_passed_on() -> None:
    """A font's map can make text no UTF-8 store takes: it would fail the store's write."""
    text = await pdf_text(surrogate_pdf(), "surrogate.pdf")
    assert "hello" in text
    assert text.count("\ufffd") == 5  # one for each lone surrogate
    text.encode("utf-8")  # no lone surrogate left


def _proc(pid: int, name: str) -> bytes:
    with open(f"/proc/{pid}/{name}", "rb") as handle:
        return handle.read()


async def _running_child(reading: asyncio.Task[str], before: set[int]) -> int:
    for _ in range(3000):  # wait for the child to start (at most 30 s)
        started = children_of(os.getpid()) - before
        if started:
            return started.pop()
        await asyncio.sleep(0.01)
    raise AssertionError(f"the PDF reader's process never started: {reading}")


async def test_the_child_runs_limited_from_the_root_without_the_users_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seen from outside, while it reads: its CPU, memory and core-file limits, its working
    directory (``/``: nothing to import from, nowhere to write a core), and its environment
    (the modules' paths, not the user's API keys)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-a-pdf-parser")
    before = children_of(os.getpid())
    reading = asyncio.create_task(
        pdf_text(looping_pdf(), "loop.pdf", limits=PdfLimits(page_seconds=30))
    )
    try:
        child = await _running_child(reading, before)
        for _ in range(3000):  # until it has limited itself (its first lines)
            limits = _proc(child, "limits").decode()
            if "Max core file size        0" in limits and "2147483648" in limits:
                break
            await asyncio.sleep(0.01)
        assert "Max core file size        0" in limits
        assert "Max address space         2147483648" in limits
        assert os.readlink(f"/proc/{child}/cwd") == "/"
        environment = _proc(child, "environ")
        assert b"sk-not-for-a-pdf-parser" not in environment
    finally:
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading


def test_the_child_imports_what_its_parent_imports_and_never_the_working_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An SDK user's ``sys.path`` (an absolute entry put first) reaches the child; the empty
    and relative entries that stand for the working directory do not."""
    monkeypatch.setattr(sys, "path", ["", "/opt/app/lib", "relative/lib", *sys.path])
    paths = _child_environment()["PYTHONPATH"].split(os.pathsep)
    assert paths[0] == "/opt/app/lib"
    assert "" not in paths
    assert "relative/lib" not in paths


def test_the_child_dies_with_a_parent_killed_outright(tmp_path: Path) -> None:
    """A parent killed by SIGKILL cannot kill its child: the kernel does it (the child asked
    it to), instead of letting it read on to its limit with nobody waiting."""
    (tmp_path / "loop.pdf").write_bytes(looping_pdf())
    script = (
        "import asyncio, pathlib\n"
        "from jarvis.adapters.pypdf_documents import PdfLimits, pdf_text\n"
        "data = pathlib.Path('loop.pdf').read_bytes()\n"
        "asyncio.run(pdf_text(data, 'loop.pdf', limits=PdfLimits(page_seconds=120)))\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path)
    try:
        reader: set[int] = set()
        for _ in range(3000):  # wait for its PDF reader (at most 30 s)
            reader = children_of(parent.pid)
            if reader or parent.poll() is not None:
                break
            time.sleep(0.01)
        assert reader, "the PDF reader's process never started"
        # killed at once: before the child asks the kernel, it finds its parent gone itself
    finally:
        parent.kill()
        parent.wait()
    for _ in range(1000):  # at most 10 s; it would read on for 120 s unattended
        if not any(_alive(pid) for pid in reader):
            break
        time.sleep(0.01)
    assert not any(_alive(pid) for pid in reader)


def _alive(pid: int) -> bool:
    """Running: a zombie (killed, waiting for a reaper) is not."""
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


_AS_USER = """
import asyncio, sys
from jarvis.adapters.pypdf_documents import PdfLimits, pdf_text
from jarvis.domain.knowledge import DocumentError
data = open(sys.argv[1], "rb").read()
try:
    asyncio.run(pdf_text(data, "loop.pdf", limits=PdfLimits(page_seconds=1)))
except DocumentError as error:
    print(error.message)
"""


def test_a_looping_pdf_is_stopped_for_an_ordinary_user_too() -> None:
    """The limits are the kernel's, set by the child on itself: the same for a user who
    cannot raise them back, as for root."""
    # jarvis from its source, pypdf from where this interpreter has it (the user may have
    # to run the system's interpreter of the same version)
    paths = {"PYTHONPATH": os.pathsep.join([_SOURCE, str(Path(pypdf.__file__).parents[1])])}
    with throwaway_user("jvpdf") as (uid, gid):
        interpreter = _interpreter_for(uid, gid)
        probe = _as_user([interpreter, "-c", "import pypdf"], uid, gid, env=paths)
        if probe.returncode != 0:
            pytest.skip("the ordinary user's interpreter has no pypdf")
        folder = Path(tempfile.mkdtemp(prefix="jarvis-pdf-"))
        try:
            folder.chmod(0o755)
            (folder / "loop.pdf").write_bytes(looping_pdf())
            (folder / "loop.pdf").chmod(0o644)
            done = _as_user(
                [interpreter, "-c", _AS_USER, str(folder / "loop.pdf")],
                uid,
                gid,
                env=paths,
                cwd=str(folder),
            )
        finally:
            shutil.rmtree(folder)
    assert done.returncode == 0, done.stderr
    assert "takes too long to read (over 1 s of CPU for a page" in done.stdout
