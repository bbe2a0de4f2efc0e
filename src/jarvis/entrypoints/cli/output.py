"""What the ``jarvis sessions`` and ``jarvis operators`` commands print, and how they run
their use cases: one line or one JSON document on stdout, stored text made safe for a
terminal, a coroutine run to its end, a non-zero status as the exit code."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TypeVar

import typer

if TYPE_CHECKING:
    from collections.abc import Coroutine

T = TypeVar("T")


def run_async(coro: Coroutine[object, object, T]) -> T:
    import asyncio

    return asyncio.run(coro)


def write_line(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def write_json(value: object) -> None:
    from jarvis.entrypoints.cli.streams import json_text

    write_line(json_text(value, stream=sys.stdout))


def printable(text: str) -> str:
    """``text`` without terminal control characters (a stored tool result or answer may
    hold escape sequences); newlines and tabs are kept."""
    return "".join(c if c.isprintable() or c in "\n\t" else "\ufffd" for c in text)


def exit_with(code: int) -> None:
    """Ends the command with ``code`` when it is not 0 (what ``guarded`` returned)."""
    if code:
        raise typer.Exit(code)
