"""The host as the external agents see it: this process's working directory, its file
system and its environment (:class:`~jarvis.domain.external_runtime.WorkspaceHostPort`).

Read when a run starts, never cached: a long-lived process (``jarvis serve``, an operator)
sees a workspace created or a key exported after it started.
"""

from __future__ import annotations

import os


class LocalWorkspaceHost:
    """This process's working directory, file system and environment."""

    def working_directory(self) -> str:
        return os.getcwd()

    def real_directory(self, path: str) -> str | None:
        return os.path.realpath(path) if os.path.isdir(path) else None

    def variable(self, name: str) -> str:
        return os.environ.get(name, "")
