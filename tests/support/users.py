"""Throwaway ordinary users and folders they may walk through, for the tests that attack
jarvis as another user of the machine (they must run as root to create one)."""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

_names = itertools.count()


@contextmanager
def throwaway_user(prefix: str) -> Iterator[tuple[int, int]]:
    """A new user and group (``useradd``, no home, no shell), removed afterwards: its uid
    and gid. Skips the test where it cannot be made (not root, or no useradd/userdel)."""
    useradd, userdel = shutil.which("useradd"), shutil.which("userdel")
    if os.geteuid() != 0:
        pytest.skip("another user can only be created as root")
    if useradd is None or userdel is None:
        pytest.skip("running as root without useradd/userdel: cannot create an ordinary user")
    name = f"{prefix}{os.getpid() % 100000}{next(_names)}"
    subprocess.run(
        [useradd, "--no-create-home", "--user-group", "--shell", "/bin/false", name],
        check=True,
        capture_output=True,
    )
    try:
        entry = pwd.getpwnam(name)
        yield entry.pw_uid, entry.pw_gid
    finally:
        subprocess.run([userdel, name], check=False, capture_output=True)


@contextmanager
def open_directory(prefix: str) -> Iterator[Path]:
    """A directory every user may walk through (unlike pytest's own temp dirs), removed
    afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
