"""PDFs written by hand (no PDF writer) to attack the PDF reader: one that loops, one that
inflates, and the plain page they are built on."""

from __future__ import annotations

import zlib


def one_page(content: bytes, *, form: bytes | None = None) -> bytes:
    """A one-page PDF whose content stream is ``content`` (compressed), with Helvetica as
    ``/F1`` and, when given, ``form`` as the form XObject ``/X0`` (compressed too)."""
    page = zlib.compress(content, 9)
    resources = b"/Font << /F1 6 0 R >>" + (b" /XObject << /X0 5 0 R >>" if form else b"")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << " + resources + b" >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(page) + page + b"\nendstream",
        b"<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 6 0 R"
        b" >> >> /Length %d /Filter /FlateDecode >>\nstream\n"
        % len(zlib.compress(form or b""))
        + zlib.compress(form or b"")
        + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
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
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def looping_pdf() -> bytes:
    """Under 1 KB: its page draws a form of 2,000 words 1,000 times (pypdf parses the form
    again each time: about 20 s of CPU here, and hours with larger numbers)."""
    return one_page(b"/X0 Do\n" * 1000, form=b"BT /F1 12 Tf " + b"(x) Tj " * 2000 + b"ET")
