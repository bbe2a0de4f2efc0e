"""For tests whose fake runtimes run inside the runtimes' jail, which hides the home
directory (where this machine's test interpreter may live)."""

from __future__ import annotations

import os
import sys


def visible_python() -> str:
    """A Python the jail shows: the system's (under /usr), else this test's own."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return sys.executable
