"""The one place a runtime is put together: every entry point and every test tier calls
:func:`bootstrap`.

The command line (each command), the SDK (each ``Jarvis``), the sandbox's inner process,
an HTTP server and the tests all build what they run on here, from a loaded
:class:`~jarvis.application.config.JarvisConfig` and, where a test or an application has
its own, parts swapped in: a container whose providers are overridden, an engine. Nothing
is built until it is used (the engine on the first question), so bootstrapping costs no
start-up time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from jarvis.entrypoints.container import Container, container_or_new
from jarvis.entrypoints.runtime import Runtime

if TYPE_CHECKING:
    from jarvis.application.config import JarvisConfig
    from jarvis.domain.ports import InferencePort
    from jarvis.entrypoints.http.loopback_endpoint import LoopbackEndpoint


def _loopback_endpoint() -> LoopbackEndpoint:
    """``claude_code``'s Anthropic-compatible endpoint (imported when that agent runs)."""
    from jarvis.entrypoints.http.loopback_endpoint import LoopbackEndpoint

    return LoopbackEndpoint()


def bootstrap(
    config: JarvisConfig,
    *,
    container: object = None,
    inference: InferencePort | None = None,
    notice: Callable[[str], None] | None = None,
) -> Runtime:
    """The runtime for ``config``: the container with the configuration loaded, the engine
    chosen on first use.

    ``container``: a :class:`~jarvis.entrypoints.container.Container` to use (a test's, its
    providers overridden with fakes; anything else, such as typer's default ``ctx.obj``,
    means a new one). ``inference``: an engine to run on instead of the configured one
    (jarvis never closes an engine it did not build). ``notice``: told which engine was
    chosen and why (``--verbose``).
    """
    built: Container = container_or_new(container)
    built.config.override(config)
    built.loopback_endpoint.override(_loopback_endpoint)
    if inference is not None:
        built.inference.override(inference)
    return Runtime(built, config, notice=notice)


__all__ = ["bootstrap"]
