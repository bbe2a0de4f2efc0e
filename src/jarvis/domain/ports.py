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

from jarvis.domain.agent_contract import MemoryHit
from jarvis.domain.completion import Completion, StreamChunk
from jarvis.domain.inference import InferenceRequest
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.knowledge import (
    Chunk,
    DocumentBatch,
    KnowledgeStats,
    RawDocument,
    SourceInfo,
)
from jarvis.domain.messages import Message
from jarvis.domain.repl import ExecutionResult, ReplCallbacks, ReplIsolation, ReplLimits
from jarvis.domain.sessions import PAGE_SIZE, SessionInfo, SessionMessage, SessionPage
from jarvis.domain.tools import ToolResult, ToolSpec
from jarvis.domain.traces import Trace, TraceQuery


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
    """The text of one persona file as read at the start of a conversation.

    A file that was refused (binary, a symlink leading out of its folder, not a regular
    file) is reported with empty ``text`` and a warning saying why, so the user can be told.
    A file too large to read whole is read at its two ends only: ``text`` is its beginning
    followed by its end, ``omitted_at`` is the index in ``text`` where the unread middle
    was, and ``omitted_bytes`` how many bytes of the file were not read (0 = read whole).
    """

    kind: PersonaFile
    text: str
    source: str
    warnings: tuple[str, ...] = ()
    omitted_bytes: int = 0
    omitted_at: int = 0


class PersonaStorePort(Protocol):
    """Where SOUL.md, MEMORY.md and USER.md live (the default set and named personas)."""

    def load(self, persona: str | None) -> tuple[PersonaDocument, ...]:
        """Read the persona's files now (no cache), in SOUL, MEMORY, USER order.

        ``None`` means the default files. A name selects ``personas/<name>/``; a name that
        is empty, contains ``/``, ``\\`` or ``..``, or has no folder raises ``PersonaError``
        whose hint lists the existing personas. Missing files and files that are empty (or
        only whitespace) are left out. Undecodable bytes are replaced and warned about;
        refused files come back with empty text and a warning. Never raises for the
        content of a file.
        """
        ...

    def names(self) -> list[str]:
        """The named personas that exist, sorted."""
        ...

    def location(self, kind: PersonaFile, persona: str | None = None) -> str:
        """Where the ``kind`` file of the default set (or of persona ``persona``) lives,
        whether or not it exists. Raises ``PersonaError`` like :meth:`load` for a bad name.
        """
        ...

    def ensure(self, kind: PersonaFile) -> str:
        """Create the default ``kind`` file, empty, unless it exists; return its location.

        Raises ``PersonaError`` naming the place when it cannot be created.
        """
        ...

    def edit(self, kind: PersonaFile, change: Callable[[str], str]) -> str:
        """Atomically replace the default ``kind`` file with ``change(current_text)``.

        Writers are serialised (a lock that also holds across processes) and the write is
        atomic (temp file + fsync + rename), so concurrent editors never lose an entry or
        see a torn file. ``change`` sees the whole current text ("" when the file is
        missing); returning it unchanged writes nothing, and an exception from ``change``
        propagates with nothing written. Returns the resulting text.

        Raises ``PersonaError``, with every file left as it was, when the file cannot be
        edited safely: the place is not writable, the file is binary, not UTF-8, too large
        to rewrite whole, or a symlink leading out of its folder. Named personas are never
        edited through this method.
        """
        ...


# --- sessions and memory ------------------------------------------------------------------


class SessionStorePort(Protocol):
    """Conversation history by session id (conversations, managed agents, operatives).

    Every method raises :class:`~jarvis.domain.sessions.SessionStoreError` (never a driver
    exception) when the store fails: ``SessionStoreUnavailableError`` when it cannot be
    reached or stayed locked, ``SessionStoreCorruptError`` when its data is damaged. A
    failed call changes nothing. An invalid session id is a ``ConfigurationError``.
    """

    async def load(self, session_id: str, *, limit: int | None = None) -> tuple[Message, ...]:
        """The session's messages, oldest first (the newest ``limit`` when given)."""
        ...

    async def append(self, session_id: str, messages: Sequence[Message]) -> None:
        """Add messages at the end of the session, creating it when needed (stamped now)."""
        ...

    async def load_records(
        self, session_id: str, *, limit: int | None = None
    ) -> tuple[SessionMessage, ...]:
        """Like :meth:`load`, with each message's model, usage and time."""
        ...

    def iter_records(
        self, session_id: str, *, page_size: int = PAGE_SIZE
    ) -> AsyncIterator[SessionMessage]:
        """Every message of the session, oldest first, read from the store ``page_size`` at
        a time: what a reader of a long session (``jarvis sessions show/export``) holds is
        one page, not the session. An unknown session yields nothing; messages appended
        meanwhile may or may not be included, none twice or out of order."""
        ...

    async def load_page(
        self, session_id: str, *, limit: int, before: int | None = None
    ) -> SessionPage:
        """The newest ``limit`` (at least 1) messages whose position in the session is below
        ``before`` (every message when ``None``), oldest first, with the position of the
        first of them (see :class:`~jarvis.domain.sessions.SessionPage`): a reader walks a
        long session backwards, newest page first, holding one page at a time. An unknown
        session, or ``before=0``, is an empty page."""
        ...

    async def append_records(self, session_id: str, records: Sequence[SessionMessage]) -> None:
        """Add ``records`` at the end of the session as one unit: all of them or none.

        Concurrent appends (other tasks, processes, machines) never interleave inside one
        call and never lose a message; a crash during the call loses at most this call.
        """
        ...

    async def sessions(self) -> list[str]:
        """The ids of every stored session, sorted."""
        ...

    async def list_sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        """Every session (the ``limit`` most recent), most recently appended to first."""
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


class KnowledgeStorePort(Protocol):
    """The user's knowledge base: sources cut into chunks, searchable by words (bm25) and by
    meaning (stored sentence vectors). Every method raises
    :class:`~jarvis.domain.knowledge.MemoryStoreDamagedError` when the store cannot be read,
    and changes nothing then."""

    async def fingerprint(self, source: str) -> str | None:
        """The fingerprint ``source`` was indexed with; ``None`` when it is not indexed."""
        ...

    async def replace_source(
        self,
        info: SourceInfo,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]] | None,
    ) -> None:
        """Make ``chunks`` (with ``vectors``, one per chunk, or none) the only chunks of
        ``info.source``, in one transaction: a reader sees the old chunks or the new."""
        ...

    async def remove_source(self, source: str) -> bool:
        """Forget ``source`` and its chunks; ``False`` when it was not indexed."""
        ...

    async def sources(self) -> list[SourceInfo]:
        """Every indexed source, sorted by name."""
        ...

    async def stats(self) -> KnowledgeStats:
        """How much is indexed."""
        ...

    async def keyword_search(self, query: str, *, top_k: int) -> list[MemoryHit]:
        """Chunks sharing words with ``query`` (query syntax is plain text), best first."""
        ...

    async def vector_search(self, vector: Sequence[float], *, top_k: int) -> list[MemoryHit]:
        """The chunks whose vectors are nearest ``vector`` (cosine), best first."""
        ...


class DocumentReaderPort(Protocol):
    """Reads what the user asks to add to the knowledge base, under the same rules as the
    ``file_read`` tool: no secret files, no symbolic links, regular files with one name,
    bounded in size; binary files are refused."""

    def collect(self, paths: Sequence[str], *, pattern: str, recursive: bool) -> DocumentBatch:
        """The documents at ``paths`` (files, or folders: their files matching ``pattern``,
        below too when ``recursive``), and what was refused with why."""
        ...

    def read(self, source: str) -> RawDocument | None:
        """``source`` (an absolute path) read again; ``None`` when it no longer exists.
        Raises :class:`~jarvis.domain.knowledge.DocumentError` when it is refused."""
        ...


class OperatorStorePort(Protocol):
    """What operators keep between ticks, shared by every process on the store's database:
    JSON values by key (``operator:<id>:state``...) and leases, for schedulers on several
    machines that must run each tick exactly once.

    Every method raises :class:`~jarvis.domain.sessions.SessionStoreError` (never a driver
    exception) when the store fails, and changes nothing then; an invalid key is a
    ``ConfigurationError``. Lease times are the store's own clock (the database server's,
    for a shared one), so the clocks of the machines that share it need not agree.
    """

    async def get_state(self, key: str) -> JSONValue | None:
        """The value stored under ``key``, or ``None`` when there is none."""
        ...

    async def put_state(self, key: str, value: JSONValue) -> None:
        """Store ``value`` under ``key`` in one atomic write (readers see the old value or
        the new one, never a mix); last writer wins. Refuses a value over
        :data:`~jarvis.domain.operators.MAX_STATE_BYTES` or with a non-finite number."""
        ...

    async def delete_state(self, prefix: str) -> int:
        """Forget every key that starts with ``prefix`` (at least 3 characters); how many."""
        ...

    async def state_keys(self, prefix: str) -> list[str]:
        """The keys that start with ``prefix``, sorted (byte order)."""
        ...

    async def acquire_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        """Take lease ``name`` for ``holder`` until ``ttl_seconds`` from now: ``True`` when
        it was free, expired, or already ``holder``'s (then it is extended); ``False`` when
        another holder has it. Atomic across processes and machines."""
        ...

    async def renew_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        """Extend ``holder``'s lease to ``ttl_seconds`` from now; ``False`` when it is not
        (or no longer) ``holder``'s."""
        ...

    async def release_lease(self, name: str, holder: str) -> None:
        """Give the lease up if ``holder`` has it (another holder's is left alone)."""
        ...

    async def claim_tick(
        self, operator_id: str, tick_us: int, holder: str, ttl_seconds: float
    ) -> bool:
        """Claim the tick of ``operator_id`` scheduled at ``tick_us`` (microseconds since the
        epoch): ``True`` for exactly one claimant while the tick is neither completed nor
        held; a claim not completed within its ttl (the claimant died) can be taken again.
        Renew it with :meth:`renew_lease` on :func:`~jarvis.domain.operators.tick_lease`."""
        ...

    async def complete_tick(self, operator_id: str, tick_us: int, holder: str) -> bool:
        """Mark ``holder``'s claimed tick done: it can never be claimed again. Forgets the
        operator's completed ticks older than this one. ``False`` when the claim was not
        (or no longer) ``holder``'s."""
        ...


class EmbeddingPort(Protocol):
    """A sentence-embedding model: texts to unit-length vectors whose dot product is their
    cosine similarity."""

    @property
    def model_id(self) -> str:
        """The model's name (e.g. ``all-MiniLM-L6-v2``)."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        """One vector per text, in order; every vector has the same length."""
        ...


# --- containers ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Mount:
    """A host folder bound into a container. ``device`` and ``inode`` (0: not recorded)
    are those of the folder the mount policy checked: the runtime binds that folder or
    refuses, so a folder swapped after the check (for a link elsewhere) is never bound."""

    source: str
    target: str
    read_only: bool = True
    device: int = 0
    inode: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerSpec:
    """How to start one sandbox container. The network is off unless asked for.

    ``timeout`` (seconds from start; ``None``: the runtime's default) is enforced by the
    runtime itself: past it the container is force-removed whatever its caller does, so a
    caller that forgets a container cannot keep it alive. ``run_id`` labels the container
    as one run's (in listings and in its name).
    """

    image: str
    command: tuple[str, ...] = ()
    mounts: tuple[Mount, ...] = ()
    network: bool = False
    memory_mb: int = 512
    cpus: float = 1.0
    pids_limit: int = 128
    tmp_mb: int = 64
    timeout: float | None = None
    workdir: str = ""
    run_id: str = ""
    labels: dict[str, str] = field(default_factory=dict)


class ContainerExitReason(StrEnum):
    EXITED = "exited"
    """It ended by itself; ``code`` is its own."""
    OUT_OF_MEMORY = "out_of_memory"
    """Killed by SIGKILL that jarvis did not send (137): the memory limit's OOM killer."""
    TIMED_OUT = "timed_out"
    """Still running at its timeout: force-removed."""
    KILLED = "killed"
    """Force-removed on its caller's request before it ended."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerExit:
    """How a container ended. ``stderr`` is the last part of what it wrote there (bounded)."""

    code: int
    reason: ContainerExitReason
    stderr: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerRuntimeStatus:
    """What ``jarvis sandbox status`` reports; ``detail`` says why when not ``available``."""

    runtime: str
    endpoint: str
    available: bool
    version: str = ""
    image: str = ""
    image_present: bool = False
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class OrphanContainer:
    """A sandbox container whose jarvis process is gone (``jarvis sandbox cleanup``)."""

    id: str
    name: str = ""
    state: str = ""
    owner: str = ""
    """``host:pid:start time`` of the jarvis process that started it."""
    run: str = ""
    removed: bool = False


ImageProgress = Callable[[str], None]
"""Receives one human-readable line per step of an image build."""


class ContainerProcess(Protocol):
    """A running container spoken to line by line over its stdio (newline-delimited text)."""

    @property
    def id(self) -> str:
        """The runtime's id of the container."""
        ...

    async def send(self, line: str) -> None:
        """Write one line (no newline inside; one is appended) to the container's stdin.

        Raises ``SandboxError`` once the container is gone."""
        ...

    async def close_stdin(self) -> None:
        """End the container's stdin (it reads EOF). Idempotent."""
        ...

    async def receive(self) -> str | None:
        """The next line of its stdout, without the newline; ``None`` at end of stream.

        A line longer than the runtime's bound raises ``SandboxError`` (and the container
        is removed): a container cannot make its caller buffer without limit."""
        ...

    async def wait(self, timeout: float | None = None) -> ContainerExit:
        """Wait for it to end, remove it, and say how it ended. At ``timeout`` (or the
        spec's) it is force-removed and reported as timed out. Lines not yet received stay
        receivable; lines beyond what the runtime buffers are dropped from then on."""
        ...

    async def kill(self) -> None:
        """Force-remove the container; its stdout stream ends. Idempotent."""
        ...


class ContainerPort(Protocol):
    """A container runtime (Docker or Podman) that starts sandboxes and nothing else.

    Every container it starts has no network, a read-only root, no capabilities, an
    unprivileged user, memory / pids / CPU limits, a size-limited ``/tmp`` and jarvis labels.
    At most ``max_concurrent`` of them exist at once: ``start`` waits for a free slot, which
    a container gives back when it is removed (``wait`` or ``kill``).
    """

    @property
    def runtime(self) -> str:
        """``docker``, ``podman`` (or the fake's name)."""
        ...

    async def available(self) -> bool:
        """True when the runtime answers; never raises."""
        ...

    async def status(self) -> ContainerRuntimeStatus:
        """Which runtime, endpoint and image are in use; never raises."""
        ...

    async def ensure_image(self, progress: ImageProgress | None = None) -> str:
        """The sandbox image's reference, built first when it is missing or stale.

        Raises ``ContainerRuntimeUnavailableError`` or ``ContainerImageError``."""
        ...

    async def start(self, spec: ContainerSpec) -> ContainerProcess:
        """Start a labelled container with its stdin open and return its handle.

        Raises ``ContainerRuntimeUnavailableError`` when the runtime cannot be reached,
        ``ContainerImageError`` when ``spec.image`` does not exist, ``SandboxError``
        otherwise; a container that failed to start is removed."""
        ...

    async def cleanup_orphans(self) -> int:
        """Remove every container labelled as this process's or as a process's that is gone
        (running, exited or never started); returns how many were removed."""
        ...

    async def orphans(self, *, remove: bool) -> list[OrphanContainer]:
        """The containers of jarvis processes that are gone (never this process's nor a
        live one's), removed first when ``remove``. The first ``start`` of a runtime
        removes them too."""
        ...


# --- code execution -----------------------------------------------------------------------


class ReplSession(Protocol):
    """One persistent Python interpreter, owned by one agent run or one tool call.

    Variables persist between executions. Executions run one at a time (concurrent calls
    queue). Code reaches the host only through ``llm_query``, ``llm_batch``, ``tool_call``
    (answered by the session's :class:`~jarvis.domain.repl.ReplCallbacks`), and ends an
    RLM run with ``FINAL(value)`` / ``FINAL_VAR("name")``.
    """

    @property
    def isolation(self) -> ReplIsolation:
        """What confines this session's code."""
        ...

    async def execute(self, code: str) -> ExecutionResult:
        """Run ``code`` and report stdout, stderr, the last expression's value and errors.

        Never raises for anything the code does: an exception, a syntax error, a limit hit
        (time, CPU, memory), ``FINAL_VAR`` of a missing variable or a dead interpreter all
        come back as an :class:`ExecutionResult` with ``error`` set. ``FINAL``/``FINAL_VAR``
        stop the code at once; only the first one counts. When the interpreter had to be
        killed (timeout) or died, the next execution starts a fresh one, reports
        ``restarted=True`` and has lost every variable except those set with
        :meth:`set_variable`. Raises ``SandboxError`` only when no interpreter can be
        started at all, and ``RuntimeError`` after :meth:`aclose`.
        """
        ...

    async def set_variable(self, name: str, value: str) -> None:
        """Bind ``name`` to the string ``value`` in the interpreter (e.g. the RLM's
        ``context``); the binding is restored after a restart. ``name`` must be an
        identifier (``ValueError`` otherwise)."""
        ...

    async def aclose(self) -> None:
        """Stop the interpreter and remove its working directory. Idempotent."""
        ...


class ReplPort(Protocol):
    """Starts REPL sessions (the factory agents and the ``code_interpreter`` tool take)."""

    def isolation(self) -> ReplIsolation:
        """What confines the code of the sessions this port starts, as found on this
        machine (may probe the OS once; never raises)."""
        ...

    async def start(
        self,
        *,
        callbacks: ReplCallbacks | None = None,
        limits: ReplLimits | None = None,
    ) -> ReplSession:
        """A fresh session, ready to execute, with its own empty working directory.

        Without ``callbacks`` the code's ``llm_query``/``llm_batch``/``tool_call`` fail
        with a message saying they are not available. Raises ``SandboxError`` when the
        interpreter cannot be started.
        """
        ...


class TraceStorePort(Protocol):
    """Where traces are kept. Synchronous: writes happen off the event loop, in a thread."""

    def save(self, trace: Trace) -> None:
        """Keep ``trace`` (replacing one with the same id); raises ``TraceStoreError``."""
        ...

    def save_many(self, traces: Sequence[Trace]) -> None:
        """Keep every trace of ``traces`` (at once, when the store can: one transaction)."""
        ...

    def get(self, trace_id: str) -> Trace | None:
        """The trace with this id, or one whose id starts with it when only one does."""
        ...

    def list(self, query: TraceQuery) -> Sequence[Trace]:
        """Matching traces, newest first."""
        ...

    def prune(self, *, older_than: float | None, max_bytes: int | None) -> int:
        """Drop traces started before ``older_than`` (epoch seconds), then the oldest until
        the kept ones take at most ``max_bytes``; returns how many were dropped."""
        ...

    def close(self) -> None: ...


class TraceExportPort(Protocol):
    """Sends finished traces to an OpenTelemetry collector. Synchronous: the trace writer
    calls it from its own thread, never from the event loop."""

    def export(self, traces: Sequence[Trace]) -> None:
        """Send ``traces`` (nothing for none); raises ``TraceStoreError`` when the receiver
        cannot be reached in time or refuses them."""
        ...

    def close(self) -> None: ...
