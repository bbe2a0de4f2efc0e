"""The ``jarvis`` command run as a user runs it: this interpreter, this environment."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping


def run_jarvis(
    *args: str, timeout: float = 600, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``jarvis ARGS...`` to its end (``timeout`` is only a backstop), its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,  # never the terminal's: nothing waits for a keypress
        env=dict(os.environ if env is None else env),
        check=False,
    )
