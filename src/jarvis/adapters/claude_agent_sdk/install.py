"""Node and the runner: found, checked and installed once per runner version.

The runner's sources (``claude_code_runner/``: ``package.json``, its lock file,
``runner.mjs``) ship inside the wheel as ``jarvis/_claude_code_runner/`` and are read from
the source tree in a checkout. The first run copies them into
``<config dir>/claude_code_runner/<version>/`` and runs ``npm ci`` there (about 450 MB, 20-60
s; npm's progress goes to stderr), in a private HOME so npm writes nothing into the
user's; a stamp file holding the version and a digest of the sources marks the install
complete, so later runs only read the stamp. ``$JARVIS_CLAUDE_CODE_RUNNER_DIR`` names a
ready install instead (tests and CI: ``scripts/lib/install.sh`` caches one).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from jarvis.domain.errors import ExternalRuntimeError

RUNTIME = "claude_code"
MIN_NODE = (18, 14)
SOURCES = ("package.json", "package-lock.json", "runner.mjs")
STAMP = ".jarvis-installed"
INSTALL_TIMEOUT = 900.0
NODE_HINT = (
    "Install Node.js 18.14 or later (Node 20 LTS: `apt-get install nodejs` on Debian 13 / "
    "Ubuntu 24.04, or https://nodejs.org) and make sure `node` and `npm` are on PATH."
)


@dataclass(frozen=True, slots=True)
class Node:
    path: str
    version: tuple[int, int, int]


def parse_node_version(text: str) -> tuple[int, int, int] | None:
    match = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)\S*", text.strip())
    if match is None:
        return None
    return int(match[1]), int(match[2]), int(match[3])


def find_node(path: str | None = None) -> Node:
    """``node`` on ``path`` (default: ``$PATH``), at least :data:`MIN_NODE`."""
    binary = shutil.which("node", path=path if path is not None else os.environ.get("PATH"))
    if binary is None:
        raise ExternalRuntimeError(
            "Node.js is not installed: the claude_code agent runs the Claude Agent SDK on it.",
            runtime=RUNTIME,
            hint=NODE_HINT,
        )
    try:
        done = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ExternalRuntimeError(
            f"{binary} --version failed ({type(exc).__name__}).", runtime=RUNTIME, hint=NODE_HINT
        ) from None
    version = parse_node_version(done.stdout[:100])
    if version is None:
        raise ExternalRuntimeError(
            f"{binary} did not report a version ({done.stdout[:60]!r}).",
            runtime=RUNTIME,
            hint=NODE_HINT,
        )
    if version[:2] < MIN_NODE:
        raise ExternalRuntimeError(
            f"Node.js {'.'.join(map(str, version))} is too old: the Claude Agent SDK needs "
            f"{MIN_NODE[0]}.{MIN_NODE[1]} or later.",
            runtime=RUNTIME,
            hint=NODE_HINT,
        )
    return Node(binary, version)


def runner_sources() -> Path:
    """The runner's sources: the wheel's copy, else the checkout's ``claude_code_runner/``."""
    package = Path(__file__).resolve().parents[2]  # .../jarvis
    for candidate in (package / "_claude_code_runner", package.parents[1] / "claude_code_runner"):
        if (candidate / "runner.mjs").is_file() and (candidate / "package.json").is_file():
            return candidate
    raise ExternalRuntimeError(
        "The claude_code runner's sources are missing from this installation.",
        runtime=RUNTIME,
        hint="Reinstall jarvis (the wheel ships them as jarvis/_claude_code_runner).",
    )


def runner_version(sources: Path) -> str:
    try:
        version = json.loads((sources / "package.json").read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError, TypeError):
        version = None
    if not isinstance(version, str) or not re.fullmatch(r"[0-9A-Za-z.+-]{1,40}", version):
        raise ExternalRuntimeError(
            f"{sources / 'package.json'} has no valid version.", runtime=RUNTIME
        )
    return version


def _digest(sources: Path) -> str:
    hasher = hashlib.sha256()
    for name in SOURCES:
        path = sources / name
        if path.is_file():
            hasher.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return hasher.hexdigest()


def ready_dir(env: dict[str, str] | None = None) -> Path | None:
    """``$JARVIS_CLAUDE_CODE_RUNNER_DIR`` when set (checked: it must hold a runner)."""
    env = dict(os.environ) if env is None else env
    explicit = env.get("JARVIS_CLAUDE_CODE_RUNNER_DIR")
    if not explicit:
        return None
    path = Path(explicit)
    if not (path / "runner.mjs").is_file() or not (path / "node_modules").is_dir():
        raise ExternalRuntimeError(
            f"JARVIS_CLAUDE_CODE_RUNNER_DIR={explicit} holds no installed runner "
            "(runner.mjs and node_modules/).",
            runtime=RUNTIME,
            hint="Unset it to let jarvis install the runner, or run scripts/test to cache one.",
        )
    return path


def install_runner(root: Path, *, sources: Path | None = None, npm: str | None = None) -> Path:
    """The runner installed under ``root/<version>/``: read from the stamp when it is
    current, else installed now (under a lock: two processes never install at once)."""
    sources = runner_sources() if sources is None else sources
    target = root / runner_version(sources)
    stamp = f"{runner_version(sources)} {_digest(sources)}\n"
    if _stamped(target, stamp):
        return target
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(root / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _stamped(target, stamp):  # another process installed it meanwhile
            return target
        _install(target, sources, stamp, npm or shutil.which("npm"))
    return target


def _stamped(target: Path, stamp: str) -> bool:
    with contextlib.suppress(OSError):
        return (target / STAMP).read_text(encoding="utf-8") == stamp
    return False


def _stderr() -> int:
    """jarvis's stderr for npm's progress (never stdout: ``--json`` answers go there)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return subprocess.DEVNULL


def _install(target: Path, sources: Path, stamp: str, npm: str | None) -> None:
    if npm is None:
        raise ExternalRuntimeError(
            "npm is not installed: it installs the claude_code runner once.",
            runtime=RUNTIME,
            hint=NODE_HINT,
        )
    staging = Path(tempfile.mkdtemp(prefix=".install-", dir=target.parent))
    private = Path(tempfile.mkdtemp(prefix="jarvis-npm-"))
    try:
        for name in SOURCES:
            if (sources / name).is_file():
                shutil.copy2(sources / name, staging / name)
        command = "ci" if (staging / "package-lock.json").is_file() else "install"
        sys.stderr.write(
            f"jarvis: installing the claude_code runner into {target} "
            f"(npm {command}, about 450 MB, once per runner version)...\n"
        )
        sys.stderr.flush()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(private),
            "TMPDIR": str(private),
            "npm_config_cache": str(private / "npm-cache"),
            "npm_config_update_notifier": "false",
            "npm_config_fund": "false",
            "npm_config_audit": "false",
            "npm_config_progress": "true",
        }
        for name in ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "npm_config_registry"):
            if name in os.environ:
                env[name] = os.environ[name]
        try:
            done = subprocess.run(
                [npm, command, "--omit=dev", "--no-save", "--loglevel=http"],
                cwd=staging,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=_stderr(),
                stderr=subprocess.STDOUT,
                timeout=INSTALL_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ExternalRuntimeError(
                f"Installing the claude_code runner took over {INSTALL_TIMEOUT:.0f} s.",
                runtime=RUNTIME,
                hint="Check the network access to the npm registry, then try again.",
            ) from None
        if done.returncode != 0:
            raise ExternalRuntimeError(
                f"Installing the claude_code runner failed (npm {command} exited "
                f"{done.returncode}); its output is above.",
                runtime=RUNTIME,
                hint="Check the network access to the npm registry, then try again.",
            )
        (staging / STAMP).write_text(stamp, encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
        sys.stderr.write("jarvis: the claude_code runner is installed.\n")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)
