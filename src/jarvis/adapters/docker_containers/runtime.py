"""``DockerContainerRuntime``: the ``ContainerPort`` over Docker's or Podman's API socket.

The socket is found once, on first use (:mod:`.endpoint`); a runtime that is down at that
moment is looked for again on the next call. ``max_concurrent`` is a :class:`SlotGate`
held by each container from before it is created until after it is removed, so at most
that many exist at once, counted across every event loop using this instance.

The first ``start`` of an instance removes the containers of jarvis processes that are gone
(a jarvis killed with SIGKILL cannot remove its own). An image is run by the ID it had when
it was checked: jarvis's own image only when its content label matches its tag
(:func:`~.build.check_identity`), so a different image put under the tag is refused.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

from jarvis.adapters.docker_containers.api import Attached, DockerApi, Listed
from jarvis.adapters.docker_containers.build import SandboxImage, check_identity
from jarvis.adapters.docker_containers.endpoint import Endpoint, discover
from jarvis.adapters.docker_containers.options import (
    OWNER_LABEL,
    RUN_LABEL,
    ContainerSettings,
    owner_id,
    owner_is_gone,
)
from jarvis.adapters.docker_containers.process import DockerContainerProcess
from jarvis.adapters.docker_containers.slots import SlotGate
from jarvis.domain.errors import ContainerImageError, JarvisError
from jarvis.domain.ports import (
    ContainerRuntimeStatus,
    ContainerSpec,
    ImageProgress,
    OrphanContainer,
)

PING_TIMEOUT = 3.0


class DockerContainerRuntime:
    """Satisfies ``ContainerPort``."""

    def __init__(
        self, settings: ContainerSettings | None = None, *, image: SandboxImage | None = None
    ) -> None:
        self.settings = settings or ContainerSettings()
        self._image = image or SandboxImage()
        self._gate = SlotGate(self.settings.max_concurrent)
        # re-entrant: the container resource's ``finally`` calls close(), and the garbage
        # collector may run it inside _connect() on the same thread
        self._lock = threading.RLock()
        self._api: DockerApi | None = None
        self._owner = owner_id()
        self._image_ready = ""
        self._image_lock = threading.Lock()
        self._pinned: dict[str, str] = {}
        """Image reference -> the ID it had when it was checked (what is run)."""
        self._swept = False
        self._sweep_lock = threading.Lock()

    # --- where ------------------------------------------------------------------------

    def _connect(self) -> DockerApi:
        with self._lock:
            if self._api is None:
                endpoint = discover(self.settings.runtime, self.settings.socket)
                self._api = DockerApi(endpoint, self.settings)
            return self._api

    @property
    def endpoint(self) -> Endpoint | None:
        """The endpoint in use, once one was found."""
        api = self._api
        return None if api is None else api.endpoint

    @property
    def runtime(self) -> str:
        api = self._api
        if api is not None:
            return api.endpoint.runtime
        if self.settings.runtime != "auto":
            return self.settings.runtime
        try:
            return self._connect().endpoint.runtime
        except JarvisError:
            return "auto"

    @property
    def in_use(self) -> int:
        """Containers that exist now (or are being created) through this instance."""
        return self._gate.in_use

    async def available(self) -> bool:
        try:
            api = self._connect()
        except JarvisError:
            return False
        return await asyncio.to_thread(api.ping, PING_TIMEOUT)

    async def status(self) -> ContainerRuntimeStatus:
        try:
            api = self._connect()
        except JarvisError as exc:
            return ContainerRuntimeStatus(
                runtime=self.settings.runtime, endpoint="", available=False, detail=str(exc)
            )
        url = api.endpoint.url
        try:
            runtime, version = await asyncio.to_thread(api.version)
            image = self.settings.image or await asyncio.to_thread(self._image.reference)
            present = await asyncio.to_thread(api.image_exists, image)
        except JarvisError as exc:
            return ContainerRuntimeStatus(
                runtime=api.endpoint.runtime, endpoint=url, available=False, detail=str(exc)
            )
        return ContainerRuntimeStatus(
            runtime=runtime,
            endpoint=url,
            available=True,
            version=version,
            image=image,
            image_present=present,
        )

    # --- the image ---------------------------------------------------------------------

    async def ensure_image(self, progress: ImageProgress | None = None) -> str:
        return await asyncio.to_thread(self._ensure_image, progress)

    def _ensure_image(self, progress: ImageProgress | None) -> str:
        api = self._connect()
        with self._image_lock:  # one build at a time, and only one per process
            if self._image_ready:
                return self._image_ready
            if self.settings.image:
                if not api.image_exists(self.settings.image):
                    raise ContainerImageError(
                        f"The configured sandbox image {self.settings.image} does not exist.",
                        image=self.settings.image,
                        hint="Build or load it, or leave [sandbox] image empty for jarvis's own.",
                    )
                self._pin(api, self.settings.image)
                self._image_ready = self.settings.image
                return self._image_ready
            reference = self._image.reference()
            if not api.image_exists(reference):
                self._image.build(api, progress or (lambda _line: None))
            self._pin(api, reference)
            self._image_ready = reference
            return reference

    def _pin(self, api: DockerApi, image: str) -> str:
        """Check ``image`` and remember the ID it has now: that ID is what runs."""
        found = api.image_identity(image)
        if found is None:
            raise ContainerImageError(
                f"The image {image} does not exist in {api.endpoint.runtime}.",
                image=image,
                hint="Build it with `jarvis sandbox build`, or name another image.",
            )
        image_id, labels = found
        check_identity(image, labels, api.endpoint.runtime)
        self._pinned[image] = image_id or image
        return self._pinned[image]

    # --- containers --------------------------------------------------------------------

    async def start(self, spec: ContainerSpec) -> DockerContainerProcess:
        api = self._connect()
        timeout = spec.timeout if spec.timeout is not None else self.settings.default_timeout
        if not self._swept:
            await asyncio.to_thread(self._sweep, api)
        pinned = self._pinned.get(spec.image, "")
        if not pinned:
            pinned = await asyncio.to_thread(self._pin, api, spec.image)
        spec = replace(spec, image=pinned)
        await self._gate.acquire()
        launch = asyncio.ensure_future(asyncio.to_thread(api.launch, spec, self._owner))
        try:
            container_id, attached = await asyncio.shield(launch)
        except asyncio.CancelledError:
            launch.add_done_callback(lambda done: self._abandon(api, done))
            raise
        except BaseException:
            self._gate.release()
            raise
        return DockerContainerProcess(
            api=api,
            container_id=container_id,
            attached=attached,
            settings=self.settings,
            gate=self._gate,
            timeout=timeout,
        )

    def _abandon(self, api: DockerApi, launch: asyncio.Future[tuple[str, Attached]]) -> None:
        """A start cancelled while the API call ran: remove what it made, free its slot."""
        if launch.cancelled() or launch.exception() is not None:
            self._gate.release()
            return
        container_id, attached = launch.result()

        def remove() -> None:
            try:
                attached.sock.close()
                api.remove(container_id)
            finally:
                self._gate.release()

        threading.Thread(target=remove, name="jarvis-container-remove", daemon=True).start()

    async def cleanup_orphans(self) -> int:
        api = self._connect()
        found = await asyncio.to_thread(api.list_ours)
        gone = [c for c in found if owner_is_gone(c.labels.get(OWNER_LABEL, ""), self._owner)]
        removed = await asyncio.gather(*(asyncio.to_thread(api.remove, c.id) for c in gone))
        return sum(removed)

    def _orphans(self, api: DockerApi) -> list[Listed]:
        """Containers of gone jarvis processes, never this one's."""
        found = api.list_ours()
        return [
            c
            for c in found
            if c.labels.get(OWNER_LABEL, "") != self._owner
            and owner_is_gone(c.labels.get(OWNER_LABEL, ""), self._owner)
        ]

    def _sweep(self, api: DockerApi) -> None:
        """Once per instance, before its first container: remove the orphans."""
        with self._sweep_lock:
            if self._swept:
                return
            for container in self._orphans(api):
                api.remove(container.id)
            self._swept = True

    async def orphans(self, *, remove: bool) -> list[OrphanContainer]:
        api = self._connect()
        found = await asyncio.to_thread(self._orphans, api)
        removed = (
            await asyncio.gather(*(asyncio.to_thread(api.remove, c.id) for c in found))
            if remove
            else [False] * len(found)
        )
        return [
            OrphanContainer(
                id=c.id,
                name=c.name,
                state=c.state,
                owner=c.labels.get(OWNER_LABEL, ""),
                run=c.labels.get(RUN_LABEL, ""),
                removed=done,
            )
            for c, done in zip(found, removed, strict=True)
        ]

    def close(self) -> None:
        """Close the API client (containers are not touched)."""
        with self._lock:
            if self._api is not None:
                self._api.close()
                self._api = None
