"""``jarvis memory``: fill the knowledge base the ``retrieval`` tool and ``--memory`` read.

``add`` indexes files, folders (``--glob``, ``--recursive``) or a web page (``--url``);
``search`` queries it (keyword, semantic or hybrid); ``list``, ``remove``, ``stats``;
``sync`` prunes deleted files and re-indexes changed ones. A file the user named that
cannot be added is an error (exit 2, after the others are added); a file found in a folder
and skipped (binary, secret, link, too large) is counted, and named with ``--verbose``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.cli.command_group import command_group
from jarvis.entrypoints.cli.errors import EXIT_USAGE, guarded, write_stderr
from jarvis.entrypoints.cli.options import ConfigOption, JsonOption, VerboseOption
from jarvis.entrypoints.cli.output import exit_with, run_async, write_json, write_line

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from jarvis.application.knowledge import AddReport, KnowledgeBase
    from jarvis.domain.knowledge import KnowledgeStats, SourceInfo
    from jarvis.domain.run.contract import MemoryHit

app = command_group(
    "Fill and search the knowledge base (files, folders, web pages) agents can use.",
    name="memory",
    pretty_exceptions=False,
)


def _base(ctx: typer.Context, config: Path | None) -> KnowledgeBase:
    from jarvis.entrypoints.composition import bootstrap
    from jarvis.entrypoints.settings import load_config

    return bootstrap(load_config(config), container=ctx.obj).knowledge_base()


def _summary(report: AddReport, *, json_output: bool, verbose: bool) -> int:
    if json_output:
        write_json(
            {
                "added": report.added,
                "updated": report.updated,
                "unchanged": report.unchanged,
                "removed": report.removed,
                "chunks": report.chunks,
                "refused": [
                    {"source": r.source, "reason": r.reason, "named": r.explicit}
                    for r in report.refused
                ],
            }
        )
    else:
        parts = [
            f"{len(report.added)} added",
            f"{len(report.updated)} updated",
            f"{len(report.unchanged)} unchanged",
        ]
        if report.removed:
            parts.append(f"{len(report.removed)} removed")
        skipped = [r for r in report.refused if not r.explicit]
        if skipped:
            parts.append(f"{len(skipped)} skipped" + ("" if verbose else " (--verbose names them)"))
        write_line(", ".join(parts) + f"; {report.chunks} chunks indexed.")
    for refusal in report.refused:
        if refusal.explicit:
            write_stderr(f"jarvis: {refusal.source} was not added: it is {refusal.reason}.\n")
        elif verbose:
            write_stderr(f"jarvis: skipped {refusal.source}: {refusal.reason}.\n")
    return EXIT_USAGE if report.failed else 0


@app.command("add")
def add(
    ctx: typer.Context,
    paths: Annotated[
        list[str] | None,
        typer.Argument(help="Files or folders to index.", show_default=False),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(
            "--url", help="Index this web page (public addresses only).", show_default=False
        ),
    ] = None,
    glob: Annotated[
        str, typer.Option("--glob", help="In folders, only files whose name matches.")
    ] = "*",
    recursive: Annotated[
        bool, typer.Option("--recursive", "-r", help="Index folders' subfolders too.")
    ] = False,
    no_embed: Annotated[
        bool,
        typer.Option(
            "--no-embed",
            help="Index words only (fast: no sentence embeddings, so no semantic search).",
        ),
    ] = False,
    json_output: JsonOption = False,
    config: ConfigOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Index files, folders or a web page (unchanged ones cost nothing)."""
    status = 0

    def body() -> None:
        nonlocal status
        if not paths and not url:
            raise ConfigurationError(
                "Name files or folders to add, or --url URL.",
                hint="e.g. jarvis memory add notes/ --glob '*.md' --recursive",
            )
        base = _base(ctx, config)
        base.embed = base.embed and not no_embed
        report = run_async(base.add(paths or [], pattern=glob, recursive=recursive))
        if url:
            extra = run_async(base.add_url(url))
            report.added += extra.added
            report.updated += extra.updated
            report.unchanged += extra.unchanged
            report.refused += extra.refused
            report.chunks += extra.chunks
        status = _summary(report, json_output=json_output, verbose=verbose)

    exit_with(guarded(body, verbose=verbose) or status)


def _hit_json(hit: MemoryHit) -> dict[str, object]:
    return {
        "source": hit.source,
        "line": hit.line,
        "end_line": hit.end_line,
        "citation": hit.citation,
        "score": hit.score,
        "text": hit.content,
    }


@app.command("search")
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Words or a question.")],
    top_k: Annotated[int, typer.Option("-k", "--top-k", min=1, max=100, help="How many hits.")] = 5,
    mode: Annotated[
        str,
        typer.Option("--mode", help="keyword (bm25), semantic (embeddings) or hybrid (both)."),
    ] = "hybrid",
    json_output: JsonOption = False,
    config: ConfigOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Search the knowledge base; each hit is cited as [source:line]."""

    def body() -> None:
        from jarvis.application.knowledge import SEARCH_MODES

        chosen = next((m for m in SEARCH_MODES if m == mode), None)
        if chosen is None:
            raise ConfigurationError(
                f"Unknown search mode {mode!r}.", hint="Use keyword, semantic or hybrid."
            )
        hits = run_async(_base(ctx, config).search(query, top_k=top_k, mode=chosen))
        if json_output:
            write_json([_hit_json(hit) for hit in hits])
            return
        if not hits:
            write_line("No matches.")
            return
        blocks = [
            f"{hit.citation} (score {hit.score:.4f})\n" + _indent(hit.content) for hit in hits
        ]
        write_line("\n\n".join(blocks))

    exit_with(guarded(body, verbose=verbose))


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def _on_base(
    ctx: typer.Context,
    config: Path | None,
    action: Callable[[KnowledgeBase], int | None],
    verbose: bool,
) -> None:
    """Run ``action`` on the knowledge base, guarded: an error's code, else the status
    ``action`` returned (``None``: 0), is the command's exit code."""
    status = 0

    def body() -> None:
        nonlocal status
        status = action(_base(ctx, config)) or 0

    exit_with(guarded(body, verbose=verbose) or status)


def _write_sources(sources: list[SourceInfo], json_output: bool) -> None:
    if json_output:
        write_json(
            [
                {
                    "source": s.source,
                    "kind": s.kind,
                    "chunks": s.chunks,
                    "size_bytes": s.size_bytes,
                    "added_at": s.added_at,
                }
                for s in sources
            ]
        )
        return
    if not sources:
        write_line("The knowledge base is empty. Add files with `jarvis memory add PATH`.")
        return
    write_line("\n".join(f"{s.chunks:>6}  {s.kind:<8}  {s.source}" for s in sources))


@app.command("list")
def list_sources(
    ctx: typer.Context,
    json_output: JsonOption = False,
    config: ConfigOption = None,
    verbose: VerboseOption = False,
) -> None:
    """List the indexed sources with their chunk counts."""
    _on_base(ctx, config, lambda b: _write_sources(run_async(b.sources()), json_output), verbose)


@app.command("remove")
def remove(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="A source as `jarvis memory list` shows it.")],
    config: ConfigOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Forget one source and its chunks."""

    def body() -> None:
        import os

        base = _base(ctx, config)
        removed = run_async(base.remove(source))
        if not removed and "://" not in source:
            removed = run_async(base.remove(os.path.abspath(os.path.expanduser(source))))
        if not removed:
            raise ConfigurationError(
                f"{source} is not in the knowledge base.", hint="`jarvis memory list` lists it."
            )
        write_line(f"Removed {source}.")

    exit_with(guarded(body, verbose=verbose))


def _write_stats(figures: KnowledgeStats, json_output: bool) -> None:
    data = {
        "sources": figures.sources,
        "chunks": figures.chunks,
        "embedded_chunks": figures.embedded_chunks,
        "text_bytes": figures.text_bytes,
        "database_bytes": figures.database_bytes,
        "location": figures.location,
        "embedding_model": figures.embedding_model,
    }
    if json_output:
        write_json(data)
        return
    write_line("\n".join(f"{key}: {value}" for key, value in data.items()))


@app.command("stats")
def stats(
    ctx: typer.Context,
    json_output: JsonOption = False,
    config: ConfigOption = None,
    verbose: VerboseOption = False,
) -> None:
    """How many sources and chunks are indexed, and where."""
    _on_base(ctx, config, lambda b: _write_stats(run_async(b.stats()), json_output), verbose)


@app.command("sync")
def sync(
    ctx: typer.Context,
    json_output: JsonOption = False,
    config: ConfigOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Forget deleted files and re-index changed ones."""

    def synced(base: KnowledgeBase) -> int:
        return _summary(run_async(base.sync()), json_output=json_output, verbose=verbose)

    _on_base(ctx, config, synced, verbose)
