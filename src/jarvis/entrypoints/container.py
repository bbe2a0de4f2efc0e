"""The composition root: the one dependency-injector container, the only importer of adapters."""

from __future__ import annotations

from dependency_injector import containers, providers


class Container(containers.DeclarativeContainer):
    config = providers.Configuration()
