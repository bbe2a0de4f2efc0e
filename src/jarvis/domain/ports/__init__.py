"""The ports: what the domain needs from the outside world, as typed Protocols.

Each method's docstring is the specification that the in-memory fakes in
:mod:`jarvis.testing` and every real adapter must meet; ``contracts/`` holds the shared test
suites that check it. One module per port (and the values it takes and returns); every port
is imported from here.
"""

from __future__ import annotations

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
from jarvis.domain.ports.memory import MemoryPort
from jarvis.domain.ports.operators import OperatorStorePort
from jarvis.domain.ports.persona import PersonaDocument, PersonaFile, PersonaStorePort
from jarvis.domain.ports.repl import ReplPort, ReplSession
from jarvis.domain.ports.sessions import SessionStorePort
from jarvis.domain.ports.tools import ToolPort
from jarvis.domain.ports.traces import TraceExportPort, TraceStorePort

__all__ = [
    "ContainerExit",
    "ContainerExitReason",
    "ContainerPort",
    "ContainerProcess",
    "ContainerRuntimeStatus",
    "ContainerSpec",
    "EmbeddingPort",
    "ImageProgress",
    "InferencePort",
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
