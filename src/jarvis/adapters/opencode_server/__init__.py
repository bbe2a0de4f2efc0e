"""The ``opencode`` runtime: an ``opencode serve`` process on loopback, driven over HTTP."""

from jarvis.adapters.opencode_server.runtime import OpenCodeRuntime, opencode_binary

__all__ = ["OpenCodeRuntime", "opencode_binary"]
