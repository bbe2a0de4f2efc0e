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


_MODULE_OF: dict[str, str] = {
    "Jarvis": "jarvis.entrypoints.sdk",
    "Answer": "jarvis.application.ask",
    "AskOptions": "jarvis.entrypoints.composition",
    "ApprovalAnswer": "jarvis.domain.approvals",
    "ApprovalRequest": "jarvis.domain.approvals",
    "tool": "jarvis.application.tools.function_tool",
    "FunctionTool": "jarvis.application.tools.function_tool",
}
"""The module that defines each public name (imported when the name is first used)."""


def __getattr__(name: str) -> object:
    """The public name ``name``, from its module (imported on first use)."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'jarvis' has no attribute {name!r}")
    from importlib import import_module  # not at the top: ``import jarvis`` stays bare

    value: object = getattr(import_module(module), name)
    return value
