"""PDFs written by hand (no PDF writer) to attack the PDF reader: one that loops, one that
inflates, one whose font makes text no UTF-8 store takes, and the plain page they are
built on."""

from __future__ import annotations

import zlib


def _stream(data: bytes, *, entries: bytes = b"") -> bytes:
    packed = zlib.compress(data, 9)
    return (
        b"<< %s/Length %d /Filter /FlateDecode >>\nstream\n" % (entries, len(packed))
        + packed
        + b"\nendstream"
    )


def one_page(
    content: bytes, *, form: bytes | None = None, font: bytes = b"", trailer: bytes = b""
) -> bytes:
    """A one-page PDF whose content stream is ``content`` (compressed), with Helvetica as
    ``/F1`` (``font`` and ``trailer``: more entries for its and the trailer's dictionaries),
    when given ``form`` as the form XObject ``/X0``, and a seventh object for the font to
    name (a ToUnicode map)."""
    resources = b"/Font << /F1 6 0 R >>" + (b" /XObject << /X0 5 0 R >>" if form else b"")
    cmap = (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /X def\n"
        b"1 begincodespacerange <00> <FF> endcodespacerange\n"
        b"2 beginbfchar <41> <D800> <42> <001B> endbfchar endcmap CMapName currentdict "
        b"/CMap defineresource pop end end"
    )
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << " + resources + b" >> >>",
        _stream(content),
        _stream(
            form or b"",
            entries=b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] "
            b"/Resources << /Font << /F1 6 0 R >> >> ",
        ),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica " + font + b">>",
        _stream(cmap),
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        trailer,
        xref,
    )
    return bytes(out)


def looping_pdf() -> bytes:
    """About 1 KB: its page draws a form of 2,000 words 1,000 times (pypdf parses the form
    again each time: about 20 s of CPU here, and hours with larger numbers)."""
    return one_page(b"/X0 Do\n" * 1000, form=b"BT /F1 12 Tf " + b"(x) Tj " * 2000 + b"ET")


def surrogate_pdf() -> bytes:
    """A page whose font maps ``A`` to a lone surrogate (U+D800), which no UTF-8 store
    takes, and ``B`` to an escape character."""
    return one_page(b"BT /F1 12 Tf 10 700 Td (AAAB hello ABAB) Tj ET", font=b"/ToUnicode 7 0 R ")
