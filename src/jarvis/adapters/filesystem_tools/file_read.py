"""The ``file_read`` tool: read a text file inside the allowed folders, never a secret.

The order of the checks is the safety argument:

1. The path is made absolute (relative paths start at the first root) and normalised
   *lexically*; a path outside every root is refused before the filesystem is touched, so
   the answer is the same whether or not it exists (no existence oracle).
2. Secret rules (:mod:`jarvis.application.tools.secret_paths`) are checked on the path as
   given and on its lexical form.
3. Symlinks are resolved (``realpath``); the real path must again be inside a root — a link
   leading out gets the same "outside" answer — and must again pass the secret rules, so a
   link called ``notes.txt`` pointing at ``.ssh/id_rsa`` is refused.
4. Only then is the file opened (``O_NOFOLLOW | O_NONBLOCK``, so a swapped-in link or a
   FIFO cannot trap the read) and checked on the open descriptor: a regular file, at most
   ``max_bytes``, not binary. Undecodable bytes are replaced.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from jarvis.application.tools.arguments import integer_argument
from jarvis.application.tools.secret_paths import secret_rule
from jarvis.domain.json_types import JSONObject
from jarvis.domain.tools import ToolResult, ToolSpec

MAX_FILE_BYTES: Final = 1024 * 1024
MAX_OUTPUT_CHARS: Final = 16_000
DEFAULT_MAX_LINES: Final = 2000
MAX_LINES: Final = 10_000
_BINARY_PROBE: Final = 8192

FILE_READ_SPEC: Final = ToolSpec(
    name="file_read",
    description=(
        "Read a UTF-8 text file from the workspace. Relative paths start at the workspace. "
        "Long files are returned in pages: pass 'offset' (first line, 1-based) and "
        "'max_lines' to read further. Secret files (keys, .env, credentials) are refused."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, e.g. 'src/app.py'."},
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "The first line to return (1-based, default 1).",
            },
            "max_lines": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LINES,
                "description": f"How many lines to return at most (default {DEFAULT_MAX_LINES}).",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    category="filesystem",
    timeout_seconds=10.0,
)


class _Refused(Exception):
    """A read that must not happen; the message goes back to the model."""


@dataclass(frozen=True, slots=True)
class _Root:
    real: str

    def contains(self, path: str) -> bool:
        return path == self.real or path.startswith(self.real.rstrip(os.sep) + os.sep)

    def relative(self, path: str) -> list[str]:
        return os.path.relpath(path, self.real).split(os.sep)


class FileReadTool:
    """Reads text files inside ``roots`` (the current directory when none are given)."""

    def __init__(
        self,
        roots: Sequence[str] = (),
        *,
        max_bytes: int = MAX_FILE_BYTES,
        max_output_chars: int = MAX_OUTPUT_CHARS,
    ) -> None:
        chosen = list(roots) or [os.getcwd()]
        self.roots = tuple(_Root(os.path.realpath(os.path.expanduser(r))) for r in chosen)
        self.max_bytes = max_bytes
        self.max_output_chars = max_output_chars

    @property
    def spec(self) -> ToolSpec:
        return FILE_READ_SPEC

    async def execute(self, arguments: JSONObject) -> ToolResult:
        path = arguments.get("path")
        offset = integer_argument(arguments, "offset", default=1, low=1)
        max_lines = integer_argument(
            arguments, "max_lines", default=DEFAULT_MAX_LINES, low=1, high=MAX_LINES
        )
        if not isinstance(path, str) or not path.strip():
            return self._failed("Error: 'path' must be a non-empty string.")
        if offset is None or max_lines is None:
            return self._failed(
                f"Error: 'offset' must be an integer >= 1 and 'max_lines' one from 1 to "
                f"{MAX_LINES}."
            )
        try:
            return await asyncio.to_thread(self._read, path, offset, max_lines)
        except _Refused as refusal:
            return self._failed(str(refusal))

    def _failed(self, message: str) -> ToolResult:
        return ToolResult(tool_name="file_read", content=message, success=False)

    def _outside(self, given: str) -> _Refused:
        folders = ", ".join(root.real for root in self.roots)
        return _Refused(f"Access denied: '{given}' is outside the allowed folders ({folders}).")

    def _check_secret(self, given: str, components: list[str]) -> None:
        rule = secret_rule(components)
        if rule is not None:
            raise _Refused(
                f"Access denied: '{given}' is a secret or credential file (rule '{rule}'); "
                "file_read never reads those."
            )

    def _locate(self, given: str) -> str:
        """The real path of an allowed, non-secret file. Raises _Refused otherwise."""
        if "\x00" in given or len(given) > 4096:
            raise _Refused(f"Error: invalid path {given[:80]!r}.")
        expanded = os.path.expanduser(given)
        lexical = os.path.normpath(os.path.join(self.roots[0].real, expanded))
        root = next((r for r in self.roots if r.contains(lexical)), None)
        if root is None:
            raise self._outside(given)
        as_given = [] if os.path.isabs(expanded) else expanded.split(os.sep)
        self._check_secret(given, as_given + root.relative(lexical))
        real = os.path.realpath(lexical)
        real_root = next((r for r in self.roots if r.contains(real)), None)
        if real_root is None:
            raise self._outside(given)
        self._check_secret(given, real_root.relative(real))
        return real

    def _read(self, given: str, offset: int, max_lines: int) -> ToolResult:
        real = self._locate(given)
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            descriptor = os.open(real, flags)
        except FileNotFoundError:
            raise _Refused(f"Error: no such file: '{given}'.") from None
        except IsADirectoryError:
            raise _Refused(f"Error: '{given}' is a directory, not a file.") from None
        except OSError as exc:
            raise _Refused(f"Error: cannot open '{given}': {exc.strerror}.") from None
        try:
            info = os.fstat(descriptor)
            if stat.S_ISDIR(info.st_mode):
                raise _Refused(f"Error: '{given}' is a directory, not a file.")
            if not stat.S_ISREG(info.st_mode):
                raise _Refused(f"Error: '{given}' is not a regular file.")
            if info.st_size > self.max_bytes:
                raise _Refused(
                    f"Error: '{given}' is {info.st_size} bytes; file_read reads files up to "
                    f"{self.max_bytes} bytes."
                )
        except BaseException:
            os.close(descriptor)
            raise
        with os.fdopen(descriptor, "rb") as handle:
            data = handle.read(self.max_bytes + 1)[: self.max_bytes]
        if b"\x00" in data[:_BINARY_PROBE]:
            raise _Refused(f"Error: '{given}' is a binary file; file_read reads text only.")
        text = data.decode("utf-8-sig", errors="replace")
        return self._page(given, real, text, len(data), offset, max_lines)

    def _page(
        self, given: str, real: str, text: str, size: int, offset: int, max_lines: int
    ) -> ToolResult:
        lines = text.splitlines(keepends=True)
        total = len(lines)
        metadata: JSONObject = {"path": real, "size_bytes": size, "total_lines": total}
        if total and offset > total:
            raise _Refused(f"Error: '{given}' has {total} lines; offset {offset} is past the end.")
        start = offset - 1
        chosen: list[str] = []
        used = 0
        for line in lines[start : start + max_lines]:
            if chosen and used + len(line) > self.max_output_chars:
                break
            chosen.append(line[: self.max_output_chars])
            used += len(chosen[-1])
        end = start + len(chosen)
        content = "".join(chosen)
        partial = start > 0 or end < total
        if partial:
            note = f"[Lines {start + 1}-{end} of {total}."
            note += f" Use offset={end + 1} to read more.]" if end < total else "]"
            content = content + ("" if content.endswith("\n") else "\n") + note
        return ToolResult(
            tool_name="file_read", content=content, truncated=end < total, metadata=metadata
        )
