"""The ports: what the domain needs from the outside world, as typed Protocols.

Each method's docstring is the specification that the in-memory fakes in
:mod:`jarvis.testing` and every real adapter must meet; ``contracts/`` holds the shared test
suites that check it. One module per port (and the values it takes and returns); every port
is imported from here. A port's module is loaded when its name is first asked for, so a
command loads only the ports it uses (start-up of ``jarvis ask``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jarvis.domain.ports.containers import (
        ContainerExit,
        ContainerExitReason,
        ContainerPort,
        ContainerProcess,
        ContainerRuntimeStatus,
        ContainerSpec,
        ImageProgress,
        Mount,
        OrphanContainer,
    )
    from jarvis.domain.ports.inference import EmbeddingPort, InferencePort
    from jarvis.domain.ports.knowledge import DocumentReaderPort, KnowledgeStorePort
    from jarvis.domain.ports.memory import MemoryPort
    from jarvis.domain.ports.operators import OperatorStorePort
    from jarvis.domain.ports.persona import PersonaDocument, PersonaFile, PersonaStorePort
    from jarvis.domain.ports.repl import ReplPort, ReplSession
    from jarvis.domain.ports.sessions import SessionStorePort
    from jarvis.domain.ports.tools import ToolPort
    from jarvis.domain.ports.traces import TraceExportPort, TraceStorePort

_MODULE_OF: dict[str, str] = {
    "InferencePort": "inference",
    "EmbeddingPort": "inference",
    "ToolPort": "tools",
    "PersonaFile": "persona",
    "PersonaDocument": "persona",
    "PersonaStorePort": "persona",
    "SessionStorePort": "sessions",
    "MemoryPort": "memory",
    "KnowledgeStorePort": "knowledge",
    "DocumentReaderPort": "knowledge",
    "OperatorStorePort": "operators",
    "Mount": "containers",
    "ContainerSpec": "containers",
    "ContainerExitReason": "containers",
    "ContainerExit": "containers",
    "ContainerRuntimeStatus": "containers",
    "OrphanContainer": "containers",
    "ImageProgress": "containers",
    "ContainerProcess": "containers",
    "ContainerPort": "containers",
    "ReplSession": "repl",
    "ReplPort": "repl",
    "TraceStorePort": "traces",
    "TraceExportPort": "traces",
}
"""The module under :mod:`jarvis.domain.ports` that defines each port."""

__all__ = [
    "ContainerExit",
    "ContainerExitReason",
    "ContainerPort",
    "ContainerProcess",
    "ContainerRuntimeStatus",
    "ContainerSpec",
    "DocumentReaderPort",
    "EmbeddingPort",
    "ImageProgress",
    "InferencePort",
    "KnowledgeStorePort",
    "MemoryPort",
    "Mount",
    "OperatorStorePort",
    "OrphanContainer",
    "PersonaDocument",
    "PersonaFile",
    "PersonaStorePort",
    "ReplPort",
    "ReplSession",
    "SessionStorePort",
    "ToolPort",
    "TraceExportPort",
    "TraceStorePort",
]


def __getattr__(name: str) -> object:
    """The port ``name``, from its module (imported on first use)."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value: object = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
