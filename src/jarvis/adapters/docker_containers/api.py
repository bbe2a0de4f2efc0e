"""The blocking calls to the Docker-compatible API, with its errors turned into ours.

The one module that imports the ``docker`` SDK, and only when a client is first needed, so
importing jarvis never loads it.
``version="1.41"`` is fixed: without it every client spends 0.5 s asking ``/version``.
Every method blocks; the async adapter calls them from worker threads.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from jarvis.adapters.docker_containers.endpoint import START_HINT, Endpoint
from jarvis.adapters.docker_containers.mount_check import verify_bound, verify_sources
from jarvis.adapters.docker_containers.options import (
    MANAGED_LABEL,
    ContainerSettings,
    create_options,
    host_config_options,
    ulimit_values,
)
from jarvis.domain.cut_text import masked_prefix
from jarvis.domain.errors import (
    ContainerImageError,
    ContainerRuntimeUnavailableError,
    JarvisError,
    SandboxError,
)
from jarvis.domain.ports import ContainerSpec

API_VERSION = "1.41"
IMAGE_HINT = "Build it with `jarvis sandbox build` (no registry is needed), or name another image."
# The attach stream's detach sequence: two NUL bytes, which no line sent can contain (the
# default, ctrl-p ctrl-q, could appear in text and would cut the container's stdin off).
DETACH_KEYS = "ctrl-@,ctrl-@"


@dataclass(frozen=True, slots=True)
class Attached:
    """A container's attach connection: the raw socket and what keeps it open."""

    sock: socket.socket
    keep: object


@dataclass(frozen=True, slots=True)
class Listed:
    id: str
    labels: dict[str, str]
    state: str
    name: str = ""


def is_not_found(exc: BaseException) -> bool:
    return getattr(getattr(exc, "response", None), "status_code", None) == 404


def _connection_failure(exc: BaseException) -> bool:
    """Cannot connect, or no answer in time (requests' errors are ``OSError`` too)."""
    return isinstance(exc, OSError)


class DockerApi:
    """One SDK client per endpoint, created on first use (thread-safe)."""

    def __init__(self, endpoint: Endpoint, settings: ContainerSettings) -> None:
        self.endpoint = endpoint
        self._settings = settings
        self._lock = threading.Lock()
        self._client: Any = None

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._new_client(self._settings.api_timeout)
            return self._client

    def _new_client(self, timeout: float) -> Any:
        try:
            import docker
        except ImportError as exc:  # pragma: no cover - a dependency of jarvis
            raise SandboxError(
                "The docker SDK is not installed.", hint="pip install 'docker>=7'"
            ) from exc
        try:
            return docker.DockerClient(
                base_url=self.endpoint.url,
                version=API_VERSION,
                timeout=timeout,
                max_pool_size=self._settings.max_concurrent * 2 + 4,
            )
        except docker.errors.DockerException as exc:
            raise ContainerRuntimeUnavailableError(
                f"Cannot use the container endpoint {self.endpoint.url}: {exc}",
                endpoint=self.endpoint.url,
                hint=START_HINT,
            ) from exc

    @contextlib.contextmanager
    def _errors(self, image: str = "") -> Iterator[None]:
        """API failures as jarvis errors: unreachable, image missing, anything else."""
        import docker

        try:
            yield
        except docker.errors.ImageNotFound as exc:
            raise ContainerImageError(
                f"The image {image or '?'} does not exist in {self.endpoint.runtime}.",
                image=image,
                hint=IMAGE_HINT,
            ) from exc
        except docker.errors.APIError as exc:
            explanation = str(getattr(exc, "explanation", "") or exc)[:2000]
            if is_not_found(exc) and image and "image" in explanation.lower():
                raise ContainerImageError(
                    f"The image {image} does not exist in {self.endpoint.runtime}.",
                    image=image,
                    hint=IMAGE_HINT,
                ) from exc
            raise SandboxError(f"The container runtime refused: {explanation}") from exc
        except Exception as exc:
            if isinstance(exc, JarvisError) or not _connection_failure(exc):
                raise
            raise ContainerRuntimeUnavailableError(
                f"The container runtime at {self.endpoint.url} does not answer "
                f"({type(exc).__name__}).",
                endpoint=self.endpoint.url,
                hint=START_HINT,
            ) from exc

    # --- questions ---------------------------------------------------------------------

    def ping(self, timeout: float) -> bool:
        """Never raises: False when it does not answer within ``timeout``."""
        try:
            client = self._new_client(timeout)
            try:
                return bool(client.api.ping())
            finally:
                client.close()
        except Exception:
            return False

    def version(self) -> tuple[str, str]:
        """(runtime name, version): ``podman`` when the engine says so."""
        with self._errors():
            info = cast("dict[str, Any]", self.client.version())
        names = " ".join(str(c.get("Name", "")) for c in info.get("Components") or [])
        runtime = "podman" if "podman" in names.lower() else "docker"
        return runtime, str(info.get("Version", ""))

    def image_exists(self, image: str) -> bool:
        import docker

        with self._errors():
            try:
                self.client.api.inspect_image(image)
            except docker.errors.ImageNotFound:
                return False
            except docker.errors.APIError as exc:
                if is_not_found(exc):
                    return False
                raise
        return True

    def image_identity(self, image: str) -> tuple[str, dict[str, str]] | None:
        """(image ID, labels) of ``image``, or ``None`` when it does not exist."""
        import docker

        with self._errors():
            try:
                info = cast("dict[str, Any]", self.client.api.inspect_image(image))
            except docker.errors.ImageNotFound:
                return None
            except docker.errors.APIError as exc:
                if is_not_found(exc):
                    return None
                raise
        config = cast("dict[str, Any]", info.get("Config") or {})
        labels = {str(k): str(v) for k, v in (config.get("Labels") or {}).items()}
        return str(info.get("Id", "")), labels

    def list_ours(self) -> list[Listed]:
        with self._errors():
            found = self.client.api.containers(all=True, filters={"label": f"{MANAGED_LABEL}=1"})
        return [
            Listed(
                str(c["Id"]),
                dict(c.get("Labels") or {}),
                str(c.get("State", "")),
                str((c.get("Names") or [""])[0]).lstrip("/"),
            )
            for c in cast("list[dict[str, Any]]", found)
        ]

    def state(self, container_id: str) -> tuple[bool, int] | None:
        """(running, exit code), or ``None`` when the container is gone."""
        import docker

        with self._errors():
            try:
                info = self.client.api.inspect_container(container_id)
            except docker.errors.NotFound:
                return None
        state = cast("dict[str, Any]", info.get("State") or {})
        return bool(state.get("Running")), int(state.get("ExitCode") or 0)

    # --- actions -----------------------------------------------------------------------

    def launch(self, spec: ContainerSpec, owner: str) -> tuple[str, Attached]:
        """Create, attach (before start: no output can be missed) and start a container.

        A container that fails on the way is removed here, so no ``created`` leftover
        remains of a failed start. The mounts are verified before it is created and once
        it runs (:mod:`.mount_check`): a swapped folder removes it."""
        from docker.types import LogConfig, Ulimit

        api = self.client.api
        options = create_options(spec, owner)
        host = host_config_options(spec, self._settings)
        verify_sources(spec.mounts)
        with self._errors(spec.image):
            host_config = api.create_host_config(
                **host,
                ulimits=[Ulimit(name=n, soft=v, hard=v) for n, v in ulimit_values(self._settings)],
                log_config=LogConfig(type="none"),
            )
            created = api.create_container(**options, host_config=host_config)
        container_id = str(created["Id"])
        try:
            with self._errors(spec.image):
                raw = api.attach_socket(
                    container_id,
                    params={
                        "stdin": 1,
                        "stdout": 1,
                        "stderr": 1,
                        "stream": 1,
                        "detachKeys": DETACH_KEYS,
                    },
                )
                attached = Attached(cast("socket.socket", getattr(raw, "_sock", raw)), raw)
                try:
                    api.start(container_id)
                    if any(m.inode for m in spec.mounts):
                        info = api.inspect_container(container_id)
                        verify_bound(int((info.get("State") or {}).get("Pid") or 0), spec.mounts)
                except BaseException:
                    attached.sock.close()
                    raise
        except BaseException:
            self.remove(container_id)
            raise
        return container_id, attached

    def remove(self, container_id: str) -> bool:
        """Force-remove (kill first); False when it was already gone. Never raises."""
        import docker

        try:
            self.client.api.remove_container(container_id, force=True, v=True)
            return True
        except docker.errors.NotFound:
            return False
        except Exception:
            # a removal already in progress (409) or a runtime gone: try once more later
            time.sleep(0.2)
            try:
                self.client.api.remove_container(container_id, force=True, v=True)
                return True
            except Exception:
                return False

    def build(
        self,
        context: Any,
        tag: str,
        labels: dict[str, str],
        say: Callable[[str], None],
    ) -> None:
        """Build ``tag`` from a tar ``context`` (its Dockerfile at the top), no network."""
        with self._errors(tag):
            stream = self.client.api.build(
                fileobj=context,
                custom_context=True,
                tag=tag,
                labels=labels,
                rm=True,
                forcerm=True,
                pull=False,
                network_mode="none",
                decode=True,
            )
            failure = ""
            for event in stream:
                if not isinstance(event, dict):
                    continue
                text = str(event.get("stream") or event.get("status") or "").strip()
                if text:
                    say(masked_prefix(text, 500))
                if event.get("error"):
                    failure = masked_prefix(str(event["error"]), 2000)
        if failure:
            raise ContainerImageError(f"Building the sandbox image failed: {failure}", image=tag)
        if not self.image_exists(tag):
            raise ContainerImageError(
                f"The build of {tag} reported no error but left no image.", image=tag
            )

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                with contextlib.suppress(Exception):
                    self._client.close()
                self._client = None
