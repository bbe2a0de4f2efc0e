"""The child that reads one PDF for :func:`~.text.pdf_text`: the PDF's bytes on standard
input; on standard output, :data:`TEXT` and its text, or :data:`REFUSED` and why.

It limits itself before it reads a byte (its arguments: CPU seconds for a page, CPU seconds
in all, bytes of address space, and its parent's process id): the kernel then stops it at
the first limit it passes, however pypdf is spending its time, and the parent reports
which. It writes no core file when stopped (one per hostile PDF, of up to its memory
limit, in the user's folder), and it dies with its parent, even one killed outright: it
would otherwise read on to its limit with nobody waiting. Its own logging and any
traceback stay out of the user's terminal (the parent keeps the last line of standard
error, for a failure it cannot name).
"""

from __future__ import annotations

import io
import logging
import os
import re
import resource
import signal
import sys
from collections.abc import Callable
from typing import Final

from jarvis.domain.knowledge import DocumentError

MAX_PAGES: Final = 2000
MAX_CHARS: Final = 20 * 1024 * 1024
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
"""A lone surrogate (a font's map can make one) is no character: the store's UTF-8 would
refuse it, and fail the whole add."""
TEXT: Final = b"T"
REFUSED: Final = b"R"


def extract_text(data: bytes, *, next_page: Callable[[], None] = lambda: None) -> str:
    """The text of the PDF ``data``; ``next_page`` is called before each page is read."""
    from pypdf import PdfReader

    # silent: its messages about sloppy PDFs quote the file's own names (escape sequences
    # included), and without a handler Python would print them raw on stderr
    logging.getLogger("pypdf").setLevel(logging.CRITICAL + 1)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise DocumentError("an encrypted PDF (decrypt it to add it)")
        pages: list[str] = []
        used = 0
        for number, page in enumerate(reader.pages, start=1):
            if number > MAX_PAGES or used > MAX_CHARS:
                pages.append(f"[pages {number} and after were not read]")
                break
            next_page()
            text = (page.extract_text() or "")[: MAX_CHARS - used + 1]
            pages.append(text.strip())
            used += len(text)
    except (DocumentError, MemoryError):
        raise
    except Exception as exc:  # pypdf meets a damaged file with many kinds of error
        # (NotImplementedError for an unknown encryption, AttributeError, AssertionError...)
        raise DocumentError(f"a PDF that cannot be read ({exc})") from None
    return "\n\n".join(page for page in pages if page)


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _limit_cpu(page_seconds: int, total_seconds: int) -> Callable[[], None]:
    """Set the limits; the function that gives the next page its own ``page_seconds``."""
    page_seconds = min(page_seconds, total_seconds)
    resource.setrlimit(resource.RLIMIT_CPU, (page_seconds, total_seconds + 1))

    def next_page() -> None:
        soft = min(int(_cpu_used()) + 1 + page_seconds, total_seconds)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, total_seconds + 1))

    return next_page


PR_SET_PDEATHSIG: Final = 1  # <linux/prctl.h>


def _die_with(parent: int) -> None:
    """SIGKILL from the kernel when the parent dies (Linux); gone already, end now."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def main(argv: list[str]) -> int:
    page_seconds, total_seconds, memory_bytes, parent = (int(arg) for arg in argv)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _die_with(parent)
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    next_page = _limit_cpu(page_seconds, total_seconds)
    data = sys.stdin.buffer.read()
    try:
        text = _SURROGATE.sub("\ufffd", extract_text(data, next_page=next_page))
        out = TEXT + text.encode("utf-8")
    except DocumentError as error:
        out = REFUSED + error.message.encode("utf-8", errors="replace")
    except MemoryError:
        out = REFUSED + b"a PDF that needs more memory to read than it is given"
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
