"""``jarvis persona show`` and ``jarvis persona edit``: see and change what every agent is
told about itself (SOUL.md), what it remembers (MEMORY.md) and who the user is (USER.md).

``--persona NAME`` of ``jarvis ask`` lives in the ask command; :func:`persona_warnings`
is how that command shows file warnings (bad UTF-8, skipped files) with ``--verbose``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from jarvis.entrypoints.cli.command_group import command_group
from jarvis.entrypoints.cli.errors import guarded
from jarvis.entrypoints.cli.options import ConfigOption, JsonOption, VerboseOption
from jarvis.entrypoints.cli.output import write_raw

if TYPE_CHECKING:
    from jarvis.application.system_prompt import PersonaPromptReport
    from jarvis.entrypoints.composition import Runtime

app = command_group(
    "Show or edit the persona files (SOUL.md, MEMORY.md, USER.md) every agent is given.",
    name="persona",
    pretty_exceptions=False,
)

PersonaOption = Annotated[
    str | None,
    typer.Option(
        "--persona",
        "-p",
        help="A named persona (<config dir>/personas/NAME/), or 'none' for no persona "
        "(default: [memory_files] persona_name, else the default files).",
        show_default=False,
    ),
]


class FileKind(StrEnum):
    soul = "soul"
    memory = "memory"
    user = "user"


@contextmanager
def persona_warnings(verbose: bool) -> Iterator[None]:
    """While a command runs, print persona file warnings on stderr with ``--verbose`` and
    keep them quiet otherwise (they are always shown by ``jarvis persona show``)."""
    logger = logging.getLogger("jarvis.persona")
    handler: logging.Handler
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("jarvis: warning: %(message)s"))
    else:
        handler = logging.NullHandler()
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def _configured(ctx: typer.Context, config: Path | None) -> Runtime:
    from jarvis.entrypoints.composition import bootstrap
    from jarvis.entrypoints.settings import load_config

    return bootstrap(load_config(config), container=ctx.obj)


def _table(report: PersonaPromptReport) -> list[str]:
    if report.persona == "none":
        return ["persona: none (no persona sections are added)"]
    name = "default files" if report.persona is None else f"'{report.persona}'"
    lines = [f"persona: {name}"]
    width = max(len(section.kind.name) for section in report.sections)
    for section in report.sections:
        used = f"{section.used_chars:,}" if section.present else "-"
        notes: list[str] = []
        if not section.present:
            notes.append("skipped" if section.warnings else "missing or empty")
        if section.cut_chars or section.unread_bytes:
            cut = f"truncated: {section.cut_chars:,} chars cut"
            if section.unread_bytes:
                cut += f", {section.unread_bytes:,} bytes not read"
            notes.append(cut)
        note = f"  [{'; '.join(notes)}]" if notes else ""
        lines.append(
            f"  {section.kind.name:<{width}}  {used:>7}/{section.budget:,} chars  "
            f"({section.source}){note}"
        )
    lines.extend(f"  warning: {warning}" for warning in report.warnings)
    return lines


def show(
    ctx: typer.Context,
    persona: PersonaOption = None,
    json_output: JsonOption = False,
    config: ConfigOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Print the persona part of the system prompt and each section's budget use.

    It is appended after every agent's own instructions, exactly as shown.
    """

    def body() -> None:
        report = _configured(ctx, config).prompt_builder().report(persona)
        if json_output:
            data = {
                "persona": report.persona,
                "prompt": report.prompt,
                "sections": [
                    {
                        "kind": section.kind.value,
                        "heading": section.heading,
                        "source": section.source,
                        "present": section.present,
                        "used_chars": section.used_chars,
                        "budget": section.budget,
                        "file_chars": section.file_chars,
                        "truncated": section.truncated,
                        "cut_chars": section.cut_chars,
                        "unread_bytes": section.unread_bytes,
                        "warnings": list(section.warnings),
                    }
                    for section in report.sections
                ],
            }
            from jarvis.entrypoints.cli.streams import json_text

            sys.stdout.write(json_text(data) + "\n")  # valid JSON on any stdout
            return
        lines = _table(report)
        if report.prompt:
            lines += ["", "--- appended to every agent's system prompt ---", report.prompt]
        elif report.persona != "none":
            lines += ["", "(no persona files yet: `jarvis persona edit soul` creates SOUL.md)"]
        write_raw("\n".join(lines) + "\n")

    code = guarded(body, verbose=verbose)
    if code:
        raise typer.Exit(code)


def edit(
    ctx: typer.Context,
    which: Annotated[FileKind, typer.Argument(help="Which default file to edit.")],
    config: ConfigOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Open a default persona file in $EDITOR (created empty if needed).

    The change applies to the next conversation; no restart is needed.
    """
    status = 0

    def body() -> None:
        nonlocal status
        from jarvis.entrypoints.cli.persona_edit import edit_default_file, editor_command

        argv = editor_command()
        status = edit_default_file(_configured(ctx, config), which.value, argv)

    code = guarded(body, verbose=verbose)
    if code or status:
        raise typer.Exit(code or 1)


app.command("show")(show)
app.command("edit")(edit)
