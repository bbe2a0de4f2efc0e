"""Hostile PDFs against the reader of ``jarvis memory add``: pypdf runs in a child process
that stops at its CPU and memory limits, so a small file built to loop or to inflate costs
only itself, and a hostile package in the working directory is never imported."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jarvis.adapters.pypdf_documents import PdfLimits, pdf_text
from jarvis.domain.knowledge import DocumentError
from tests.support.hostile_pdfs import looping_pdf, one_page

pytest.importorskip("pypdf")


async def test_a_pdf_built_to_loop_is_stopped_at_its_page_limit() -> None:
    data = looping_pdf()
    assert len(data) < 1024
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
