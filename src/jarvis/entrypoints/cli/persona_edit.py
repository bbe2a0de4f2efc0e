"""``jarvis persona edit``: a default persona file opened in ``$EDITOR`` (created empty if
needed), and what of it the next prompt takes.

Loaded when the command runs: ``jarvis --help`` imports every command module
(:mod:`jarvis.entrypoints.cli.persona` among them), not this one.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

from jarvis.domain.errors import ConfigurationError, JarvisError
from jarvis.domain.ports import PersonaFile

if TYPE_CHECKING:
    from jarvis.entrypoints.composition import Runtime

FALLBACK_EDITORS = ("vi", "nano")


def editor_command(env: dict[str, str] | None = None) -> list[str]:
    """``$EDITOR``, else ``$VISUAL``, else the first of vi / nano on the PATH, as argv."""
    env = dict(os.environ) if env is None else env
    for variable in ("EDITOR", "VISUAL"):
        value = env.get(variable, "").strip()
        if not value:
            continue
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise ConfigurationError(f"${variable} cannot be parsed: {exc}.") from None
        if shutil.which(argv[0], path=env.get("PATH")) is None:
            raise ConfigurationError(
                f"The editor '{argv[0]}' (from ${variable}) was not found.",
                hint=f"Set ${variable} to an installed editor, e.g. export {variable}=nano",
            )
        return argv
    for fallback in FALLBACK_EDITORS:
        found = shutil.which(fallback, path=env.get("PATH"))
        if found:
            return [found]
    raise ConfigurationError(
        "No editor found: $EDITOR and $VISUAL are not set, and neither vi nor nano is installed.",
        hint="Set $EDITOR, e.g. export EDITOR=nano",
    )


def edit_default_file(runtime: Runtime, which: str, editor: list[str]) -> int:
    """Open the default persona file ``which`` (soul, memory or user) with ``editor``; the
    editor's exit status. After a clean exit, stderr says how much of the file the prompt
    takes (and whether it is truncated there)."""
    path = runtime.persona_store().ensure(PersonaFile(which))
    try:
        status = subprocess.run([*editor, path], check=False).returncode
    except OSError as exc:
        raise JarvisError(f"Cannot start the editor {editor[0]}: {exc}.") from None
    if status:
        sys.stderr.write(f"jarvis: the editor exited with status {status}\n")
        return status
    report = runtime.prompt_builder().report_for(None)
    for section in report.sections:
        if section.kind.value == which and section.source == path:
            used = f"{section.used_chars:,}/{section.budget:,} chars"
            cut = ", truncated in the prompt" if section.truncated else ""
            sys.stderr.write(f"jarvis: {path}: {used}{cut}\n")
    return status
