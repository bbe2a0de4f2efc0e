"""Finding the Docker or Podman socket, the adapter's settings, and a runtime that is down.

No runtime is needed: discovery is a function of an environment and a socket test, and the
"down" cases use real Unix socket files that nothing (or nothing useful) answers on.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jarvis.adapters.docker_containers import ContainerSettings, DockerContainerRuntime
from jarvis.adapters.docker_containers.endpoint import (
    candidate_sockets,
    discover,
    is_socket,
    runtime_name,
)
from jarvis.adapters.docker_containers.options import (
    ENVIRONMENT,
    create_options,
    host_config_options,
    owner_id,
    owner_is_gone,
    process_start,
    ulimit_values,
)
from jarvis.domain.errors import (
    ConfigurationError,
    ContainerRuntimeUnavailableError,
    SandboxError,
)
from jarvis.domain.ports import ContainerSpec, Mount


def only(*paths: str) -> Callable[[str], bool]:
    return lambda path: path in paths


# --- discovery ----------------------------------------------------------------------------


def test_an_explicit_socket_wins_over_everything() -> None:
    found = discover(
        "auto",
        "/srv/podman.sock",
        env={"DOCKER_HOST": "unix:///var/run/docker.sock"},
        uid=0,
        socket_exists=only("/srv/podman.sock", "/var/run/docker.sock"),
    )
    assert (found.url, found.source, found.runtime) == (
        "unix:///srv/podman.sock",
        "socket",
        "podman",
    )


def test_an_explicit_url_is_taken_as_is() -> None:
    found = discover("docker", "tcp://10.0.0.5:2375", env={}, uid=0, socket_exists=only())
    assert (found.url, found.runtime) == ("tcp://10.0.0.5:2375", "docker")


def test_docker_host_comes_next() -> None:
    found = discover(
        "auto",
        env={"DOCKER_HOST": "unix:///run/user/1000/podman/podman.sock"},
        uid=1000,
        socket_exists=only("/run/user/1000/podman/podman.sock", "/var/run/docker.sock"),
    )
    assert (found.url, found.source, found.runtime) == (
        "unix:///run/user/1000/podman/podman.sock",
        "DOCKER_HOST",
        "podman",
    )


def test_a_docker_host_that_is_not_a_socket_is_an_error_not_a_fallback() -> None:
    with pytest.raises(ContainerRuntimeUnavailableError, match="DOCKER_HOST") as caught:
        discover(
            "auto",
            env={"DOCKER_HOST": "unix:///nowhere.sock"},
            uid=0,
            socket_exists=only("/var/run/docker.sock"),
        )
    assert caught.value.endpoint == "unix:///nowhere.sock"


def test_a_configured_socket_that_is_missing_is_named() -> None:
    with pytest.raises(ContainerRuntimeUnavailableError, match=r"/srv/none\.sock"):
        discover("auto", "/srv/none.sock", env={}, uid=0, socket_exists=only())


def test_auto_prefers_docker_then_podman() -> None:
    both = only("/var/run/docker.sock", "/run/podman/podman.sock")
    assert discover("auto", env={}, uid=0, socket_exists=both).runtime == "docker"
    podman_only = only("/run/podman/podman.sock")
    found = discover("auto", env={}, uid=0, socket_exists=podman_only)
    assert (found.url, found.runtime) == ("unix:///run/podman/podman.sock", "podman")


def test_asking_for_podman_ignores_docker_sockets() -> None:
    found = discover(
        "podman",
        env={"XDG_RUNTIME_DIR": "/run/user/1000"},
        uid=1000,
        socket_exists=only("/var/run/docker.sock", "/run/user/1000/podman/podman.sock"),
    )
    assert found.url == "unix:///run/user/1000/podman/podman.sock"


def test_usual_places() -> None:
    assert candidate_sockets("docker", {}, 0)[0] == "/var/run/docker.sock"
    assert candidate_sockets("podman", {}, 0) == [
        "/run/podman/podman.sock",
        "/run/user/0/podman/podman.sock",
    ]
    assert candidate_sockets("podman", {"XDG_RUNTIME_DIR": "/x"}, 1000) == [
        "/x/podman/podman.sock",
        "/run/podman/podman.sock",
    ]


def test_nothing_found_lists_where_it_looked_and_how_to_start_one() -> None:
    with pytest.raises(ContainerRuntimeUnavailableError) as caught:
        discover("podman", env={}, uid=0, socket_exists=only())
    text = str(caught.value)
    assert "/run/podman/podman.sock" in text
    assert "podman system service" in text
    assert isinstance(caught.value, SandboxError)


def test_only_real_sockets_count(tmp_path: Path) -> None:
    plain = tmp_path / "docker.sock"
    plain.write_text("")
    assert not is_socket(str(plain))
    assert not is_socket(str(tmp_path / "missing"))
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "real.sock"))
        assert is_socket(str(tmp_path / "real.sock"))


def test_unknown_runtime_names_are_refused() -> None:
    assert runtime_name("podman") == "podman"
    with pytest.raises(ConfigurationError, match="auto, docker, podman"):
        runtime_name("lxc")


# --- settings and container options -------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"max_concurrent": 0},
        {"max_line_bytes": 10},
        {"nproc": 1 << 20},
        {"default_timeout": 0.0},
        {"runtime": "lxc"},
    ],
)
def test_settings_out_of_range_are_configuration_errors(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        ContainerSettings(**bad)  # type: ignore[arg-type]


def test_every_container_is_isolated_whatever_the_spec() -> None:
    spec = ContainerSpec(image="img", memory_mb=256, cpus=0.5, pids_limit=64, tmp_mb=16)
    host = host_config_options(spec, ContainerSettings())
    assert host["network_mode"] == "none"
    assert host["read_only"] is True
    assert host["cap_drop"] == ["ALL"]
    assert host["security_opt"] == ["no-new-privileges"]
    assert (host["mem_limit"], host["memswap_limit"]) == ("256m", "256m")
    assert host["pids_limit"] == 64
    assert host["nano_cpus"] == 500_000_000
    assert host["tmpfs"] == {"/tmp": "rw,nosuid,nodev,size=16m,mode=1777"}
    assert host["init"] is True
    assert host["privileged"] is False
    assert dict(ulimit_values(ContainerSettings())) == {"nofile": 1024, "nproc": 8192}
    made = create_options(spec, "me")
    assert made["user"] == "65534:65534"
    assert made["environment"] == ENVIRONMENT
    assert made["use_config_proxy"] is False
    assert (made["stdin_open"], made["tty"]) == (True, False)
    labels = made["labels"]
    assert isinstance(labels, dict)
    assert labels["io.jarvis.managed"] == "1"
    assert labels["io.jarvis.owner"] == "me"


def test_a_spec_cannot_turn_the_network_on() -> None:
    with pytest.raises(SandboxError, match="no network"):
        host_config_options(ContainerSpec(image="img", network=True), ContainerSettings())


@pytest.mark.parametrize(
    "mount",
    [
        Mount(source="relative/dir", target="/data"),
        Mount(source="/data", target="relative"),
        Mount(source="/a:/etc", target="/data"),
        Mount(source="/data", target="/x,rw"),
    ],
)
def test_mounts_that_could_smuggle_options_are_refused(mount: Mount) -> None:
    with pytest.raises(SandboxError):
        host_config_options(ContainerSpec(image="img", mounts=(mount,)), ContainerSettings())


def test_mounts_become_binds_with_their_mode() -> None:
    spec = ContainerSpec(
        image="img",
        mounts=(
            Mount(source="/srv/data", target="/data"),
            Mount(source="/srv/out", target="/out", read_only=False),
        ),
    )
    assert host_config_options(spec, ContainerSettings())["binds"] == [
        "/srv/data:/data:ro",
        "/srv/out:/out:rw",
    ]


def test_container_names_are_safe_and_unique() -> None:
    first = create_options(ContainerSpec(image="i", run_id="../../x y"), "me")["name"]
    second = create_options(ContainerSpec(image="i", run_id="../../x y"), "me")["name"]
    assert first != second
    assert isinstance(first, str)
    assert all(c.isalnum() or c in "-_." for c in first)


def test_owners_this_process_and_dead_ones_are_gone_live_and_foreign_ones_not() -> None:
    me = owner_id()
    host = me.split(":")[0]
    assert owner_is_gone(me, me)
    assert owner_is_gone(f"{host}:999999999:5", me)
    assert owner_is_gone(f"{host}:1:0", me)  # pid 1 lives, but started at another time
    assert not owner_is_gone(f"{host}:1:{process_start(1)}", me)
    assert not owner_is_gone("elsewhere:1:1", me)
    assert owner_is_gone("", me)


# --- a runtime that is down ---------------------------------------------------------------


@pytest.fixture
def dead_socket(tmp_path: Path) -> str:
    """A Unix socket file with nothing listening (a service that died)."""
    path = str(tmp_path / "dead.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.close()
    return path


@pytest.fixture
def mute_socket(tmp_path: Path) -> Iterator[str]:
    """A listening socket that accepts and never answers (a hung service)."""
    path = str(tmp_path / "mute.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(16)
    yield path
    server.close()


async def test_no_socket_at_all_is_a_clear_error(tmp_path: Path) -> None:
    runtime = DockerContainerRuntime(ContainerSettings(socket=str(tmp_path / "none.sock")))
    assert not await runtime.available()
    status = await runtime.status()
    assert not status.available
    assert "none.sock" in status.detail
    with pytest.raises(ContainerRuntimeUnavailableError, match=r"none\.sock"):
        await runtime.start(ContainerSpec(image="img"))
    with pytest.raises(ContainerRuntimeUnavailableError):
        await runtime.ensure_image()
    assert runtime.in_use == 0


async def test_a_socket_nobody_listens_on_is_a_clear_error(dead_socket: str) -> None:
    runtime = DockerContainerRuntime(ContainerSettings(socket=dead_socket))
    assert not await runtime.available()
    assert not (await runtime.status()).available
    with pytest.raises(ContainerRuntimeUnavailableError, match="does not answer") as caught:
        await runtime.start(ContainerSpec(image="img"))
    assert "podman system service" in str(caught.value)
    assert runtime.in_use == 0
    with pytest.raises(ContainerRuntimeUnavailableError):
        await runtime.cleanup_orphans()


async def test_a_runtime_that_hangs_is_given_up_on_in_bounded_time(mute_socket: str) -> None:
    runtime = DockerContainerRuntime(ContainerSettings(socket=mute_socket, api_timeout=1.0))
    with pytest.raises(ContainerRuntimeUnavailableError):
        await asyncio.wait_for(runtime.start(ContainerSpec(image="img")), 30)
    assert runtime.in_use == 0
