"""The settings of the adapter, and what every container is created with.

Kept apart from the API calls so that the isolation options can be read (and tested) in
one place. Traps of the Docker-compatible API that shaped them (Podman 4.3 and Docker):

* ``network_disabled=True`` is ignored by Podman (the container gets eth0): only
  ``network_mode="none"`` removes the network;
* ``auto_remove=True`` loses the exit code: containers are removed explicitly;
* an explicit ``ulimits`` list replaces the runtime's defaults: nofile and nproc go together
  (RLIMIT_NPROC counts every process of the user on the host, so it is set well above what
  all sandboxes together may run; ``pids_limit`` is what contains a fork bomb);
* the SDK copies the proxy settings of ``~/.docker/config.json`` into the environment
  unless ``use_config_proxy=False``;
* a container's stdout is kept in a log on disk unless logging is off.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
from dataclasses import dataclass

from jarvis.adapters.docker_containers.endpoint import RuntimeName, runtime_name
from jarvis.domain.errors import ConfigurationError, SandboxError
from jarvis.domain.ports import ContainerSpec

MANAGED_LABEL = "io.jarvis.managed"
OWNER_LABEL = "io.jarvis.owner"
RUN_LABEL = "io.jarvis.run"
SANDBOX_USER = "65534:65534"
ENVIRONMENT = {
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerSettings:
    """``[sandbox]`` as the adapter needs it. ``image`` empty: jarvis's own sandbox image."""

    runtime: RuntimeName = "auto"
    socket: str = ""
    image: str = ""
    max_concurrent: int = 5
    default_timeout: float | None = 300.0
    max_line_bytes: int = 16 * 1024 * 1024
    stderr_bytes: int = 64 * 1024
    queued_lines: int = 64
    nofile: int = 1024
    nproc: int = 8192
    api_timeout: float = 60.0

    def __post_init__(self) -> None:
        runtime_name(self.runtime)
        checks = {
            "max_concurrent": 1 <= self.max_concurrent <= 1024,
            "max_line_bytes": 1024 <= self.max_line_bytes <= 1 << 30,
            "stderr_bytes": 0 <= self.stderr_bytes <= 1 << 24,
            "queued_lines": 1 <= self.queued_lines <= 4096,
            "nofile": 16 <= self.nofile <= 1 << 20,
            "nproc": 16 <= self.nproc <= 32768,
            "api_timeout": 0 < self.api_timeout <= 3600,
        }
        if self.default_timeout is not None:
            checks["default_timeout"] = 0 < self.default_timeout <= 7 * 24 * 3600
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ConfigurationError(f"[sandbox] {bad[0]} is out of range.")


def owner_id() -> str:
    """This process, as the owner label says it: host, pid and the pid's start time (so a
    reused pid is not taken for the owner)."""
    return f"{socket.gethostname()}:{os.getpid()}:{process_start(os.getpid())}"


def process_start(pid: int) -> str:
    """The start time of ``pid`` in clock ticks since boot, ``""`` if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return fields[19].decode()
    except (OSError, IndexError):
        return ""


def owner_is_gone(owner: str, me: str) -> bool:
    """True when ``owner`` is this process or a process of this host that no longer runs.

    A container of another host (a shared remote daemon) or of a live process is left
    alone."""
    if owner == me:
        return True
    host, _, rest = owner.partition(":")
    pid, _, started = rest.partition(":")
    if host != me.split(":", 1)[0] or not pid.isdigit():
        return not owner  # unlabelled by an owner: a leftover of ours all the same
    return process_start(int(pid)) != started


def container_name(run_id: str) -> str:
    clean = re.sub(r"[^a-zA-Z0-9_.-]", "-", run_id)[:40].strip("-.")
    return f"jarvis-sandbox-{clean + '-' if clean else ''}{secrets.token_hex(4)}"


def host_config_options(spec: ContainerSpec, settings: ContainerSettings) -> dict[str, object]:
    """Keyword arguments of ``APIClient.create_host_config`` (besides ``ulimits`` and
    ``log_config``, which need the SDK's types: see :func:`ulimit_values`)."""
    if spec.network:
        raise SandboxError("Sandbox containers have no network; a spec asked for one.")
    limits = {
        "memory_mb": 4 <= spec.memory_mb <= 1 << 20,
        "cpus": 0.01 <= spec.cpus <= 1024,
        "pids_limit": 8 <= spec.pids_limit <= 1 << 22,
        "tmp_mb": 1 <= spec.tmp_mb <= 1 << 20,
    }
    bad = [name for name, ok in limits.items() if not ok]
    if bad:
        raise ConfigurationError(f"[sandbox] {bad[0]} is out of range.")
    binds = []
    for mount in spec.mounts:
        if not os.path.isabs(mount.source) or not os.path.isabs(mount.target):
            raise SandboxError(f"A mount needs absolute paths: {mount.source} -> {mount.target}")
        if ":" in mount.source or ":" in mount.target or "," in mount.target:
            raise SandboxError(f"A mount path cannot contain ':' or ',': {mount.source}")
        binds.append(f"{mount.source}:{mount.target}:{'ro' if mount.read_only else 'rw'}")
    memory = f"{spec.memory_mb}m"
    return {
        "network_mode": "none",
        "read_only": True,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "mem_limit": memory,
        "memswap_limit": memory,  # no swap beyond the memory limit
        "pids_limit": spec.pids_limit,
        "nano_cpus": int(spec.cpus * 1e9),
        "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={spec.tmp_mb}m,mode=1777"},
        "init": True,
        "binds": binds,
        "privileged": False,
        "oom_score_adj": 1000,  # under memory pressure on the host, a sandbox goes first
    }


def ulimit_values(settings: ContainerSettings) -> list[tuple[str, int]]:
    return [("nofile", settings.nofile), ("nproc", settings.nproc)]


def labels_for(spec: ContainerSpec, owner: str) -> dict[str, str]:
    return {
        **spec.labels,
        MANAGED_LABEL: "1",
        OWNER_LABEL: owner,
        RUN_LABEL: spec.run_id or "-",
    }


def create_options(spec: ContainerSpec, owner: str) -> dict[str, object]:
    """Keyword arguments of ``APIClient.create_container`` (besides ``host_config``)."""
    return {
        "image": spec.image,
        "command": list(spec.command) or None,
        "stdin_open": True,
        "tty": False,
        "detach": False,  # stdout and stderr attached
        "user": SANDBOX_USER,
        "environment": dict(ENVIRONMENT),
        "working_dir": spec.workdir or "/tmp",
        "labels": labels_for(spec, owner),
        "name": container_name(spec.run_id),
        "hostname": "sandbox",
        "network_disabled": True,
        "use_config_proxy": False,
    }
