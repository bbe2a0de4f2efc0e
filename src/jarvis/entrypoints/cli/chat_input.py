"""How ``jarvis chat`` reads its messages: prompt_toolkit's line editor on a terminal, one
line of stdin a message otherwise (a trailing ``\\`` continues it).

prompt_toolkit is imported only when a terminal reader is made, so no other command (and
no piped chat) pays for it.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Protocol

PROMPT = "you> "
MAX_MESSAGE_CHARS = 1 << 20
"""A message typed or piped into the chat is refused beyond this many characters."""


class LineReader(Protocol):
    async def read(self) -> str:
        """The next message; ``EOFError`` at the end (Ctrl-D), ``KeyboardInterrupt`` when
        the line was abandoned (Ctrl-C at the prompt)."""
        ...


class TerminalReader:
    """prompt_toolkit's line editor: history with arrow keys, multi-line input."""

    def __init__(self, history: list[str]) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import InMemoryHistory
        from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

        remembered = InMemoryHistory()
        for line in history:
            remembered.append_string(line)
        keys = KeyBindings()

        @keys.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @keys.add("enter")
        def _send(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if buffer.document.text_before_cursor.endswith("\\"):
                buffer.delete_before_cursor(1)
                buffer.insert_text("\n")
            else:
                buffer.validate_and_handle()

        self._session: PromptSession[str] = PromptSession(
            history=remembered, key_bindings=keys, multiline=True, prompt_continuation=". "
        )

    async def read(self) -> str:
        return await self._session.prompt_async(PROMPT)


class PipeReader:
    """One line of stdin, one message (a trailing ``\\`` continues it on the next line).

    The bytes are read from the file descriptor by a daemon thread, never through
    ``sys.stdin`` or asyncio's executor: a chat ended by ``SIGTERM`` while it waits for a
    line exits at once (an executor's thread would be waited for until a line came, and a
    daemon thread holding ``sys.stdin``'s lock would break the interpreter's exit). Bytes
    that are not UTF-8 become U+FFFD; a line longer than a message may be is cut there."""

    CHUNK = 1 << 16

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending = bytearray()
        self._scanned = 0  # no "\n" before this offset of _pending: each byte scanned once
        self._eof = False

    async def read(self) -> str:
        parts: list[str] = []
        while True:
            raw = await self._line()
            if raw is None:
                if parts:
                    return "\n".join(parts)
                raise EOFError
            line = raw.decode("utf-8", "replace").rstrip("\r")
            if line.endswith("\\"):
                parts.append(line[:-1])
                continue
            parts.append(line)
            return "\n".join(parts)

    async def _line(self) -> bytes | None:
        """The next line without its ``\\n``; ``None`` at the end of stdin."""
        bound = 4 * (MAX_MESSAGE_CHARS + 1)  # UTF-8: at most 4 bytes a character
        while True:
            cut = self._pending.find(b"\n", self._scanned)
            if cut >= 0 or len(self._pending) > bound or (self._eof and self._pending):
                end = cut if cut >= 0 else min(len(self._pending), bound)
                line = bytes(self._pending[:end])
                del self._pending[: end + 1 if cut >= 0 else end]
                self._scanned = 0
                return line
            if self._eof:
                return None
            self._scanned = len(self._pending)
            chunk = await self._chunk()
            if chunk:
                self._pending += chunk
            else:
                self._eof = True

    async def _chunk(self) -> bytes:
        import asyncio
        import os
        import threading

        loop = asyncio.get_running_loop()
        done: asyncio.Future[bytes] = loop.create_future()

        def settle(data: bytes | None, error: OSError | None) -> None:
            if done.done():  # the wait was cancelled (the chat is ending)
                return
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(data or b"")

        def work() -> None:
            try:
                data, error = os.read(self._fd, self.CHUNK), None
            except OSError as exc:
                data, error = None, exc
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(settle, data, error)

        threading.Thread(target=work, name="jarvis-chat-stdin", daemon=True).start()
        try:
            return await done
        except OSError:  # stdin unreadable (EIO after a hang-up): the end of the input
            return b""


def line_reader(history: list[str]) -> LineReader:
    """prompt_toolkit's editor on a terminal, else one line of stdin a message."""
    from jarvis.entrypoints.cli.render import is_tty

    if sys.stdin is not None and is_tty(sys.stdin) and is_tty(sys.stdout):
        return TerminalReader(history)
    return PipeReader(sys.stdin.fileno())
