"""Reading a file the user names (``--config``, ``--context-file``) without trusting the path.

A path can name anything: ``/dev/zero`` never ends and reports a size of 0, so a size check
alone lets it through; opening a FIFO blocks until some writer appears; a log file can grow
while it is read. So the path is checked with ``stat`` before it is opened (opening a
device can itself have effects), opened with ``O_NONBLOCK`` (a FIFO swapped in after the
check then opens at once instead of hanging), checked again with ``fstat`` on what was
really opened, and read with a cap on the bytes actually read, not on the size announced.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from jarvis.domain.errors import ConfigurationError

_CHUNK = 1 << 20
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _named(what: str, path: Path, where: str) -> str:
    """``The prompt file 'p'``, or ``WHERE: the prompt file 'p'`` for a file a config key
    names (so its errors read as every other error of the config file)."""
    return f"{where}: the {what} '{path}'" if where else f"The {what} '{path}'"


def _refuse_unless_regular(mode: int, path: Path, what: str, where: str) -> None:
    if not stat.S_ISREG(mode):
        raise ConfigurationError(
            f"{_named(what, path, where)} is {_kind(mode)}, not a regular file.",
            hint="Save the content to a regular file and name that file.",
        )


def _too_large(path: Path, what: str, where: str, limit: int, size: str) -> ConfigurationError:
    return ConfigurationError(
        f"{_named(what, path, where)} is too large ({size} bytes).",
        hint=f"At most {limit:,} bytes are accepted.",
    )


def read_regular_file(path: Path, *, limit: int, what: str, where: str = "") -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    A path that is not a regular file (device, FIFO, socket, directory), or a file longer
    than ``limit`` bytes, is a :class:`ConfigurationError` naming ``what`` and the path,
    after ``where`` when given (``Invalid config file F: KEY``, for a file a config key
    names). Errors of the file system itself (missing file, no permission) are raised as
    the ``OSError`` they are, for the caller to word.
    """
    _refuse_unless_regular(os.stat(path).st_mode, path, what, where)
    fd = os.open(path, _OPEN_FLAGS)
    try:
        info = os.fstat(fd)
        _refuse_unless_regular(info.st_mode, path, what, where)
        if info.st_size > limit:
            raise _too_large(path, what, where, limit, f"{info.st_size:,}")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise _too_large(path, what, where, limit, f"more than {limit:,}")
    finally:
        os.close(fd)
