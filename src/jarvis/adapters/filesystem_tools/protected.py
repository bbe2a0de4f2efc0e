"""Folders file_read refuses besides the secret-name rules: jarvis's own config dir.

The config dir holds ``config.toml`` (API keys, server addresses) and the memory database,
whatever it is called (``$OPENJARVIS_HOME`` can be any folder), so it is refused by place,
not by name. Adapters may not import the entry points, so the rule of
``jarvis.entrypoints.settings.config_dir`` is repeated here; a test keeps the two equal.
"""

from __future__ import annotations

import os
from collections.abc import Mapping


def jarvis_config_dir(env: Mapping[str, str]) -> str:
    """``$OPENJARVIS_HOME``, else ``$XDG_DATA_HOME/openjarvis``, else ``~/.openjarvis``."""
    if home := env.get("OPENJARVIS_HOME"):
        return os.path.expanduser(home)
    if xdg := env.get("XDG_DATA_HOME"):
        return os.path.join(os.path.expanduser(xdg), "openjarvis")
    return os.path.join(os.path.expanduser("~"), ".openjarvis")


def inside(path: str, folder: str) -> bool:
    """Whether the absolute, normalised ``path`` is ``folder`` or below it."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
