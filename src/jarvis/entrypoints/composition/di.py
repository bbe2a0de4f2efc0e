"""dependency-injector, imported without the optional integrations it probes for.

Every module of the composition root takes ``containers``, ``providers`` and ``resources``
from here, so whichever of them is imported first imports the library the lean way
(:mod:`~jarvis.entrypoints.composition.skip_optional_imports`).
"""

from __future__ import annotations

from jarvis.entrypoints.composition.skip_optional_imports import import_dependency_injector

import_dependency_injector()  # without the integrations it probes for

from dependency_injector import containers, providers, resources  # noqa: E402

__all__ = ["containers", "providers", "resources"]
