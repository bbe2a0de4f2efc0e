"""Throwaway ordinary users and folders they may walk through, for the tests that attack
jarvis as another user of the machine (they must run as root to create one)."""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
import time
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
    for attempt in range(5):  # another process's useradd may hold the password file's lock
        made = subprocess.run(
            [useradd, "--no-create-home", "--user-group", "--shell", "/bin/false", name],
            capture_output=True,
            text=True,
            check=False,
        )
        if made.returncode == 0:
            break
        if attempt == 4:
            raise RuntimeError(f"useradd {name} failed: {made.stderr.strip()}")
        time.sleep(0.5)
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


def ensure_user(name: str) -> int:
    """The uid of the lasting user ``name`` (with a home), created when missing. Test
    processes running in parallel may both find it missing: a ``useradd`` that failed
    because the other one just made it is fine."""
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    for _attempt in range(5):
        try:
            return pwd.getpwnam(name).pw_uid
        except KeyError:
            pass
        made = subprocess.run(
            [useradd, "--create-home", name], capture_output=True, text=True, check=False
        )
        if made.returncode != 0:
            time.sleep(0.5)  # another useradd holds the password file's lock
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        raise RuntimeError(f"useradd {name} failed: {made.stderr.strip()}") from None
