"""How every ``jarvis`` sub-command group is made.

One place for the settings the groups share (help when called bare, no shell-completion
commands, plain-text help), so a group differs from another only by its name and help.
"""

from __future__ import annotations

import typer


def command_group(
    help_text: str, *, name: str | None = None, pretty_exceptions: bool = True
) -> typer.Typer:
    """A sub-command group: ``jarvis NAME`` alone prints its help."""
    return typer.Typer(
        name=name,
        help=help_text,
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
        pretty_exceptions_enable=pretty_exceptions,
    )
