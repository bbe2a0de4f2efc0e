"""``ContainerRunner``: the ``SandboxRunner`` over a ``ContainerPort``.

It checks mounts against the mount policy (:mod:`jarvis.application.sandbox_mounts`) and
starts the sandbox container running the inner side of the protocol
(``python -I -m jarvis.entrypoints.sandbox_worker``). ``max_concurrent`` is the container
port's own bound (a start waits for a free slot); the image is built on first use, with its
progress reported to ``progress``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from jarvis.application.sandbox_mounts import MountPolicy, load_policy
from jarvis.domain.ports import ContainerPort, ContainerSpec, ImageProgress, Mount
from jarvis.domain.sandbox.runner import MountRequest, SandboxLaunch, SandboxLimits

WORKER_MODULE = "jarvis.entrypoints.sandbox_worker"
IMAGE_PYTHON = "/usr/local/bin/python3"
WORKER_COMMAND = (IMAGE_PYTHON, "-I", "-m", WORKER_MODULE)


class ContainerRunner:
    """Satisfies ``SandboxRunner``. ``image`` "" = the port's own sandbox image."""

    def __init__(
        self,
        containers: ContainerPort,
        *,
        limits: SandboxLimits | None = None,
        mount_allowlist_path: str = "",
        policy: MountPolicy | None = None,
        progress: ImageProgress | None = None,
        command: Sequence[str] = WORKER_COMMAND,
        cwd: str = "",
        protected_paths: Sequence[str] = (),
    ) -> None:
        self.containers = containers
        self.limits = limits or SandboxLimits()
        self.mount_allowlist_path = mount_allowlist_path
        self._policy = policy
        self.progress = progress
        self.command = tuple(command)
        self.cwd = cwd
        self.protected_paths = tuple(os.path.realpath(p) for p in protected_paths)

    @property
    def runtime(self) -> str:
        return self.containers.runtime

    @property
    def policy(self) -> MountPolicy:
        """The mount policy, read from the allowlist file on first use."""
        if self._policy is None:
            policy = load_policy(self.mount_allowlist_path)
            self._policy = replace(policy, protected=(*policy.protected, *self.protected_paths))
        return self._policy

    def check_mounts(self, mounts: Sequence[MountRequest]) -> tuple[Mount, ...]:
        return self.policy.resolve(mounts, cwd=self.cwd)

    async def launch(self, mounts: tuple[Mount, ...], *, run_id: str) -> SandboxLaunch:
        image = await self.containers.ensure_image(self.progress)
        limits = self.limits
        workspace = any(m.target == "/workspace" for m in mounts)
        spec = ContainerSpec(
            image=image,
            command=self.command,
            mounts=mounts,
            memory_mb=limits.memory_mb,
            cpus=limits.cpus,
            pids_limit=limits.pids,
            tmp_mb=limits.tmp_mb,
            timeout=limits.timeout,
            workdir="/workspace" if workspace else "/tmp",
            run_id=run_id,
            labels={"io.jarvis.role": "sandboxed-agent"},
        )
        process = await self.containers.start(spec)
        return SandboxLaunch(
            process=process, mounts=mounts, image=image, runtime=self.runtime, limits=limits
        )
