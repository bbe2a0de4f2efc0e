"""The ports: what the domain needs from the outside world, as typed Protocols.

Each method's docstring is the specification that the in-memory fakes in
:mod:`jarvis.testing` and every real adapter must meet; ``contracts/`` holds the shared test
suites that check it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from jarvis.domain.agent import MemoryHit
from jarvis.domain.completion import Completion, StreamChunk
from jarvis.domain.inference import InferenceRequest
from jarvis.domain.json_types import JSONObject
from jarvis.domain.messages import Message
from jarvis.domain.tools import ToolResult, ToolSpec


class InferencePort(Protocol):
    """An inference engine (Ollama, vLLM, an OpenAI-compatible server, an embedded model)."""

    @property
    def engine_id(self) -> str:
        """Short name of the engine kind: ``ollama``, ``vllm``, ``openai``, ``llamacpp``..."""
        ...

    @property
    def base_url(self) -> str:
        """Where the engine is reached ("" for an in-process engine); used in messages."""
        ...

    async def generate(self, request: InferenceRequest) -> Completion:
        """Run one generation to the end.

        Raises a subclass of :class:`~jarvis.domain.errors.InferenceError`:
        ``EngineUnavailableError`` when the engine cannot be reached (after bounded retries),
        ``ModelNotFoundError`` (listing the available models), ``ContextTooLongError``,
        ``ToolsNotSupportedError`` when tools were offered to a model that cannot take them,
        ``EngineProtocolError`` when the answer cannot be understood.
        """
        ...

    def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        """Stream one generation: content chunks, then exactly one final chunk.

        The final chunk has ``finish_reason`` set and carries every tool call, assembled
        and complete, plus the usage when the engine reports it. Raises the same errors as
        :meth:`generate`, before the first chunk when the request is refused.
        """
        ...

    async def list_models(self) -> list[str]:
        """The model names the engine can serve."""
        ...

    async def health(self) -> bool:
        """True when the engine answers; never raises."""
        ...

    async def aclose(self) -> None:
        """Release connections and processes. Idempotent."""
        ...


class ToolPort(Protocol):
    """A tool the model may call."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description, JSON-Schema parameters, category, timeout, side effects."""
        ...

    async def execute(self, arguments: JSONObject) -> ToolResult:
        """Run the tool with arguments already validated against ``spec.parameters``.

        Expected failures are returned as ``ToolResult(success=False)``; an exception is
        turned into one by the executor.
        """
        ...


# --- persona -----------------------------------------------------------------------------


class PersonaFile(StrEnum):
    """The three persona files, in the order they enter the system prompt."""

    SOUL = "soul"
    MEMORY = "memory"
    USER = "user"


@dataclass(frozen=True, slots=True, kw_only=True)
class PersonaDocument:
    """The text of one persona file as read at the start of a conversation."""

    kind: PersonaFile
    text: str
    source: str
    warnings: tuple[str, ...] = ()


class PersonaStorePort(Protocol):
    """Where SOUL.md, MEMORY.md and USER.md live (the default set and named personas)."""

    def load(self, persona: str | None) -> tuple[PersonaDocument, ...]:
        """Read the persona's files now (no cache), skipping missing or empty ones.

        ``None`` means the default files. A name selects ``personas/<name>/``; a name that
        does not exist or tries to escape the personas folder raises ``PersonaError``.
        """
        ...

    def names(self) -> list[str]:
        """The named personas that exist."""
        ...

    def edit(self, kind: PersonaFile, change: Callable[[str], str]) -> str:
        """Atomically replace the default ``kind`` file with ``change(current_text)``.

        Writers are serialised (a lock) and the write is atomic (temp file + rename), so
        concurrent editors never lose an entry or see a torn file. Returns the new text.
        Named personas are never edited through this method.
        """
        ...


# --- sessions and memory ------------------------------------------------------------------


class SessionStorePort(Protocol):
    """Conversation history by session id (managed agents, operatives)."""

    async def load(self, session_id: str, *, limit: int | None = None) -> tuple[Message, ...]:
        """The session's messages, oldest first (the newest ``limit`` when given)."""
        ...

    async def append(self, session_id: str, messages: Sequence[Message]) -> None:
        """Add messages at the end of the session, creating it when needed."""
        ...

    async def sessions(self) -> list[str]:
        """The ids of every stored session."""
        ...

    async def delete(self, session_id: str) -> None:
        """Forget a session; deleting an unknown id is not an error."""
        ...


class MemoryPort(Protocol):
    """A searchable memory backend (retrieval)."""

    async def store(
        self, content: str, *, source: str = "", metadata: JSONObject | None = None
    ) -> str:
        """Index ``content`` and return its id."""
        ...

    async def search(self, query: str, *, top_k: int = 5) -> list[MemoryHit]:
        """The best ``top_k`` hits for ``query``, best first; no hit is an empty list."""
        ...


# --- containers ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Mount:
    source: str
    target: str
    read_only: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerSpec:
    """How to start one sandbox container. The network is off unless asked for."""

    image: str
    command: tuple[str, ...] = ()
    mounts: tuple[Mount, ...] = ()
    network: bool = False
    memory_mb: int = 512
    cpus: float = 1.0
    pids_limit: int = 128
    workdir: str = ""
    labels: dict[str, str] = field(default_factory=dict)


class ContainerProcess(Protocol):
    """A running container spoken to line by line over its stdio."""

    async def send(self, line: str) -> None:
        """Write one line to the container's stdin."""
        ...

    async def receive(self) -> str | None:
        """The next line of its stdout, or ``None`` at end of stream."""
        ...

    async def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit code; on timeout the container is force-removed."""
        ...

    async def kill(self) -> None:
        """Force-remove the container. Idempotent."""
        ...


class ContainerPort(Protocol):
    """A container runtime (Docker or Podman)."""

    @property
    def runtime(self) -> str:
        """``docker`` or ``podman``."""
        ...

    async def available(self) -> bool:
        """True when the runtime answers; never raises."""
        ...

    async def start(self, spec: ContainerSpec) -> ContainerProcess:
        """Start a labelled container with ``--rm`` and return its process handle."""
        ...

    async def cleanup_orphans(self) -> int:
        """Remove every container labelled as ours; returns how many were removed."""
        ...
