"""What an HTTP client may ask an agent run to do: the options and runtimes the operator allowed.

Why: whoever can reach the server plays the model's user, and some agent options move where
a run's model lives or widen what it may do on this machine: ``base_url``, ``api_key`` and
``cloud`` send the run (and the engine's key) to a server the caller names, ``workspace``,
``permission_mode``, ``allowed_tools`` and ``session`` widen what an external runtime may
touch, ``host_tools`` lets a sandboxed run call tools on the host. None of them is taken
over HTTP unless the operator allowed it (``jarvis serve --allow-option NAME``).

The external runtimes (``opencode``, ``claude_code``, ``openhands``) run the model's commands
on the host with the server user's rights: they are neither listed nor run over HTTP (as
models of ``/v1/chat/completions``, as a managed agent's ``agent``, or as a sandboxed run's
``inner``) unless enabled (``jarvis serve --enable-runtime NAME``). A stored definition is
checked again before each run, so a restart without the flag takes the right away.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from jarvis.application.registry import AgentRegistry
from jarvis.domain.errors import UnknownAgentError
from jarvis.domain.json_types import JSONValue
from jarvis.entrypoints.http.errors import ApiError
from jarvis.entrypoints.http.guarded_options import GUARDED_OPTIONS, HOST_RUNTIMES


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPolicy:
    """The guarded options and the external runtimes the operator allowed over HTTP."""

    allowed_options: frozenset[str] = frozenset()
    enabled_runtimes: frozenset[str] = frozenset()

    @classmethod
    def of(cls, *, options: Iterable[str] = (), runtimes: Iterable[str] = ()) -> RunPolicy:
        return cls(allowed_options=frozenset(options), enabled_runtimes=frozenset(runtimes))

    def offered(self, registry: AgentRegistry, key: str) -> bool:
        """Whether agent ``key`` (or an alias) may be listed and run over HTTP."""
        try:
            canonical = registry.resolve(key)
        except UnknownAgentError:  # the route says so its own way
            return True
        return canonical not in HOST_RUNTIMES or canonical in self.enabled_runtimes

    def check(self, registry: AgentRegistry, agent: str, options: Mapping[str, JSONValue]) -> None:
        """Refuse (403) a run of ``agent`` with ``options`` the operator did not allow."""
        keys = [agent]
        inner = options.get("inner")
        if isinstance(inner, str):
            keys.append(inner)
        for key in keys:
            if not self.offered(registry, key):
                raise ApiError(
                    403,
                    f"The {registry.resolve(key)} runtime runs the model's commands on this "
                    "machine and is not enabled over HTTP. Start the server with "
                    f"jarvis serve --enable-runtime {registry.resolve(key)} to offer it.",
                    "permission_error",
                    "runtime_not_enabled",
                )
        refused = sorted(
            k for k in options if k in GUARDED_OPTIONS and k not in self.allowed_options
        )
        if refused:
            flags = " ".join(f"--allow-option {k}" for k in refused)
            raise ApiError(
                403,
                "The agent option"
                + ("s " if len(refused) > 1 else " ")
                + ", ".join(refused)
                + " cannot be set over HTTP: it moves where the model runs or widens what the "
                f"run may do. Start the server with jarvis serve {flags} to allow it.",
                "permission_error",
                "option_not_allowed",
            )
