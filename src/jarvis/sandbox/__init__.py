"""``from jarvis.sandbox import ContainerRunner, SandboxedAgent`` (see
:mod:`jarvis.compat.sandbox`)."""

from jarvis.compat.sandbox import ContainerRunner, SandboxedAgent

__all__ = ["ContainerRunner", "SandboxedAgent"]
