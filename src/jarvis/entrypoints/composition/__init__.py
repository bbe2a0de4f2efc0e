"""The composition root: the only package that imports adapters and dependency-injector.

Everything jarvis runs on is put together here, from the validated configuration:

=====================  ==================================================================
module                 what it builds
=====================  ==================================================================
``root``               :func:`bootstrap`, the one entry: a :class:`Runtime` for a config
``overrides``          :class:`Overrides`, the typed seam for parts a caller brings
``runtime``            :class:`Runtime`: the engine per event loop, and every use case
``container``          the dependency-injector container (one provider per part)
``lifecycle``          resolving providers, choosing the engine, closing what was opened
``engines``            the engine adapters and ``auto``'s questions to the machine
``tools``              the tool catalogue, the REPL, the plug-ins, the MCP servers
``prompting``          the persona files, ``AGENTS.md`` and the Agent Skills
``traces``             the trace store and writer, the event bus
``stores``             sessions, operators, managed agents (which class per backend)
``runtimes``           Docker or Podman, the external agents' runtimes
``sandbox``            the ``sandboxed`` agent's runner (imported when it runs)
``loopback``           ``claude_code``'s endpoint on loopback (imported when it runs)
``services``           the use cases built on the ask service
``serving``            the state of ``jarvis serve``'s routes
``ask_options``        :class:`AskOptions`, the options of one question
=====================  ==================================================================

The CLI, the SDK, ``jarvis serve``, the sandbox's inner process and the tests call
:func:`bootstrap` and take every service from the :class:`Runtime` it returns; none of them
assembles a service or touches a provider. The names below are imported on first use,
so that importing a submodule (the start-up helpers) loads nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jarvis.entrypoints.composition.ask_options import AskOptions
    from jarvis.entrypoints.composition.container import Container
    from jarvis.entrypoints.composition.overrides import Overrides
    from jarvis.entrypoints.composition.root import bootstrap
    from jarvis.entrypoints.composition.runtime import Runtime

_EXPORTS = {
    "AskOptions": "ask_options",
    "bootstrap": "root",
    "Container": "container",
    "Overrides": "overrides",
    "Runtime": "runtime",
}

__all__ = ["AskOptions", "Container", "Overrides", "Runtime", "bootstrap"]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)
