"""In-memory fakes of every port, shipped for the tests of applications that embed jarvis.

Each fake passes the same contract suite (``contracts/``) as the real adapters, so a test
written against a fake keeps meaning something against the real thing.
"""

from jarvis.testing.approvals import InMemoryApprovalStore, ScriptedApprovals
from jarvis.testing.containers import InMemoryContainerRuntime
from jarvis.testing.external_runtimes import (
    InMemoryExternalRuntime,
    InMemoryExternalRuntimes,
    InMemoryWorkspaceHost,
)
from jarvis.testing.inference import ScriptedInference
from jarvis.testing.knowledge import InMemoryDocuments, InMemoryKnowledgeStore
from jarvis.testing.memory import InMemoryMemory
from jarvis.testing.persona import InMemoryPersonaStore
from jarvis.testing.repl import InMemoryRepl
from jarvis.testing.sessions import InMemorySessionStore
from jarvis.testing.tools import InMemoryTool
from jarvis.testing.traces import InMemoryTraceExporter, InMemoryTraceStore

__all__ = [
    "InMemoryApprovalStore",
    "InMemoryContainerRuntime",
    "InMemoryDocuments",
    "InMemoryExternalRuntime",
    "InMemoryExternalRuntimes",
    "InMemoryKnowledgeStore",
    "InMemoryMemory",
    "InMemoryPersonaStore",
    "InMemoryRepl",
    "InMemorySessionStore",
    "InMemoryTool",
    "InMemoryTraceExporter",
    "InMemoryTraceStore",
    "InMemoryWorkspaceHost",
    "ScriptedApprovals",
    "ScriptedInference",
]
