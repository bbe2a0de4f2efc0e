"""The one error hierarchy of jarvis.

Every error class jarvis defines is drawn here (a test keeps the drawing and the code
alike). Those defined in this module are the ones every layer raises; the others live in
the module of the port or use case they belong to, named on the right in brackets (a
class drawn under one of them lives in the same module unless it names another).

::

    JarvisError
    ├── ConfigurationError        permanent: bad config file, bad option, unknown key
    │   ├── UnknownAgentError     an agent key that is not registered
    │   ├── MountRefusedError     a mount the sandbox policy refuses  [domain.sandbox.runner]
    │   ├── PluginError           a plug-in that could not be loaded     [application.plugins]
    │   ├── ScheduleError         a schedule whose ticks cannot be computed
    │   │                                                              [application.schedules]
    │   ├── UnknownOperatorError  no operator has this name            [application.operators]
    │   ├── OperatorExistsError   an operator of this name exists already
    │   │                                                              [application.operators]
    │   ├── UnknownSessionError   no session has this id            [application.conversation]
    │   ├── OwnerGoneError        a run's definition was deleted while it ran  [domain.owners]
    │   ├── OutputSchemaError     a typed answer's schema jarvis cannot honour
    │   │                                                              [domain.typed_output]
    │   ├── DocumentError         a document to add to memory that is refused  [domain.knowledge]
    │   └── DuplicateAgentError   an agent key registered twice              [compat.registry]
    ├── InferenceError            anything an engine did wrong
    │   ├── EngineUnavailableError   retryable: cannot connect, 503, overloaded
    │   ├── RateLimitedError         retryable: 429
    │   ├── EngineTimeoutError       retryable: no answer in time
    │   ├── ModelNotFoundError       permanent: lists the models the engine has
    │   ├── ContextTooLongError      permanent: the prompt does not fit the context window
    │   ├── ToolsNotSupportedError   permanent: the model cannot take tool definitions
    │   ├── EngineProtocolError      permanent: the engine answered something unparseable
    │   ├── StructuredOutputNotSupportedError  the engine refused every structured-output form
    │   └── OutputValidationError    permanent: a typed answer never matched its schema
    ├── ToolError                 a tool could not be built or run (inside a run these
    │   │                         become failed ToolResults, never exceptions)
    │   └── McpError              an MCP server could not be used                [domain.mcp]
    │       ├── McpServerDownError   it did not start, crashed or closed the connection
    │       └── McpTimeoutError      it did not answer within the start-up or call timeout
    ├── PersonaError              a persona that does not exist or escapes its folder
    ├── SandboxError              code isolation could not be set up
    │   ├── ContainerRuntimeUnavailableError  no Docker/Podman socket, or it does not answer
    │   ├── ContainerImageError      the sandbox image is missing or could not be built
    │   ├── SandboxRunError          the sandboxed run ended without an answer
    │   │                                                           [domain.sandbox.runner]
    │   └── ExternalRuntimeError     an external agent runtime is missing, failed or timed out
    ├── SessionStoreError         a store could not do what was asked; nothing was changed
    │   │                                                            [domain.sessions.records]
    │   ├── SessionStoreCorruptError      damaged data, or not a jarvis store (left untouched)
    │   └── SessionStoreUnavailableError  retryable: cannot be reached or opened now
    │       └── SessionStoreLockedError   another process held it past the busy timeout
    ├── MemoryStoreDamagedError   the memory database cannot be read       [domain.knowledge]
    ├── MemoryStoreBusyError      retryable: another process held it past the wait
    │                                                                  [domain.knowledge]
    ├── OperatorBusyError         another tick of the operator is running
    │                                                                [application.operators]
    ├── ManagedAgentNotFoundError no managed agent has this id    [application.managed_agents]
    ├── NothingToRunError         no user message waits for an answer
    │                                                           [application.managed_agents]
    ├── QuotaExceededError        a quota of the server would be exceeded
    │                                                           [application.managed_agents]
    ├── ApprovalNotFoundError     no pending approval has this id
    │                                                        [application.managed_approvals]
    ├── ApprovalConflictError     the approval was decided already, used or expired
    │                                                        [application.managed_approvals]
    └── RunCancelledError         the run was cancelled: by its caller, or its managed
                                  agent was deleted while it ran

``retryable`` is a class-level fact: the engine adapters retry only retryable errors, with
bounded backoff, and everything else surfaces at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from jarvis.domain.llm.completion import Usage


MAX_SHOWN = 80
"""The most characters of a name or value from outside a message repeats: it can be any
length (a URL of 30,000 characters, a model's key), and echoing it whole helps nobody."""


def shown(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` for a message, cut to about ``limit`` characters (``...`` marks the cut)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class JarvisError(Exception):
    """Base class of every error jarvis raises on purpose."""

    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n{self.hint}" if self.hint else self.message


class ConfigurationError(JarvisError):
    """The user's configuration or options are invalid. Names the file and key when known."""


class UnknownAgentError(ConfigurationError):
    def __init__(self, key: str, known: list[str]) -> None:
        # the key as given can be anything (``-a`` of 100,000 characters): cut in the message
        super().__init__(
            f"Unknown agent '{shown(key)}'.", hint="Known agents: " + ", ".join(sorted(known))
        )
        self.key = key
        self.known = sorted(known)


class InferenceError(JarvisError):
    """An inference engine failed. ``engine`` and ``url`` say which one."""

    def __init__(self, message: str, *, engine: str = "", url: str = "", hint: str = "") -> None:
        super().__init__(message, hint=hint)
        self.engine = engine
        self.url = url


class EngineUnavailableError(InferenceError):
    retryable = True


class RateLimitedError(InferenceError):
    retryable = True


class EngineTimeoutError(InferenceError):
    retryable = True


class ModelNotFoundError(InferenceError):
    def __init__(
        self, model: str, *, available: list[str], engine: str = "", url: str = ""
    ) -> None:
        hint = (
            "Available models: " + ", ".join(available)
            if available
            else "The engine reports no models."
        )
        super().__init__(f"Model '{model}' not found.", engine=engine, url=url, hint=hint)
        self.model = model
        self.available = available


class ContextTooLongError(InferenceError):
    pass


class ToolsNotSupportedError(InferenceError):
    pass


class EngineProtocolError(InferenceError):
    pass


class StructuredOutputNotSupportedError(InferenceError):
    """The engine refused every form of structured output it was asked in (a typed answer
    then falls back to asking for the shape in the prompt and checking the reply)."""


class OutputValidationError(InferenceError):
    """A typed answer did not match its schema, after every retry the run allowed.

    Never a silent ``None``: the caller gets the last reply, the ways it broke the schema,
    how many replies were asked for and the tokens all of them cost.
    """

    def __init__(
        self,
        message: str,
        *,
        last_reply: str,
        errors: tuple[str, ...],
        attempts: int,
        usage: Usage,
        engine: str = "",
        hint: str = "",
    ) -> None:
        super().__init__(message, engine=engine, hint=hint)
        self.last_reply = last_reply
        self.errors = errors
        self.attempts = attempts
        self.usage = usage


class ToolError(JarvisError):
    pass


class PersonaError(JarvisError):
    pass


class SandboxError(JarvisError):
    pass


class ContainerRuntimeUnavailableError(SandboxError):
    """No container runtime could be reached. ``endpoint`` is the socket tried (if any)."""

    def __init__(self, message: str, *, endpoint: str = "", hint: str = "") -> None:
        super().__init__(message, hint=hint)
        self.endpoint = endpoint


class ContainerImageError(SandboxError):
    """The sandbox image does not exist in the runtime, or building it failed."""

    def __init__(self, message: str, *, image: str = "", hint: str = "") -> None:
        super().__init__(message, hint=hint)
        self.image = image


class RunCancelledError(JarvisError):
    """The run was cancelled before its answer: by its caller (Ctrl-C), or by the deletion
    of the managed agent it ran for (what it produced has nowhere to go)."""


class ExternalRuntimeError(SandboxError):
    """An external agent runtime (opencode, openhands, claude_code) is not installed, did
    not start, crashed or ran out of time. A sandbox-class error: like a missing container
    runtime it is something on the machine, not in the question (CLI exit code 6)."""

    def __init__(self, message: str, *, runtime: str, hint: str = "") -> None:
        super().__init__(message, hint=hint)
        self.runtime = runtime
