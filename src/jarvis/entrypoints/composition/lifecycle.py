"""A container's life: resolving its providers, choosing the engine, closing what it opened.

The :class:`~jarvis.entrypoints.composition.runtime.Runtime` is the only caller: entry
points never touch providers themselves.
"""

from __future__ import annotations

import inspect
from typing import TypeAlias, TypeVar, cast

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.ports import InferencePort
from jarvis.entrypoints.composition.container import Container, inference_provided
from jarvis.entrypoints.composition.di import providers
from jarvis.entrypoints.composition.engines import LOOP_BOUND_ENGINES
from jarvis.entrypoints.engine_choice import EngineChoice

T = TypeVar("T")

EngineResource: TypeAlias = "providers.Resource[InferencePort]"
"""An engine resource: resolved (``await resource.async_()``) and shut down on one loop."""


async def resolved(provider: providers.Provider[T], **kwargs: object) -> T:
    """What ``provider`` provides, awaited when it is asynchronous (a provider that depends
    on an engine resource is; one whose engine is overridden is not)."""
    value = provider(**kwargs)
    if inspect.isawaitable(value):
        return cast("T", await value)
    return value


def choose(container: Container, choice: EngineChoice) -> None:
    """Select ``choice``'s engine for ``inference`` and everything built on it."""
    container.engine_choice.override(choice)


async def aclose_engines(container: Container) -> None:
    """Close every resource this container opened (its engines, the container runtime's
    API client, the session store's connection) and forget them (idempotent): a later call
    opens them again). The MCP servers started are stopped first."""
    await aclose_mcp(container)
    container.file_watch().close()
    pending = container.shutdown_resources()
    if pending is not None:
        await pending


async def aclose_mcp(container: Container) -> None:
    """Stop the MCP servers this container started (none built: nothing to do)."""
    try:
        source = container.mcp_tools()
    except ConfigurationError:
        return  # a configuration that could not name servers started none
    if source is not None:
        await source.aclose()


def forget_engines(container: Container) -> None:
    """Forget the engines built, without closing them (their event loop is gone, and their
    connections with it)."""
    for engine in (container.ollama, container.vllm, container.openai, container.llamacpp):
        _forget(engine)
    try:  # the MCP servers started on that loop: their processes are killed now
        source = container.mcp_tools()
    except ConfigurationError:
        return
    if source is not None:
        source.close_now(closed_loops_only=True)


def _forget(resource: providers.Resource[InferencePort]) -> None:
    pending = resource.shutdown()  # drops the resource; its closing needs the loop it had
    if inspect.iscoroutine(pending):
        pending.close()


def loop_engine(container: Container, name: str) -> EngineResource | None:
    """A resource of its own for engine ``name``, as the container builds its own, for one
    more event loop (the caller resolves it, and shuts it down, on that loop); ``None`` when
    the container's engine serves every loop: the embedded engine (it runs in threads, and a
    second instance would load the model twice) or an engine a test or an app provided."""
    if name not in LOOP_BOUND_ENGINES or inference_provided(container):
        return None
    provider: providers.Resource[InferencePort] = getattr(container, name)
    if provider.last_overriding is not None:
        return None
    return providers.Resource(provider.provides, *provider.args, **provider.kwargs)
