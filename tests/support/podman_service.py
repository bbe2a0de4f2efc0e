"""A private Podman API service for the tests and benchmarks: its own config, storage, socket.

Podman pins its storage paths in its database the first time it runs and silently ignores
later changes, so every setting is in files of our own, pointed at by ``CONTAINERS_CONF``,
``CONTAINERS_STORAGE_CONF`` and ``CONTAINERS_REGISTRIES_CONF`` before podman first runs:

* ``runtime = "runc"``: crun fails on this kind of machine ("cgroups in hybrid mode");
* ``default_ulimits`` within what root may set here (no CAP_SYS_RESOURCE: podman's default
  of 1048576 open files fails with "error setting rlimit");
* ``http_proxy = false``: the service's own proxy variables never reach a container;
* the overlay driver (vfs starts containers about twice as slowly), no registry at all
  (none is reachable: short names fail at once instead of timing out).

The service is ``podman system service --time=0 unix://<dir>/podman.sock``, stopped (and its
storage deleted) afterwards. A missing ``podman`` skips the tests that need it, saying why,
except in CI (``CI=true``) where it fails: ``scripts/test`` installs Podman there.
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.lifetime import die_with_parent

STARTUP_TIMEOUT = 30.0
NPROC_LIMIT = 32768  # podman lowers its own RLIMIT_NPROC to this; more cannot be granted


@dataclass(frozen=True, slots=True)
class PodmanService:
    socket_path: Path
    env: dict[str, str]
    """The environment under which the ``podman`` CLI sees the same configuration."""
    base: Path

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def podman(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run the ``podman`` CLI against this service's storage."""
        return subprocess.run(
            ["podman", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def missing_podman() -> str | None:
    """Why the service cannot be started here, or ``None`` when it can."""
    if shutil.which("podman") is None:
        return "podman is not installed (scripts/test installs it: apt-get install podman runc)"
    if shutil.which("runc") is None:
        return "runc is not installed (apt-get install runc; crun does not work here)"
    if shutil.which("catatonit") is None and not Path("/usr/libexec/podman/catatonit").exists():
        return (
            "catatonit (the containers' init process) is not installed (apt-get install catatonit)"
        )
    return None


def require_podman() -> None:
    """Skip the calling test when podman is missing; fail instead when ``CI=true``."""
    import pytest

    reason = missing_podman()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI must install it (scripts/lib/install.sh ensure_podman)")
    pytest.skip(reason)


def write_config(base: Path) -> dict[str, str]:
    """The three configuration files under ``base``; the environment that selects them."""
    hard_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = 1048576 if hard_nofile == resource.RLIM_INFINITY else hard_nofile
    for sub in ("graph", "run", "tmp"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    (base / "containers.conf").write_text(
        "[containers]\n"
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={NPROC_LIMIT}:{NPROC_LIMIT}"]\n'
        "http_proxy = false\n"
        "log_size_max = 1048576\n"
        "[engine]\n"
        'runtime = "runc"\n'
        'cgroup_manager = "cgroupfs"\n'
        'events_logger = "file"\n'
        f'tmp_dir = "{base / "tmp"}"\n'
        "image_parallel_copies = 0\n"
    )
    (base / "storage.conf").write_text(
        "[storage]\n"
        'driver = "overlay"\n'
        f'graphroot = "{base / "graph"}"\n'
        f'runroot = "{base / "run"}"\n'
    )
    (base / "registries.conf").write_text("unqualified-search-registries = []\n")
    return {
        "CONTAINERS_CONF": str(base / "containers.conf"),
        "CONTAINERS_STORAGE_CONF": str(base / "storage.conf"),
        "CONTAINERS_REGISTRIES_CONF": str(base / "registries.conf"),
    }


def _answers(path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2)
            sock.connect(str(path))
            sock.sendall(b"GET /_ping HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n")
            return sock.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


@contextmanager
def running_podman_service(
    base: Path | None = None, *, extra_env: dict[str, str] | None = None
) -> Iterator[PodmanService]:
    """Start a private service (in a new temp dir unless ``base`` is given); stop it after.

    ``extra_env`` is added to the service's environment (tests put canaries there that no
    container may see).

    Raises ``RuntimeError`` when it does not answer; callers decide whether to skip first
    (:func:`require_podman`).
    """
    own = base is None
    root = Path(tempfile.mkdtemp(prefix="jarvis-podman-")) if base is None else base
    env = {**os.environ, **(extra_env or {}), **write_config(root)}
    sock = root / "podman.sock"
    log = (root / "service.log").open("wb")
    process = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{sock}"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent,
    )
    service = PodmanService(socket_path=sock, env=env, base=root)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not _answers(sock):
            if process.poll() is not None or time.monotonic() > deadline:
                said = (root / "service.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the podman service did not start:\n{said}")
            time.sleep(0.05)
        yield service
    finally:
        service.podman("rm", "--all", "--force", "--time", "0", timeout=120)
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(15)
        log.close()
        if own:
            service.podman("system", "reset", "--force", timeout=120)
            shutil.rmtree(root, ignore_errors=True)
