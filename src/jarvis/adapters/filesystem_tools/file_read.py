"""The ``file_read`` tool: read a text file inside the allowed folders, never a secret.

The order of the checks is the safety argument:

1. The path is made absolute (relative paths start at the first root) and normalised
   *lexically*; a path outside every root is refused before the filesystem is touched, so
   the answer is the same whether or not it exists (no existence oracle).
2. Secret rules (:mod:`jarvis.application.tools.secret_paths`) are checked on the path as
   given and on every component of its absolute form, the root and the folders above it
   included (a root that is ``~/.ssh`` or lies in it is refused); jarvis's own config dir is
   refused by place (:mod:`.protected`).
3. The file is opened beneath the root's descriptor without following any link
   (:mod:`.beneath`: ``openat2`` with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS``, else a
   component-by-component ``O_NOFOLLOW`` walk), so a folder swapped for a symlink between
   the check and the open leads nowhere: the path checked is the path opened. A symlink
   anywhere in the path is refused whatever it points at (the same answer for a link to
   an existing file and to nothing).
4. What was opened is checked on its descriptor: a regular file (``O_NONBLOCK``: a FIFO
   cannot trap the read), exactly one hard link (another name for the same file may be a
   key outside the roots, and there is no way to know where), at most ``max_bytes``
   (also while reading, for a file that grows), not binary. Undecodable bytes are replaced.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from jarvis.adapters.filesystem_tools.beneath import BeneathOpener, LinkRefused, Strategy
from jarvis.adapters.filesystem_tools.protected import inside, jarvis_config_dir
from jarvis.application.tools.arguments import integer_argument
from jarvis.application.tools.secret_paths import secret_rule
from jarvis.domain.json_types import JSONObject
from jarvis.domain.tools.specs import ToolResult, ToolSpec

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
        return inside(path, self.real)

    def relative(self, path: str) -> list[str]:
        if path == self.real:
            return []
        return os.path.relpath(path, self.real).split(os.sep)


class FileReadTool:
    """Reads text files inside ``roots`` (the current directory when none are given).

    ``protected`` folders are refused like secrets (default: jarvis's config dir, from the
    environment as the settings compute it); ``opener`` picks how files are opened beneath
    the root (``auto`` = ``openat2`` where the kernel has it).
    """

    def __init__(
        self,
        roots: Sequence[str] = (),
        *,
        max_bytes: int = MAX_FILE_BYTES,
        max_output_chars: int = MAX_OUTPUT_CHARS,
        protected: Sequence[str] | None = None,
        opener: Strategy = "auto",
    ) -> None:
        chosen = list(roots) or [os.getcwd()]
        self.roots = tuple(_Root(os.path.realpath(os.path.expanduser(r))) for r in chosen)
        self.max_bytes = max_bytes
        self.max_output_chars = max_output_chars
        folders = [jarvis_config_dir(os.environ)] if protected is None else list(protected)
        self.protected = tuple(
            sorted(
                {os.path.abspath(os.path.expanduser(f)) for f in folders}
                | {os.path.realpath(os.path.expanduser(f)) for f in folders}
            )
        )
        self.opener = BeneathOpener(opener)

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

    def _check_secret(self, given: str, components: list[str], lexical: str) -> None:
        rule = secret_rule(components)
        if rule is None and any(inside(lexical, folder) for folder in self.protected):
            rule = "jarvis config dir"
        if rule is not None:
            raise _Refused(
                f"Access denied: '{given}' is a secret or credential file (rule '{rule}'); "
                "file_read never reads those."
            )

    def _locate(self, given: str) -> tuple[_Root, str]:
        """The root and the absolute lexical path of an allowed, non-secret file."""
        if "\x00" in given or len(given) > 4096:
            raise _Refused(f"Error: invalid path {given[:80]!r}.")
        expanded = os.path.expanduser(given)
        lexical = os.path.normpath(os.path.join(self.roots[0].real, expanded))
        root = next((r for r in self.roots if r.contains(lexical)), None)
        if root is None:
            raise self._outside(given)
        as_given = [] if os.path.isabs(expanded) else expanded.split(os.sep)
        self._check_secret(given, as_given + lexical.split(os.sep), lexical)
        return root, lexical

    def _open(self, given: str, root: _Root, lexical: str) -> int:
        try:
            return self.opener.open(root.real, root.relative(lexical))
        except LinkRefused:
            raise _Refused(
                f"Access denied: '{given}' is or passes through a symbolic link; file_read "
                "does not follow links."
            ) from None
        except FileNotFoundError:
            raise _Refused(f"Error: no such file: '{given}'.") from None
        except OSError as exc:
            raise _Refused(f"Error: cannot open '{given}': {exc.strerror}.") from None

    def _check_opened(self, given: str, descriptor: int) -> None:
        info = os.fstat(descriptor)
        if stat.S_ISDIR(info.st_mode):
            raise _Refused(f"Error: '{given}' is a directory, not a file.")
        if not stat.S_ISREG(info.st_mode):
            raise _Refused(f"Error: '{given}' is not a regular file.")
        if info.st_nlink > 1:
            raise _Refused(
                f"Access denied: '{given}' has {info.st_nlink} hard links; file_read reads "
                "only files with a single name (another name may be outside the allowed "
                "folders or a secret). Copy the file to read it."
            )
        if info.st_size > self.max_bytes:
            raise self._too_big(given, info.st_size)

    def _too_big(self, given: str, size: int | None) -> _Refused:
        measured = f"{size} bytes" if size is not None else "larger than the limit"
        return _Refused(
            f"Error: '{given}' is {measured}; file_read reads files up to {self.max_bytes} bytes."
        )

    def _read_bounded(self, given: str, descriptor: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while size <= self.max_bytes:
            chunk = os.read(descriptor, min(65536, self.max_bytes + 1 - size))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
        raise self._too_big(given, None)

    def _read(self, given: str, offset: int, max_lines: int) -> ToolResult:
        root, lexical = self._locate(given)
        descriptor = self._open(given, root, lexical)
        try:
            self._check_opened(given, descriptor)
            data = self._read_bounded(given, descriptor)
        except OSError as exc:
            raise _Refused(f"Error: cannot read '{given}': {exc.strerror}.") from None
        finally:
            os.close(descriptor)
        if b"\x00" in data[:_BINARY_PROBE]:
            raise _Refused(f"Error: '{given}' is a binary file; file_read reads text only.")
        text = data.decode("utf-8-sig", errors="replace")
        return self._page(given, lexical, text, len(data), offset, max_lines)

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
