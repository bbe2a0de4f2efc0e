"""The ``ContainerPort`` over the Docker-compatible API of Docker or Podman (docker SDK).

``DockerContainerRuntime`` starts sandbox containers; ``SandboxImage`` builds the image they
run from what is installed on this machine. The ``docker`` SDK is imported only when a
runtime is first used.
"""

from jarvis.adapters.docker_containers.build import SandboxImage
from jarvis.adapters.docker_containers.endpoint import Endpoint, discover
from jarvis.adapters.docker_containers.options import ContainerSettings
from jarvis.adapters.docker_containers.runtime import DockerContainerRuntime

__all__ = ["ContainerSettings", "DockerContainerRuntime", "Endpoint", "SandboxImage", "discover"]
