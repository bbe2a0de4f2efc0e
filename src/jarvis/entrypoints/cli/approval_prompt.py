"""Approving tool calls at the terminal (``jarvis ask``, ``jarvis chat``).

When the policy says ``ask`` and standard input is a terminal, jarvis shows the call (the
tool, its arguments cut to a bounded length, why it asks and the rule) and reads one
answer: ``y`` (run it), ``n`` (do not), ``a`` (always: this call and every later call of
the tool, for the rest of the command or chat), ``never`` (never that tool). Without a
terminal, ``ask`` means deny, with a message the model reads.

One question at a time: parallel calls of one turn are asked about in turn, each its own
decision. An unreadable answer is asked again (three times at most, then denied); the end
of the input denies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Awaitable, Callable

from jarvis.application.approvals import ApprovalChoice, DenyingApprovals
from jarvis.domain.approvals import (
    APPROVAL_MODES,
    ApprovalAnswer,
    ApprovalRequest,
    shown_arguments,
)
from jarvis.domain.url_masks import redact_urls

PROMPT = "  run it? [y]es / [n]o / [a]lways for this tool / never: "
MAX_ANSWER_BYTES = 256
ATTEMPTS = 3

LineReader = Callable[[str], Awaitable[str | None]]
"""Shows a prompt and returns the line typed (``None``: the input ended)."""


def approval_choice(
    approve: str | None,
    *,
    read: LineReader | None = None,
    write: Callable[[str], None] | None = None,
    terminal: bool | None = None,
) -> ApprovalChoice:
    """The approvals of a command: ``--approve`` (checked), asked at the terminal when
    there is one (``terminal``; by default: standard input is one), with ``read`` (by
    default a line of standard input), else denied."""
    mode = next((m for m in APPROVAL_MODES if m == approve), None)
    if not (_stdin_is_terminal() if terminal is None else terminal):
        return ApprovalChoice(port=DenyingApprovals("no terminal to ask"), mode=mode)
    return ApprovalChoice(port=TerminalApprovals(read or read_stdin_line, write), mode=mode)


def _stdin_is_terminal() -> bool:
    stdin = sys.stdin
    try:
        return stdin is not None and stdin.isatty()
    except (OSError, ValueError):
        return False


class TerminalApprovals:
    """Asks at the terminal, one call at a time; remembers *always* and *never* per tool
    for as long as it lives (a command, a whole chat)."""

    def __init__(self, read: LineReader, write: Callable[[str], None] | None = None) -> None:
        self._read = read
        self._write = write or _stderr
        self._lock = asyncio.Lock()
        self._per_tool: dict[str, ApprovalAnswer] = {}

    async def submit(self, request: ApprovalRequest) -> ApprovalRequest:
        return request

    async def decide(self, request: ApprovalRequest) -> ApprovalAnswer:
        async with self._lock:
            remembered = self._per_tool.get(request.tool.lower())
            if remembered is not None:
                return remembered
            self._write(describe(request))
            for _attempt in range(ATTEMPTS):
                line = await self._read(PROMPT)
                if line is None:
                    return ApprovalAnswer(
                        allow=False, reason="the input ended", rule="terminal: no answer"
                    )
                answer = self._answer(line.strip().lower(), request.tool)
                if answer is not None:
                    return answer
                self._write("  please answer y, n, a or never")
            return ApprovalAnswer(
                allow=False, reason="no valid answer", rule="terminal: no valid answer"
            )

    def _answer(self, text: str, tool: str) -> ApprovalAnswer | None:
        if text in ("y", "yes"):
            return ApprovalAnswer(allow=True, rule="terminal: y")
        if text in ("n", "no"):
            return ApprovalAnswer(allow=False, reason="the user said no", rule="terminal: n")
        if text in ("a", "always"):
            answer = ApprovalAnswer(allow=True, rule=f"terminal: always {tool}", scope="tool")
        elif text == "never":
            answer = ApprovalAnswer(
                allow=False,
                reason=f"the user never allows {tool}",
                rule=f"terminal: never {tool}",
                scope="tool",
            )
        else:
            return None
        self._per_tool[tool.lower()] = answer
        return answer


def describe(request: ApprovalRequest) -> str:
    """The lines that show a call waiting for approval (control characters made visible)."""
    from jarvis.entrypoints.terminal_text import terminal_safe

    arguments = shown_arguments(request.call, mask=redact_urls)  # a URL cut is masked too
    return (
        f"jarvis: approve the call {terminal_safe(request.tool)}"
        f"({terminal_safe(arguments)})?\n"
        f"  why: {terminal_safe(request.reason)} ({terminal_safe(request.rule)})"
    )


def _stderr(text: str) -> None:
    from jarvis.entrypoints.cli.errors import write_stderr

    write_stderr(text.rstrip("\n") + "\n")


async def read_stdin_line(prompt: str) -> str | None:
    """Show ``prompt`` on stderr and read one line of standard input, by a daemon thread
    (a command that ends meanwhile is not held up by it); ``None`` at the end of input."""
    from jarvis.entrypoints.cli.errors import write_stderr

    write_stderr(prompt)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bytes] = loop.create_future()

    def settle(data: bytes) -> None:
        if not done.done():
            done.set_result(data)

    def work() -> None:
        try:
            data = os.read(0, MAX_ANSWER_BYTES)
        except OSError:
            data = b""
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, data)

    threading.Thread(target=work, name="jarvis-approval-stdin", daemon=True).start()
    data = await done
    if not data:
        return None
    return data.decode("utf-8", "replace").splitlines()[0] if data.strip() else ""
