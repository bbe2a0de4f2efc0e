"""What ``jarvis ask`` reads besides its options: the question (argument or stdin) and the
``--context-file``, each bounded in size and decoded as UTF-8.

Apart from :mod:`.ask`, which defines the command: ``jarvis ask --help`` does not load it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.cli.render import is_tty

MAX_CONTEXT_FILE_BYTES = 100 * 1024 * 1024
MAX_QUESTION_BYTES = 16 * 1024 * 1024
"""A question read from stdin is cut off here: ``jarvis ask < /dev/zero`` must end."""


def read_context_file(path: Path) -> str:
    """The text of ``--context-file`` (UTF-8); an unreadable file is a usage error.

    Only a regular file is read, and at most :data:`MAX_CONTEXT_FILE_BYTES` of it: the
    bytes actually read are counted, since ``/dev/zero`` reports a size of 0 and a FIFO
    would block the command before it starts.
    """
    from jarvis.entrypoints.bounded_files import read_regular_file

    try:
        data = read_regular_file(path, limit=MAX_CONTEXT_FILE_BYTES, what="context file")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigurationError(f"Cannot read the context file '{path}': {reason}.") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"The context file '{path}' is not UTF-8 text ({exc.reason} at byte {exc.start})."
        ) from exc


def read_question(question: str | None) -> str:
    """The question from the argument, or from stdin when it is ``-`` or absent (piped)."""
    usage = 'Usage: jarvis ask "question"  (or pipe it: echo "question" | jarvis ask)'
    if question is None or question == "-":
        stdin = sys.stdin
        if stdin is None or (question is None and is_tty(stdin)):
            raise ConfigurationError("No question given.", hint=usage)
        try:
            question = _read_stdin(stdin)
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"Cannot read the question from stdin: {exc}") from exc
    if not question.strip():
        raise ConfigurationError("The question is empty.", hint=usage)
    return question.strip()


def _read_stdin(stdin: TextIO) -> str:
    """At most :data:`MAX_QUESTION_BYTES` of stdin; bytes that are not UTF-8 become U+FFFD."""
    buffer = getattr(stdin, "buffer", None)
    if buffer is None:  # a text-only stream (an embedding app's)
        text = str(stdin.read(MAX_QUESTION_BYTES + 1))
        too_long = len(text) > MAX_QUESTION_BYTES
    else:
        data = bytes(buffer.read(MAX_QUESTION_BYTES + 1))
        too_long = len(data) > MAX_QUESTION_BYTES
        text = data.decode("utf-8", "replace")
    if too_long:
        raise ConfigurationError(
            f"The question on stdin is longer than {MAX_QUESTION_BYTES:,} bytes.",
            hint="Give a long text with --context-file (the rlm agent keeps it out of the prompt).",
        )
    return text
