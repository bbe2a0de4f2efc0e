"""Tools that read the local filesystem, confined to allowed folders."""

from jarvis.adapters.filesystem_tools.file_read import FileReadTool

__all__ = ["FileReadTool"]
