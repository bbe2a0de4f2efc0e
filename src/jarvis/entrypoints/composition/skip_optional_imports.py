"""Keep start-up fast: import a library without the optional integrations it probes for.

Some libraries import every optional integration they support when they are imported:
dependency-injector probes PyYAML, pydantic and pydantic-settings (for configuration
loaders jarvis does not use) and several web frameworks (for wiring markers jarvis does not
use); httpx loads its command-line client, which pulls in click and rich. On a machine
where those happen to be installed they cost more than the whole ``jarvis ask`` budget.
:func:`skipping` makes such probes fail fast, for modules that are not imported yet, for
the duration of one import only. It holds the interpreter's import lock meanwhile, so no
other thread can import one of those modules while it is hidden.

Measured on the development machine (2 vCPUs, Python 3.11, dependency-injector 4.49 with
pydantic, PyYAML, pydantic-settings, click and rich installed; medians of 15 fresh
processes): importing dependency-injector 194 ms the ordinary way, 27 ms through
:func:`import_dependency_injector` (saves ~165 ms, nearly all of it pydantic); httpx 67 ms,
34 ms through :func:`import_httpx` (saves ~30 ms of click and rich).
"""

from __future__ import annotations

import _imp
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType


@contextmanager
def skipping(*names: str, stand_ins: Mapping[str, ModuleType] | None = None) -> Iterator[None]:
    """Inside the block, ``import name`` fails (or gets its stand-in) unless already imported.

    ``stand_ins`` replace a module by a placeholder instead, for importers that read an
    attribute of what they import rather than catching ``ImportError``.
    """
    hidden: dict[str, ModuleType | None] = dict.fromkeys(names)
    hidden.update(stand_ins or {})
    _imp.acquire_lock()
    try:
        placed = [name for name in hidden if name not in sys.modules]
        for name in placed:
            sys.modules[name] = hidden[name]  # type: ignore[assignment]  # None blocks it
        try:
            yield
        finally:
            for name in placed:
                if name in sys.modules and sys.modules[name] is hidden[name]:
                    del sys.modules[name]
    finally:
        _imp.release_lock()


def import_dependency_injector() -> None:
    """Import dependency-injector without its optional configuration and web integrations."""
    if "dependency_injector.containers" in sys.modules:
        return
    # providers.pyx reads ``pydantic.VERSION`` after ``import pydantic`` (only to support
    # ``Configuration.from_pydantic()``): a stand-in without a "1." version makes it skip.
    pydantic = ModuleType("pydantic", "stand-in used while dependency-injector is imported")
    pydantic.VERSION = "0 (not imported)"  # type: ignore[attr-defined]  # a bare stand-in module
    try:
        with skipping(
            "yaml",
            "pydantic_settings",
            "fastapi",
            "fast_depends",
            "starlette",
            "werkzeug",
            "flask",
            stand_ins={"pydantic": pydantic},
        ):
            import dependency_injector.containers
            import dependency_injector.providers
    except Exception:
        # A release that probes differently must cost start-up time, never correctness:
        # forget the half-imported package and import it the ordinary way.
        for name in [m for m in sys.modules if m.split(".")[0] == "dependency_injector"]:
            del sys.modules[name]
        import dependency_injector.containers
        import dependency_injector.providers  # noqa: F401


def import_httpx() -> None:
    """Import httpx without its command-line client (``httpx._main``: click and rich)."""
    if "httpx" in sys.modules:
        return
    with skipping("httpx._main"):
        import httpx  # noqa: F401
