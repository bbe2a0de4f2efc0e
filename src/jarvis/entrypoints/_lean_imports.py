"""Keep start-up fast: import a library without the optional integrations it probes for.

Some libraries try to import every optional integration they support at import time
(dependency-injector probes YAML, pydantic-settings and several web frameworks; httpx loads
its command-line client, which pulls in click and rich). jarvis uses none of those code
paths, and on a machine where the integrations happen to be installed they cost more than
the whole ``jarvis ask`` budget. :func:`skipping` makes such probes fail fast, for modules
that are not already imported, for the duration of one import only.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def skipping(*names: str) -> Iterator[None]:
    """Inside the block, ``import name`` raises ImportError for each not-yet-imported name."""
    blocked = [name for name in names if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]  # the documented import block
    try:
        yield
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def import_httpx() -> None:
    """Import httpx without its command-line client (``httpx._main``: click and rich)."""
    if "httpx" in sys.modules:
        return
    with skipping("httpx._main"):
        import httpx  # noqa: F401
