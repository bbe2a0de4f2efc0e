"""Hostile PDFs against the reader of ``jarvis memory add``: pypdf runs in a child process
that stops at its CPU and memory limits, so a small file built to loop or to inflate costs
only itself, and a hostile package in the working directory is never imported."""

from __future__ import annotations

from pathlib import Path

import pytest

from jarvis.adapters.pypdf_documents import PdfLimits, pdf_text
from jarvis.domain.knowledge import DocumentError
from tests.support.hostile_pdfs import looping_pdf, one_page

pytest.importorskip("pypdf")


def test_a_pdf_built_to_loop_is_stopped_at_its_page_limit() -> None:
    data = looping_pdf()
    assert len(data) < 1024
    with pytest.raises(DocumentError, match="takes too long to read") as refused:
        pdf_text(data, "loop.pdf", limits=PdfLimits(page_seconds=1))
    assert "over 1 s of CPU for a page" in refused.value.message


def test_the_whole_file_has_a_limit_too() -> None:
    with pytest.raises(DocumentError, match="takes too long to read"):
        pdf_text(looping_pdf(), "loop.pdf", limits=PdfLimits(page_seconds=60, total_seconds=1))


def test_a_pdf_that_inflates_past_the_memory_limit_is_refused_alone() -> None:
    """59 KB that pypdf turns into 60 MB of text, and over 700 MB of memory on the way."""
    data = one_page(b"BT /F1 12 Tf (" + b"a" * 60_000_000 + b") Tj ET")
    assert len(data) < 100_000
    with pytest.raises(DocumentError, match="needs more memory to read than it is given"):
        pdf_text(data, "inflate.pdf", limits=PdfLimits(memory_bytes=250 * 1024**2))


def test_a_plain_pdf_is_read_by_the_child_and_a_hostile_package_beside_it_is_not_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder being added is often the working directory: a ``jarvis`` package in it
    must not be what the child imports."""
    planted = tmp_path / "jarvis"
    planted.mkdir()
    marker = tmp_path / "imported"
    (planted / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    text = pdf_text(one_page(b"BT /F1 12 Tf 72 720 Td (The quokka smiles) Tj ET"), "a.pdf")
    assert text == "The quokka smiles"
    assert not marker.exists()


def test_an_encrypted_pdf_is_still_named_as_one() -> None:
    encrypt = b"/Encrypt << /Filter /Standard /V 1 /R 2 /O (x) /U (y) /P -4 >> "
    data = one_page(b"BT /F1 12 Tf (secret) Tj ET").replace(
        b"/Root 1 0 R", b"/Root 1 0 R " + encrypt
    )
    with pytest.raises(DocumentError, match=r"^an encrypted PDF \(decrypt it to add it\)$"):
        pdf_text(data, "locked.pdf")
