"""The one place a runtime is put together: every entry point and every test tier calls
:func:`bootstrap`.

The command line (each command), the SDK (each ``Jarvis``), the sandbox's inner process,
an HTTP server and the tests all build what they run on here, from a loaded
:class:`~jarvis.application.config.JarvisConfig` and, where a test or an application has
its own, parts swapped in (:class:`~jarvis.entrypoints.composition.overrides.Overrides`).
Nothing is built until it is used (the engine on the first question), so bootstrapping
costs no start-up time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from jarvis.application.config import JarvisConfig
from jarvis.domain.ports import InferencePort
from jarvis.entrypoints.composition.container import Container, container_or_new
from jarvis.entrypoints.composition.runtime import Runtime

if TYPE_CHECKING:
    from jarvis.entrypoints.composition.overrides import Overrides  # imported by its users


def bootstrap(
    config: JarvisConfig,
    *,
    container: object = None,
    inference: InferencePort | None = None,
    overrides: Overrides | None = None,
    notice: Callable[[str], None] | None = None,
) -> Runtime:
    """The runtime for ``config``: the container with the configuration loaded, the engine
    chosen on first use.

    ``container``: a :class:`~jarvis.entrypoints.composition.container.Container` to use (a
    test's, its providers overridden with fakes; anything else, such as typer's default
    ``ctx.obj``, means a new one). ``inference``: an engine to run on instead of the
    configured one (jarvis never closes an engine it did not build); ``overrides``: other
    parts to use instead of the configured ones. ``notice``: told which engine was chosen
    and why (``--verbose``).
    """
    built: Container = container_or_new(container)
    built.config.override(config)
    if inference is not None:
        built.inference.override(inference)
    if overrides is not None:
        overrides.apply(built)
    return Runtime(built, config, notice=notice)


__all__ = ["bootstrap"]
