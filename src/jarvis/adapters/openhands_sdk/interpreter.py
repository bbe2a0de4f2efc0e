"""Which Python runs the openhands SDK: it needs 3.12+, and jarvis may itself run on 3.11,
so the SDK lives in an environment of its own and is driven over stdio.

The order: ``$JARVIS_OPENHANDS_PYTHON`` (or the path given to the runtime), else the
pinned venv ``scripts/lib/install.sh`` creates under ``~/.cache/jarvis/runtimes``, else
the first ``python3.13`` / ``python3.12`` / ``python3`` on PATH that can import the SDK.
The chosen interpreter is probed once (version and ``openhands.sdk`` importable, without
importing it: that takes seconds) so a wrong one is a clear message, not a traceback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from jarvis.domain.errors import ExternalRuntimeError

OPENHANDS_VERSION = "1.58.2"
ENV_VAR = "JARVIS_OPENHANDS_PYTHON"
PROBE_TIMEOUT = 30.0
INSTALL_HINT = (
    "scripts/test installs it (a Python 3.12 venv with openhands-sdk under "
    f"~/.cache/jarvis/runtimes/openhands-{OPENHANDS_VERSION}). By hand: "
    "`python3.12 -m venv DIR && DIR/bin/pip install "
    f"openhands-sdk=={OPENHANDS_VERSION} openhands-tools=={OPENHANDS_VERSION}`, "
    f"then set {ENV_VAR}=DIR/bin/python."
)
_PROBE = (
    "import sys, importlib.util as u\n"
    "ok = sys.version_info >= (3, 12) and u.find_spec('openhands') is not None "
    "and u.find_spec('openhands.sdk') is not None and u.find_spec('openhands.tools') is not None\n"
    "print('%d.%d.%d' % sys.version_info[:3], int(bool(ok)))\n"
)


@dataclass(frozen=True, slots=True)
class Probe:
    version: str
    has_sdk: bool

    @property
    def new_enough(self) -> bool:
        parts = [int(p) for p in self.version.split(".")[:2] if p.isdigit()]
        return len(parts) == 2 and (parts[0], parts[1]) >= (3, 12)


def probe(python: str) -> Probe | None:
    """Its version and whether it has the SDK; ``None`` when it does not run at all."""
    try:
        done = subprocess.run(
            [python, "-I", "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    fields = done.stdout.strip()[:100].split()
    if done.returncode != 0 or len(fields) != 2:
        return None
    return Probe(version=fields[0], has_sdk=fields[1] == "1")


def pinned_python(env: dict[str, str]) -> Path:
    cache = Path(env.get("JARVIS_RUNTIMES") or Path.home() / ".cache" / "jarvis" / "runtimes")
    return cache / f"openhands-{OPENHANDS_VERSION}" / "bin" / "python"


def find_python(explicit: str | None = None, env: dict[str, str] | None = None) -> str:
    """The interpreter to run the runner with, checked; an ``ExternalRuntimeError`` saying
    how to install the SDK otherwise."""
    env = dict(os.environ) if env is None else env
    chosen = explicit or env.get(ENV_VAR) or ""
    if chosen:
        return _checked(chosen)
    pinned = pinned_python(env)
    if os.access(pinned, os.X_OK):
        return _checked(str(pinned))
    for name in ("python3.13", "python3.12", "python3"):
        found = shutil.which(name, path=env.get("PATH"))
        seen = None if found is None else probe(found)
        if found is not None and seen is not None and seen.new_enough and seen.has_sdk:
            return found
    raise ExternalRuntimeError(
        "The openhands SDK is not installed (it needs a Python 3.12+ of its own).",
        runtime="openhands",
        hint=INSTALL_HINT,
    )


def _checked(python: str) -> str:
    seen = probe(python)
    if seen is None:
        raise ExternalRuntimeError(
            f"The Python for openhands, '{python}', does not run.",
            runtime="openhands",
            hint=INSTALL_HINT,
        )
    if not seen.new_enough:
        raise ExternalRuntimeError(
            f"openhands needs Python 3.12 or newer; '{python}' is Python {seen.version}.",
            runtime="openhands",
            hint=INSTALL_HINT,
        )
    if not seen.has_sdk:
        raise ExternalRuntimeError(
            f"The openhands SDK is not installed in '{python}' (Python {seen.version}).",
            runtime="openhands",
            hint=INSTALL_HINT,
        )
    return python
