"""``pdf_text``: the text of a PDF, page after page, bounded in size, time and memory.

pypdf is pure Python, and a PDF is a program for it: a file of a few hundred bytes whose
one page draws a form a hundred thousand times keeps it busy for hours, and a stream that
inflates a thousandfold fills the memory. So pypdf never runs in jarvis's own process: each
PDF is read by a child (:mod:`.extract`) that limits itself before it reads a byte, to
:attr:`PdfLimits.page_seconds` of CPU for each page (the file's parsing counted as a page),
:attr:`PdfLimits.total_seconds` in all and :attr:`PdfLimits.memory_bytes` of address
space, and that the parent kills when it outlives its wall-clock bound. A PDF past any
limit is refused alone, named, like a damaged one.

A PDF is bounded before it reaches the child (the reader's ``max_bytes``), and there by
pages (:data:`MAX_PAGES`) and by the characters kept (:data:`MAX_CHARS`): what lies past
either is left out, and said so in the last line. A PDF that pypdf cannot read (damaged,
encrypted) is a :class:`~jarvis.domain.knowledge.DocumentError` naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import signal
import sys
from dataclasses import dataclass
from typing import Final

from jarvis.adapters.pypdf_documents.extract import (
    MAX_CHARS,
    MAX_PAGES,
    REFUSED,
    TEXT,
    extract_text,
)
from jarvis.domain.knowledge import DocumentError

__all__ = ["INSTALL_HINT", "MAX_CHARS", "MAX_PAGES", "PdfLimits", "pdf_text"]

INSTALL_HINT: Final = "Install the PDF reader: pip install 'jarvis[pdf]'."
_STDERR_CHARS: Final = 300


@dataclass(frozen=True, slots=True, kw_only=True)
class PdfLimits:
    """What reading one PDF may cost. The defaults let a 2,000-page report through on a slow
    machine; a PDF built to loop stops at its first page's limit."""

    page_seconds: int = 20
    """CPU for one page (and for parsing the file, before the first)."""
    total_seconds: int = 600
    """CPU for the whole file."""
    memory_bytes: int = 2 * 1024**3
    """The child's address space (its interpreter and pypdf included)."""

    @property
    def wall_seconds(self) -> float:
        """The parent's bound on the child's life: past twice its CPU, it is not reading."""
        return 2.0 * self.total_seconds + 30.0


async def pdf_text(data: bytes, source: str, *, limits: PdfLimits = PdfLimits()) -> str:
    """The text of the PDF ``data`` (one block per page, pages separated by a blank line),
    read by a child process within ``limits``. A :class:`DocumentError`'s message says what
    ``source`` is ("an encrypted PDF"). Cancelled (Ctrl-C, SIGTERM, a caller's timeout), it
    kills the child and waits for it before it lets the cancellation through."""
    if importlib.util.find_spec("pypdf") is None:
        raise DocumentError("a PDF, and the PDF reader (pypdf) is not installed", hint=INSTALL_HINT)
    if not sys.executable:  # an interpreter embedded without one: read here, unbounded
        return extract_text(data)
    try:
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-P",  # the working directory is not searched for modules: a folder being added
            "-m",  # could hold a hostile ``jarvis`` package
            "jarvis.adapters.pypdf_documents.extract",
            str(limits.page_seconds),
            str(limits.total_seconds),
            str(limits.memory_bytes),
            str(os.getpid()),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=os.sep,
            env=_child_environment(),
        )
    except OSError as exc:
        raise DocumentError(f"a PDF, and the PDF reader could not start ({exc})") from None
    try:
        async with asyncio.timeout(limits.wall_seconds):
            out, err = await child.communicate(data)
            code = await child.wait()  # done already: its exit status, typed
    except TimeoutError:
        raise DocumentError(_too_long(limits)) from None
    finally:
        if child.returncode is None:  # timed out or cancelled: it must not outlive the call
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            await asyncio.shield(child.wait())
    return _outcome(code, out, err, limits)


def _child_environment() -> dict[str, str]:
    """What the child needs, and no more: the modules this process imports (its absolute
    ``sys.path``: an SDK user's ``sys.path`` changes included, and neither the working
    directory nor an empty entry that would stand for it, where a folder being added could
    hold a hostile ``pypdf``), the interpreter's home, the locale. Not the user's API keys,
    beside a parser of hostile input."""
    paths = [path for path in sys.path if path and os.path.isabs(path)]
    environment = {"PYTHONPATH": os.pathsep.join(paths), "PYTHONSAFEPATH": "1"}
    for name in ("PYTHONHOME", "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR"):
        value = os.environ.get(name)
        if value is not None:
            environment[name] = value
    return environment


def _outcome(returncode: int, out: bytes, err: bytes, limits: PdfLimits) -> str:
    if returncode == 0 and out[:1] == TEXT:
        return out[1:].decode("utf-8", errors="replace")
    if returncode == 0 and out[:1] == REFUSED:
        raise DocumentError(out[1:].decode("utf-8", errors="replace"))
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise DocumentError(_too_long(limits))
    lines = err.decode("utf-8", errors="replace").strip().splitlines()
    last = lines[-1][:_STDERR_CHARS] if lines else f"exit status {returncode}"
    raise DocumentError(f"a PDF that the PDF reader failed on ({last})")


def _too_long(limits: PdfLimits) -> str:
    return (
        f"a PDF that takes too long to read (over {limits.page_seconds} s of CPU for a page, "
        f"or {limits.total_seconds} s in all)"
    )
