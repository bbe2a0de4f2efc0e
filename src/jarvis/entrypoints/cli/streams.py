"""Text in and out of the CLI that never costs the answer: odd bytes and odd terminals.

- Arguments that are not UTF-8 (``jarvis ask $'\\xff'``) reach Python as lone surrogates,
  which no engine request can encode: :func:`repair_text` turns each undecodable byte into
  U+FFFD, keeping the rest.
- A model can send a lone surrogate, and stdout can be ASCII-only (``PYTHONIOENCODING=ascii``):
  with the default ``strict`` error handler one such character would make the whole answer
  an error. :func:`prepare_streams` switches stdout and stderr to ``backslashreplace``, so
  the character shows as ``\\udc80`` / ``\\xe9`` and the rest arrives intact.
- ``--json`` must stay valid JSON: :func:`json_text` escapes every non-ASCII character when
  stdout cannot encode all of Unicode.
"""

from __future__ import annotations

import codecs
import sys
from typing import TextIO

_UNICODE_ENCODINGS = frozenset({"utf-8", "utf-16", "utf-32"})


def prepare_streams() -> None:
    """Make writing any text to stdout or stderr succeed (see the module docstring)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None:
            continue
        try:
            reconfigure(errors="backslashreplace")
        except (OSError, ValueError):  # a closed or detached stream
            continue


def repair_text(value: str) -> str:
    """``value`` with the undecodable bytes of a command-line argument replaced by U+FFFD.

    Python decodes arguments with ``surrogateescape``; re-encoding that way gives back the
    original bytes, which are then decoded as UTF-8 with replacement. A string without
    surrogates is returned unchanged.
    """
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        pass
    try:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # surrogates that did not come from undecodable bytes
        return value.encode("utf-8", "replace").decode("utf-8")


def encodes_all_text(stream: TextIO) -> bool:
    """True when ``stream`` can encode every character (a UTF encoding)."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        return codecs.lookup(encoding).name in _UNICODE_ENCODINGS
    except LookupError:
        return False


def json_text(value: object, *, stream: TextIO | None = None) -> str:
    """``value`` as indented JSON that ``stream`` (default stdout) prints unchanged: non-ASCII
    characters escaped when the stream cannot encode them, or when the text holds a lone
    surrogate (which JSON can only carry as an escape)."""
    import json  # only --json needs it: not loaded on every command's start-up

    if encodes_all_text(sys.stdout if stream is None else stream):
        text = json.dumps(value, indent=2, ensure_ascii=False)
        try:
            text.encode("utf-8")
            return _escape_controls(text)
        except UnicodeEncodeError:
            pass
    return json.dumps(value, indent=2, ensure_ascii=True)


def _escape_controls(text: str) -> str:
    """JSON text with C1 controls and bidi controls written as ``\\uXXXX`` escapes (the
    same JSON value; C0 controls are escaped by ``json.dumps`` already): raw, a terminal
    would act on them. Outside strings JSON holds none of them, so this is exact."""
    import re

    return re.sub(
        "[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]",
        lambda found: f"\\u{ord(found.group()):04x}",
        text,
    )
