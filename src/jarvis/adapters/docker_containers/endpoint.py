"""Which Docker-compatible API socket to talk to, and which runtime is probably behind it.

Order: an explicit ``socket`` (``[sandbox] socket``), then ``DOCKER_HOST``, then the usual
places of the runtime asked for (``auto``: Docker's first, then Podman's). Only a path that
is a Unix socket right now counts, so a stale path never hides a live one further down.
Pure functions of an environment mapping and a socket test, so they are tested without a
runtime.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from jarvis.domain.errors import ConfigurationError, ContainerRuntimeUnavailableError

RuntimeName = Literal["auto", "docker", "podman"]
RUNTIMES: tuple[RuntimeName, ...] = ("auto", "docker", "podman")

START_HINT = (
    "Start one: `podman system service --time=0 unix:///run/podman/podman.sock &` "
    "(as root; `apt-get install podman runc` installs it), or start Docker; "
    "or name the socket with [sandbox] socket or DOCKER_HOST."
)


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str
    """What the docker SDK is given: ``unix:///path``, ``tcp://host:port`` or ``ssh://...``."""
    runtime: Literal["docker", "podman"]
    """The runtime guessed from the path (a Docker socket may be Podman's in disguise)."""
    source: str
    """Where it was found: ``socket``, ``DOCKER_HOST`` or ``default``."""


def is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def runtime_name(value: str) -> RuntimeName:
    """``value`` checked against the accepted names."""
    for name in RUNTIMES:
        if value == name:
            return name
    raise ConfigurationError(
        f"Unknown container runtime {value!r}.", hint="Use one of: " + ", ".join(RUNTIMES)
    )


def candidate_sockets(runtime: RuntimeName, env: Mapping[str, str], uid: int) -> list[str]:
    """The usual socket paths of ``runtime``, most likely first."""
    runtime_dir = env.get("XDG_RUNTIME_DIR") or f"/run/user/{uid}"
    docker = ["/var/run/docker.sock", "/run/docker.sock", f"{runtime_dir}/docker.sock"]
    podman = [f"{runtime_dir}/podman/podman.sock", "/run/podman/podman.sock"]
    if uid == 0:  # root's rootful socket first; /run/user/0 rarely exists
        podman.reverse()
    found = {"docker": docker, "podman": podman, "auto": docker + podman}[runtime]
    return list(dict.fromkeys(found))


def _url(value: str) -> str:
    return value if "://" in value else f"unix://{value}"


def _guess(url: str, asked: RuntimeName) -> Literal["docker", "podman"]:
    if asked != "auto":
        return asked
    return "podman" if "podman" in url else "docker"


def discover(
    runtime: RuntimeName = "auto",
    socket: str = "",
    *,
    env: Mapping[str, str] | None = None,
    uid: int | None = None,
    socket_exists: Callable[[str], bool] = is_socket,
) -> Endpoint:
    """The endpoint to use; ``ContainerRuntimeUnavailableError`` (listing what was tried)
    when there is none."""
    env = os.environ if env is None else env
    uid = os.getuid() if uid is None else uid
    if socket:
        url = _url(socket)
        if url.startswith("unix://") and not socket_exists(url[len("unix://") :]):
            raise ContainerRuntimeUnavailableError(
                f"The container socket {url[len('unix://') :]} ([sandbox] socket) does not exist.",
                endpoint=url,
                hint=START_HINT,
            )
        return Endpoint(url, _guess(url, runtime), "socket")
    docker_host = env.get("DOCKER_HOST", "").strip()
    if docker_host:
        url = _url(docker_host)
        if url.startswith("unix://") and not socket_exists(url[len("unix://") :]):
            raise ContainerRuntimeUnavailableError(
                f"DOCKER_HOST names {url}, which is not a socket.",
                endpoint=url,
                hint=START_HINT,
            )
        return Endpoint(url, _guess(url, runtime), "DOCKER_HOST")
    tried = candidate_sockets(runtime, env, uid)
    for path in tried:
        if socket_exists(path):
            return Endpoint(f"unix://{path}", _guess(path, runtime), "default")
    which = "container runtime" if runtime == "auto" else runtime
    raise ContainerRuntimeUnavailableError(
        f"No {which} socket found (looked at {', '.join(tried)}; DOCKER_HOST is not set).",
        hint=START_HINT,
    )
