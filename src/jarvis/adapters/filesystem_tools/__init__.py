"""Tools that read the local filesystem, confined to allowed folders.

:class:`FileReadTool` is imported on first access, so a question that uses only the
``AGENTS.md`` reader of this package does not import the ``file_read`` tool (nor ctypes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jarvis.adapters.filesystem_tools.file_read import FileReadTool

__all__ = ["FileReadTool"]


def __getattr__(name: str) -> object:
    if name == "FileReadTool":
        from jarvis.adapters.filesystem_tools.file_read import FileReadTool

        return FileReadTool
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
