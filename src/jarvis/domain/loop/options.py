"""How an agent is built from named options (``-O key=value``, the SDK's ``agent_options=``).

Each agent class reads the options it takes, by name and with its own default, and turns
them into its value objects (:meth:`BaseAgent.from_options`). Checking the values is not the
agent's business: the application implements :class:`AgentOptions`, checks every value it
hands out (type, range, finite numbers) and refuses any option no agent read, naming the
agent, the option and the options that agent takes. The checks therefore exist once, for
the command line and the SDK alike, and an agent's options are the ones its code reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

from jarvis.domain.loop.settings import PromptSettings, SamplingSettings
from jarvis.domain.ports import InferencePort, ReplPort, ToolPort
from jarvis.domain.run.events import EventBus

if TYPE_CHECKING:  # only named in annotations: a question that runs no operator or
    # external runtime does not import them (start-up of `jarvis ask`)
    from jarvis.domain.external_runtime import ExternalRuntimesPort, WorkspaceHostPort
    from jarvis.domain.loop.approval_gate import ApprovalGate
    from jarvis.domain.operators import OperatorBinding


Choice = TypeVar("Choice", bound=str)


class AgentOptions(Protocol):
    """The named options of one agent; each getter returns the option or ``default``."""

    def integer(self, key: str, default: int) -> int: ...

    def optional_integer(self, key: str, default: int | None) -> int | None: ...

    def number(self, key: str, default: float) -> float: ...

    def optional_number(self, key: str, default: float | None) -> float | None: ...

    def flag(self, key: str, default: bool) -> bool: ...

    def text(self, key: str, default: str | None) -> str | None: ...

    def choice(
        self, key: str, choices: tuple[Choice, ...], default: Choice, *, what: str
    ) -> Choice:
        """One of ``choices``; anything else is refused as "Unknown <agent> <what>"."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentParts:
    """What the application hands every agent besides its options: the engine and model,
    the event bus, sampling and prompt settings, the run's tools, the REPL factory and the
    operator a tick runs for (the agents that take no tools, run no code or are no
    operatives ignore those)."""

    inference: InferencePort
    model: str
    bus: EventBus | None = None
    sampling: SamplingSettings | None = None
    prompts: PromptSettings = field(default_factory=PromptSettings)
    tools: tuple[ToolPort, ...] = ()
    repl: ReplPort | None = None
    operator: OperatorBinding | None = None
    runtimes: ExternalRuntimesPort | None = None
    """The external runtimes (opencode, openhands) of the agents that delegate to one."""
    host: WorkspaceHostPort | None = None
    """Where those agents find their workspace and environment (the agent registry
    supplies the local host when none is given)."""
    approvals: ApprovalGate | None = None
    """Decides which of the run's tool calls run (``None``: all of them)."""
