"""Options shared by several commands, and how a command gets its runtime.

Commands import only typer at module level; configuration, the container and the engines
are imported inside :func:`open_runtime` (which calls
:func:`~jarvis.entrypoints.bootstrap.bootstrap`), when a command actually runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from jarvis.application.engine_names import EngineName

if TYPE_CHECKING:
    from jarvis.entrypoints.runtime import Runtime


EngineOption = Annotated[
    EngineName | None,
    typer.Option(
        "--engine",
        "-e",
        help="Engine to use (default: [engine] name, else auto: a local Ollama, "
        "else the embedded model).",
        show_default=False,
    ),
]
BaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help="URL of the engine's server (without --engine: an OpenAI-compatible server).",
        show_default=False,
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model", "-m", help="Model name (default: [engine] model, else the engine's first)."
    ),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Config file to read instead of <config dir>/config.toml.",
        show_default=False,
        dir_okay=False,
    ),
]
VerboseOption = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="Say which engine is used and why; tracebacks on errors."),
]
NoProjectInstructionsOption = Annotated[
    bool,
    typer.Option(
        "--no-project-instructions",
        help="Leave the AGENTS.md files of this directory and its parents out of the prompt.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def stderr_line(line: str) -> None:
    """A notice line on stderr (``--verbose``), URL credentials masked."""
    from jarvis.entrypoints.cli.errors import write_stderr

    write_stderr(line.rstrip("\n") + "\n")


def open_runtime(
    ctx: typer.Context,
    *,
    config: Path | None,
    engine: EngineName | None,
    base_url: str | None,
    model: str | None,
    verbose: bool,
) -> Runtime:
    """The runtime for one command, from its options.

    The container is ``ctx.obj`` when the caller provided one (tests pass a container
    whose providers are overridden with fakes), else a fresh one.
    """
    from jarvis.entrypoints.bootstrap import bootstrap
    from jarvis.entrypoints.settings import EngineOverrides, load_config

    settings = load_config(
        config, overrides=EngineOverrides(engine=engine, base_url=base_url, model=model)
    )
    return bootstrap(settings, container=ctx.obj, notice=stderr_line if verbose else None)
