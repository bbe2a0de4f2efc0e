"""``pdf_text``: the text of a PDF, page after page, bounded.

pypdf is pure Python and imported only here, on the first PDF. A PDF is bounded before it
reaches it (the reader's ``max_bytes``), and here by pages (:data:`MAX_PAGES`) and by the
characters kept (:data:`MAX_CHARS`): what lies past either is left out, and said so in
the last line. A PDF that pypdf cannot read (damaged, encrypted) is a
:class:`~jarvis.domain.knowledge.DocumentError` naming it.
"""

from __future__ import annotations

import io
import logging
from typing import Final

from jarvis.domain.knowledge import DocumentError

MAX_PAGES: Final = 2000
MAX_CHARS: Final = 20 * 1024 * 1024
INSTALL_HINT: Final = "Install the PDF reader: pip install 'jarvis[pdf]'."


def pdf_text(data: bytes, source: str) -> str:
    """The text of the PDF ``data`` (one block per page, pages separated by a blank line).
    A :class:`DocumentError`'s message says what ``source`` is ("an encrypted PDF")."""
    try:
        from pypdf import PdfReader
    except ImportError:
        raise DocumentError(
            "a PDF, and the PDF reader (pypdf) is not installed", hint=INSTALL_HINT
        ) from None
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
            text = (page.extract_text() or "")[: MAX_CHARS - used + 1]
            pages.append(text.strip())
            used += len(text)
    except (DocumentError, MemoryError):
        raise
    except Exception as exc:  # pypdf meets a damaged file with many kinds of error
        # (NotImplementedError for an unknown encryption, AttributeError, AssertionError...)
        raise DocumentError(f"a PDF that cannot be read ({exc})") from None
    return "\n\n".join(page for page in pages if page)
