"""The one printable filter: text from an engine or a store made harmless for a terminal.

A model's answer, a model name, a tool-call id, a tool's output or a stored message can
hold terminal control sequences: an escape sequence that clears the screen, rewrites the
window title, hides text, or (OSC 52) writes the clipboard; a carriage return that
overwrites what was printed; a bidirectional override that shows text in another order
than it is. When the output stream is a terminal, :func:`for_terminal` replaces each such
sequence, C0 and C1 control character (``\\n`` and ``\\t`` are kept) and bidi control
with U+FFFD. When it is not a terminal (a pipe, a file, ``--json``), the text is written
unchanged: what is stored or exported stays exactly what was said.

The filter is per character (a whole escape sequence becomes one U+FFFD when it is in one
piece), so a sequence split across two streamed pieces is neutralised all the same: its
ESC is replaced wherever it falls. It runs in linear time (no backtracking pattern).
"""

from __future__ import annotations

import contextlib
import re
import sys
from typing import TextIO

from jarvis.domain.url_masks import redact_urls

REPLACEMENT = "\ufffd"

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_CONTROLS = "".join(chr(c) for c in (*range(0x00, 0x20), *range(0x7F, 0xA0)) if c not in (9, 10))
_UNSAFE = re.compile(
    # an escape sequence in one piece: CSI (ESC [ or C1 CSI), OSC/DCS/APC/PM/SOS strings up
    # to their terminator (bounded), or ESC and one character
    "(?:\x1b\\[|\x9b)[0-?]{0,64}[ -/]{0,8}[@-~]?"
    "|(?:\x1b[\\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]{0,4096}(?:\x07|\x1b\\\\|\x9c)?"
    "|\x1b[ -~]?"
    f"|[{re.escape(_CONTROLS)}{_BIDI}]"
)


def terminal_safe(text: str) -> str:
    """``text`` with every control sequence, control character (except newline and tab)
    and bidi control replaced by U+FFFD."""
    return _UNSAFE.sub(REPLACEMENT, text)


def is_terminal(stream: TextIO | None) -> bool:
    if stream is None:
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def for_terminal(text: str, stream: TextIO | None) -> str:
    """``text`` as it may be written to ``stream``: filtered on a terminal, else unchanged."""
    return terminal_safe(text) if is_terminal(stream) else text


def write_stderr(text: str, err: TextIO | None = None) -> None:
    """Write ``text`` to stderr (or ``err``) with URL credentials masked, through the
    printable filter when it is a terminal (an engine's error text, a tool's output, an MCP
    server's message or a skill's name may hold escape sequences); never raises.

    Diagnostics are best effort: a stderr that is closed or whose reader went away must
    not end a command whose answer is still being written to stdout.
    """
    stream = sys.stderr if err is None else err
    if stream is None:  # started with fd 2 closed
        return
    with contextlib.suppress(OSError, ValueError):
        stream.write(for_terminal(redact_urls(text), stream))
        stream.flush()
