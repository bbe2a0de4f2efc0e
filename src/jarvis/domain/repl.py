"""Value objects of code execution: the limits a REPL runs under, the isolation in force,
and the typed outcome of one execution.

Model-written code is untrusted. The REPL port (:class:`~jarvis.domain.ports.ReplPort`)
runs it somewhere else (another process, with its own limits); these types are what the
domain sees of that, so agents and tools can report failures to the model in plain words
instead of crashing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from jarvis.domain.json_types import JSONObject
from jarvis.domain.tools.specs import ToolResult, truncate

ReplErrorKind = Literal[
    "exception",
    "syntax",
    "timeout",
    "cpu_limit",
    "memory_limit",
    "crashed",
    "final_var_missing",
    "unavailable",
]
"""Why an execution failed: the code raised (``exception``/``syntax``), hit a limit
(``timeout``, ``cpu_limit``, ``memory_limit``), the interpreter died (``crashed``),
``FINAL_VAR`` named a variable that does not exist, or no interpreter could be started
(``unavailable``)."""

NetworkIsolation = Literal["namespace", "audit_hook", "none"]
ProcessIsolation = Literal["pid_namespace", "refused", "none"]

STREAM_TRUNCATION_MARKER = "\n... [output truncated: {dropped} more characters]"
"""Appended by an interpreter where it stopped capturing a stream (stdout, stderr) at its
limit; ``{dropped}`` is how much was left out. What the model is shown is then cut once
more, to its own limit, by :func:`jarvis.domain.tools.specs.truncate`."""

RESTART_NOTE = (
    "[The REPL was restarted before this execution: variables and imports from earlier "
    "executions were lost. Variables provided by the host (such as `context`) were restored.]"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplLimits:
    """What one REPL session may use.

    ``timeout_seconds`` is the wall-clock time one execution may take, not counting the time
    the host spends answering its ``llm_query``/``tool_call`` callbacks; past it the
    interpreter is killed. ``cpu_seconds`` is the CPU time of one execution and
    ``session_cpu_seconds`` that of the whole session. ``memory_mb`` bounds the address
    space, ``file_size_mb`` any one file written, ``max_processes`` the processes (threads
    included) the code may have at once. ``max_output_chars`` bounds each captured stream
    and the rendered value of the last expression.

    The callbacks of one session (one agent run, or one ``code_interpreter`` call) share
    one budget: at most ``max_callbacks`` calls and ``max_callback_bytes`` of prompts,
    arguments and answers in all; a call past it fails inside the code. The host's time
    answering the callbacks of one execution is bounded by ``callback_seconds``: past it
    the execution is stopped like a timeout, so no execution lasts longer than
    ``timeout_seconds + callback_seconds``.
    """

    timeout_seconds: float = 30.0
    cpu_seconds: float = 30.0
    session_cpu_seconds: int = 600
    memory_mb: int = 512
    file_size_mb: int = 64
    max_processes: int = 32
    max_output_chars: int = 10_000
    max_callbacks: int = 1000
    max_callback_bytes: int = 64 * 1024 * 1024
    callback_seconds: float = 600.0

    def __post_init__(self) -> None:
        for name in (
            "timeout_seconds",
            "cpu_seconds",
            "session_cpu_seconds",
            "memory_mb",
            "file_size_mb",
            "max_processes",
            "max_output_chars",
            "max_callbacks",
            "max_callback_bytes",
            "callback_seconds",
        ):
            value = getattr(self, name)
            if not value > 0 or value != value or value == float("inf"):
                raise ValueError(f"ReplLimits.{name} must be positive")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplIsolation:
    """What actually confines the code, as found on this machine (and nothing more).

    ``network``: ``namespace`` (a network namespace of its own: no interface but its own
    loopback), ``audit_hook`` (socket operations refused inside the interpreter only),
    ``none``. ``processes``: ``pid_namespace`` (its own PID namespace: every process dies
    with the session), ``refused`` (starting processes refused by the audit hook only),
    ``none``. ``user`` names the account the code runs as. ``sandbox`` names the OS
    sandbox (``""``: none), ``filesystem`` the view it has, ``seccomp`` whether a system-call
    filter is installed, ``memory`` and ``process_limit`` what the limits bound (the session
    or each process). ``runs_code`` is false when no sandbox could be had and code is
    refused (``unavailable_reason`` says why).
    """

    network: NetworkIsolation
    processes: ProcessIsolation
    user: str
    environment_scrubbed: bool
    writes_confined: bool
    sandbox: str = ""
    filesystem: str = ""
    seccomp: bool = False
    memory: str = ""
    process_limit: str = ""
    dies_with_host: bool = False
    runs_code: bool = True
    unavailable_reason: str = ""

    @property
    def isolated(self) -> bool:
        """True when an OS sandbox keeps the code off the network and out of the host's
        files (an audit hook alone does not count)."""
        return (
            self.runs_code
            and bool(self.sandbox)
            and self.network == "namespace"
            and self.writes_confined
            and self.environment_scrubbed
        )

    def describe(self) -> str:
        """One line for logs, ``--json`` metadata and the README."""
        if not self.runs_code:
            return f"NO SANDBOX AVAILABLE: code does not run ({self.unavailable_reason})"
        network = {
            "namespace": "own network namespace (no network)",
            "audit_hook": "network refused by an in-process audit hook only",
            "none": "NETWORK NOT ISOLATED",
        }[self.network]
        processes = {
            "pid_namespace": "own PID namespace",
            "refused": "process creation refused by the audit hook only",
            "none": "processes not confined",
        }[self.processes]
        parts = [self.sandbox or "NO OS SANDBOX (unsafe-audit-hook-only)", network, processes]
        if self.filesystem:
            parts.append(f"filesystem: {self.filesystem}")
        if self.sandbox:
            parts.append("seccomp filter" if self.seccomp else "NO seccomp filter")
        parts.append(f"runs as {self.user}")
        parts.append("scrubbed environment" if self.environment_scrubbed else "HOST ENVIRONMENT")
        if not self.writes_confined:
            parts.append("WRITES NOT CONFINED by the OS")
        if self.memory:
            parts.append(f"memory: {self.memory}")
        if self.process_limit:
            parts.append(f"processes: {self.process_limit}")
        if self.dies_with_host:
            parts.append("dies with the host")
        return "; ".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionResult:
    """The outcome of running one piece of code.

    ``value`` is the ``repr`` of the last expression when it was not ``None`` (as an
    interactive interpreter shows it). ``error`` is a one-line summary
    (``"ZeroDivisionError: division by zero"``, ``"Execution timed out after 5 s ..."``) and
    ``traceback`` the details. ``final`` is set when the code called ``FINAL``/``FINAL_VAR``:
    the value, as text, that ends an RLM run (only the first call counts). ``restarted``
    says a fresh interpreter had to be started for this execution, so earlier variables
    are gone. ``truncated`` says some output was cut to the session's ``max_output_chars``.
    """

    stdout: str = ""
    stderr: str = ""
    value: str | None = None
    error: str | None = None
    error_kind: ReplErrorKind | None = None
    traceback: str = ""
    final: str | None = None
    truncated: bool = False
    restarted: bool = False
    duration_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def has_final(self) -> bool:
        return self.final is not None

    def observation(self, max_chars: int = 10_000) -> str:
        """The text shown to the model: output, value and error, cut to ``max_chars``."""
        parts: list[str] = []
        if self.restarted:
            parts.append(RESTART_NOTE)
        if self.stdout:
            parts.append(self.stdout.rstrip("\n"))
        if self.stderr:
            parts.append("[stderr]\n" + self.stderr.rstrip("\n"))
        if self.value is not None:
            parts.append(self.value)
        if self.error is not None:
            detail = self.traceback.rstrip("\n") if self.traceback else ""
            if detail and self.error not in detail:
                detail = f"{detail}\n{self.error}"
            parts.append("[error] " + (detail or self.error))
        text = "\n".join(parts) if parts else "(no output)"
        return truncate(text, max_chars)[0]


class ReplCallbacks(Protocol):
    """How code running in a REPL reaches back to the host.

    The host answers ``llm_query``/``llm_batch`` through its inference port and
    ``tool_call`` through its tool executor. A method that raises makes the call fail
    inside the code (a ``ReplCallbackError`` with the message), never the session.
    """

    async def llm_query(self, prompt: str) -> str:
        """One sub-model completion of ``prompt``."""
        ...

    async def llm_batch(self, prompts: Sequence[str]) -> list[str]:
        """One completion per prompt, in order, computed concurrently. A prompt whose call
        failed gets an ``"Error: ..."`` string in its place."""
        ...

    async def tool_call(self, name: str, arguments: JSONObject) -> ToolResult:
        """Run tool ``name``; a failed tool is a result with ``success=False``."""
        ...
