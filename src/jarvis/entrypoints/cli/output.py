"""What the ``jarvis sessions`` and ``jarvis operators`` commands print, and how they run
their use cases: one line or one JSON document on stdout, stored text made safe for a
terminal (:mod:`jarvis.entrypoints.terminal_text`), a coroutine run to its end, a
non-zero status as the exit code."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TypeVar

import typer

if TYPE_CHECKING:
    from collections.abc import Coroutine

T = TypeVar("T")


def run_async(coro: Coroutine[object, object, T]) -> T:
    """Run ``coro`` to its end; ``SIGTERM`` or a hang-up ends it as Ctrl-C does, so what
    it started (an MCP server, a store) is closed on the way out."""
    import asyncio

    from jarvis.entrypoints.cli.termination import sigterm_as_interrupt

    with sigterm_as_interrupt():
        return asyncio.run(coro)


def write_raw(text: str) -> None:
    """``text`` on stdout, through the printable filter when stdout is a terminal."""
    from jarvis.entrypoints.terminal_text import for_terminal

    sys.stdout.write(for_terminal(text, sys.stdout))


def write_line(text: str) -> None:
    write_raw(text if text.endswith("\n") else text + "\n")


def write_json(value: object) -> None:
    from jarvis.entrypoints.cli.streams import json_text

    write_line(json_text(value, stream=sys.stdout))


def exit_with(code: int) -> None:
    """Ends the command with ``code`` when it is not 0 (what ``guarded`` returned)."""
    if code:
        raise typer.Exit(code)
