"""The engines jarvis knows, named once.

``[engine] name``, ``--engine``, the SDK's ``engine=``, the loader's check of an override
and the container's engine table all read :data:`EngineName`; a test checks that the
container has one engine provider per name. The module imports nothing of jarvis, so the
command line can name the choices without loading the configuration schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, get_args

EngineName = Literal["auto", "ollama", "vllm", "openai", "llamacpp"]
"""``auto`` = a reachable local Ollama, else the embedded model (``llamacpp``)."""

ENGINE_NAMES: Final[tuple[EngineName, ...]] = get_args(EngineName)
"""Every engine name, in the order help texts list them."""

ENGINE_URL_KEYS: Final[Mapping[str, str]] = {
    "ollama": "host",
    "vllm": "base_url",
    "openai": "base_url",
}
"""The key of a server engine's ``[engine.NAME]`` section that holds its URL (the embedded
``llamacpp`` engine has a model file instead)."""
