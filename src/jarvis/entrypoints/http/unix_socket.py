"""``jarvis serve --unix PATH``: a Unix socket only its owner may connect to.

Why: a file's mode is the kernel's own access check, before any byte reaches the server.
The socket is created with mode 0600 from the start (the umask is tightened around
``bind``, so there is no moment at which another user could connect), and each connection's
user is also read with ``SO_PEERCRED`` by the listener guard. A socket file left by an
earlier server that nothing listens on any more is replaced; a live one, or any other file,
is left alone and the server does not start.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

from jarvis.domain.errors import ConfigurationError

MODE = 0o600


def owner_only_socket(path: Path) -> socket.socket:
    """A listening-ready stream socket bound at ``path`` with mode 0600."""
    try:
        existing = path.lstat()
    except FileNotFoundError:
        existing = None
    if existing is not None:
        if not stat.S_ISSOCK(existing.st_mode):
            raise ConfigurationError(f"{path} exists and is not a socket: not replacing it.")
        if _live(path):
            raise ConfigurationError(
                f"A server is listening on {path} already.", hint="Choose another --unix path."
            )
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise ConfigurationError(f"Cannot listen on {path}: {exc.strerror or exc}.") from None
    finally:
        os.umask(previous)
    os.chmod(path, MODE)
    return sock


def _live(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True
