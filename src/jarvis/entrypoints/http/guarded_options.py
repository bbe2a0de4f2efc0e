"""The agent options and agents an HTTP client may use only when the operator allowed them
(see :mod:`.run_policy`). Names only, importable without the web framework (the CLI lists
them in ``jarvis serve --help``)."""

from __future__ import annotations

GUARDED_OPTIONS = frozenset(
    {
        "base_url",
        "api_key",
        "cloud",
        "workspace",
        "permission_mode",
        "allowed_tools",
        "session",
        "host_tools",
    }
)
"""Agent options that move where a run's model lives (``base_url``, ``api_key``, ``cloud``)
or widen what it may do (``workspace``, ``permission_mode``, ``allowed_tools``, ``session``
of the external runtimes; ``host_tools`` of ``sandboxed``): ``--allow-option NAME``."""

HOST_RUNTIMES = frozenset({"opencode", "claude_code", "openhands"})
"""Agents that run the model's commands on the host: ``--enable-runtime NAME``."""
