"""jarvis: a local-first agent runtime.

``from jarvis import Jarvis`` gives the SDK (``AskOptions``: the keyword options of its
question methods), ``from jarvis import tool`` the decorator that turns a typed function
into a tool, ``ApprovalRequest`` / ``ApprovalAnswer`` what an ``approve=`` callback
receives and may return. The package imports nothing heavy until a name is used, so
``import jarvis`` and the command line start fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jarvis.application.ask import Answer
    from jarvis.application.tools.function_tool import FunctionTool, tool
    from jarvis.domain.approvals import ApprovalAnswer, ApprovalRequest
    from jarvis.entrypoints.composition import AskOptions
    from jarvis.entrypoints.sdk import Jarvis

__all__ = [
    "Answer",
    "ApprovalAnswer",
    "ApprovalRequest",
    "AskOptions",
    "FunctionTool",
    "Jarvis",
    "tool",
]


def __getattr__(name: str) -> object:
    if name == "Jarvis":
        from jarvis.entrypoints.sdk import Jarvis

        return Jarvis
    if name == "Answer":
        from jarvis.application.ask import Answer

        return Answer
    if name == "AskOptions":
        from jarvis.entrypoints.composition import AskOptions

        return AskOptions
    if name in ("ApprovalAnswer", "ApprovalRequest"):
        from jarvis.domain import approvals

        return getattr(approvals, name)
    if name in ("tool", "FunctionTool"):
        from jarvis.application.tools import function_tool

        return getattr(function_tool, name)
    raise AttributeError(f"module 'jarvis' has no attribute {name!r}")
