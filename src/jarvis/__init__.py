"""jarvis: a local-first agent runtime.

``from jarvis import Jarvis`` gives the SDK. The package imports nothing heavy until a name
is used, so ``import jarvis`` and the command line start fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jarvis.application.ask import Answer
    from jarvis.entrypoints.sdk import Jarvis

__all__ = ["Answer", "Jarvis"]


def __getattr__(name: str) -> object:
    if name == "Jarvis":
        from jarvis.entrypoints.sdk import Jarvis

        return Jarvis
    if name == "Answer":
        from jarvis.application.ask import Answer

        return Answer
    raise AttributeError(f"module 'jarvis' has no attribute {name!r}")
