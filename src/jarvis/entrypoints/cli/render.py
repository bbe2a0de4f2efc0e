"""Rendering a run on the terminal: a spinner until the first token, then the text as it comes.

Text from the engine goes through the printable filter on a terminal
(:mod:`jarvis.entrypoints.terminal_text`). The answer goes to stdout; everything else
(spinner, tool activity, notices) goes to stderr, so ``jarvis ask ... > answer.txt``
captures exactly the answer. The spinner runs only when
stderr is a terminal, and :meth:`StreamRenderer.abort` always leaves the terminal clean
(spinner line cleared, the cursor on a fresh line).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import TextIO

from jarvis.domain.cut_text import cut_masked
from jarvis.domain.url_masks import redact_urls
from jarvis.entrypoints.terminal_text import for_terminal

_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_CLEAR_LINE = "\r\x1b[K"


def tool_call_line(name: str, arguments_json: str, *, limit: int = 200) -> str:
    """``→ calculator({"expression": "2+2"})``: a tool call as it starts."""
    return f"→ {name}({_clip(arguments_json, limit)})"


def tool_result_line(content: str, *, success: bool, limit: int = 200) -> str:
    """``← 4`` (or ``← failed: ...``): a tool result as it arrives, on one line."""
    shown = _clip(" ".join(content.split()), limit)
    return f"← {shown}" if success else f"← failed: {shown}"


def _clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, a URL the cut falls in masked whole: stderr
    masks every line, but a cut URL's ``@`` is gone by then (``cut_masked``)."""
    if len(text) <= limit:
        return text
    return cut_masked(text, limit - 1, redact_urls) + "…"


def is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Spinner:
    """A one-line spinner on a terminal, drawn by a background thread until stopped."""

    def __init__(self, stream: TextIO, label: str = "thinking", interval: float = 0.08) -> None:
        self._stream = stream
        self._label = label
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._draw, name="jarvis-spinner", daemon=True)
            self._thread.start()

    def _draw(self) -> None:
        index = 0
        while not self._stop.wait(self._interval if index else 0.0):
            frame = _FRAMES[index % len(_FRAMES)]
            try:
                self._stream.write(f"{_CLEAR_LINE}{frame} {self._label}…")
                self._stream.flush()
            except (OSError, ValueError):
                return
            index += 1

    def stop(self) -> None:
        """Stop and erase the spinner. Idempotent."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join()
        with contextlib.suppress(OSError, ValueError):
            self._stream.write(_CLEAR_LINE)
            self._stream.flush()


class StreamRenderer:
    """Writes a run to the terminal as it happens."""

    def __init__(
        self, out: TextIO | None = None, err: TextIO | None = None, *, spinner: bool | None = None
    ) -> None:
        self.out = sys.stdout if out is None else out
        self.err = sys.stderr if err is None else err
        show_spinner = is_tty(self.err) if spinner is None else spinner
        self._spinner = Spinner(self.err) if show_spinner else None
        self._at_line_start = True
        self._wrote_text = False

    def start(self) -> None:
        if self._spinner is not None:
            self._spinner.start()

    def _quiet(self) -> None:
        if self._spinner is not None:
            self._spinner.stop()

    def text(self, delta: str) -> None:
        """Write a piece of the answer."""
        if not delta:
            return
        self._quiet()
        self.out.write(for_terminal(delta, self.out))
        self.out.flush()
        self._wrote_text = True
        self._at_line_start = delta.endswith("\n")

    def answer(self, content: str) -> None:
        """Write a whole answer at once (``--no-stream``)."""
        self.text(content)
        self.finish()

    def notice(self, line: str) -> None:
        """A line on stderr (tool activity, verbose details), never mixed into the answer;
        URL credentials are masked, and a stderr that cannot be written is ignored."""
        self._quiet()
        if not self._at_line_start:
            self.out.write("\n")
            self.out.flush()
            self._at_line_start = True
        from jarvis.entrypoints.cli.errors import write_stderr

        write_stderr(line.rstrip("\n") + "\n", self.err)

    def finish(self) -> None:
        """End the answer on a fresh line."""
        self._quiet()
        if not self._at_line_start:
            self.out.write("\n")
            self.out.flush()
            self._at_line_start = True

    def abort(self) -> None:
        """Leave the terminal clean after an error or Ctrl-C."""
        with contextlib.suppress(OSError, ValueError):
            self.finish()
