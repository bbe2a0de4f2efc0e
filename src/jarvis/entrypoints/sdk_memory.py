"""``Jarvis().memory``: the knowledge base from Python, as ``jarvis memory`` on the command
line. Each method has an ``a``-prefixed coroutine twin for callers on their own loop; the
plain ones run on the instance's loop thread, like :meth:`Jarvis.ask`.

``index(path, chunk_size=, chunk_overlap=)`` is OpenJarvis's name for adding a file or a
folder (recursively), with its result shape (``{"chunks": n, "doc_ids": [...], "path": ...}``).
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Callable, Coroutine, Sequence
from os import PathLike, fspath
from typing import TYPE_CHECKING, Concatenate, Final, ParamSpec, Protocol, TypeVar

from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.sdk_memory_results import MemoryStats, SearchHit

if TYPE_CHECKING:
    from jarvis.application.config import JarvisConfig
    from jarvis.application.knowledge import AddReport, KnowledgeBase
    from jarvis.domain.json_types import JSONObject, JSONValue
    from jarvis.domain.knowledge import SearchMode, SourceInfo
    from jarvis.entrypoints.composition import Runtime

T = TypeVar("T")
P = ParamSpec("P")

OPENJARVIS_CHUNKING: Final = (512, 64)
"""OpenJarvis's ``index`` defaults (``chunk_size``, ``chunk_overlap``, in words)."""


class _Owner(Protocol):
    """What the memory uses of its ``Jarvis`` (not imported: ``sdk`` imports this)."""

    config: JarvisConfig
    _runtime: Runtime

    def _call(self, coro: Coroutine[object, object, T]) -> T: ...


def _blocking(
    method: Callable[Concatenate[Memory, P], Coroutine[object, object, T]],
) -> Callable[Concatenate[Memory, P], T]:
    """The synchronous twin of a coroutine method: the same arguments, run on the
    ``Jarvis`` instance's loop thread (written once for every method of :class:`Memory`)."""

    def run(self: Memory, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._owner._call(method(self, *args, **kwargs))

    run.__doc__ = method.__doc__
    return run


class Memory:
    """``j.memory.add("notes/", recursive=True)``, ``j.memory.search("...")``..."""

    def __init__(self, owner: _Owner) -> None:
        self._owner = owner
        self._base: KnowledgeBase | None = None

    def _knowledge(self) -> KnowledgeBase:
        if self._base is None:
            self._base = self._owner._runtime.knowledge_base()
        return self._base

    async def aadd(
        self,
        paths: str | PathLike[str] | Sequence[str | PathLike[str]] = (),
        *,
        glob: str = "*",
        recursive: bool = False,
        url: str | None = None,
    ) -> AddReport:
        """Index files or folders (and the page at ``url``); unchanged ones cost nothing.
        A named file that cannot be added is in the report's ``refused``."""
        chosen = [paths] if isinstance(paths, (str, PathLike)) else list(paths)
        base = self._knowledge()
        report = await base.add([fspath(p) for p in chosen], pattern=glob, recursive=recursive)
        if url is not None:
            extra = await base.add_url(url)
            report.added += extra.added
            report.updated += extra.updated
            report.unchanged += extra.unchanged
            report.refused += extra.refused
            report.chunks += extra.chunks
        return report

    async def aindex(
        self, path: str | PathLike[str], *, chunk_size: int = 512, chunk_overlap: int = 64
    ) -> JSONObject:
        """OpenJarvis's ``index``: add the file, or the folder with its subfolders, and say
        ``{"chunks": n, "doc_ids": [...], "path": path, "unchanged": [...]}``.

        ``chunks`` counts the path's chunks in memory after the call (unchanged files'
        included, as OpenJarvis re-chunks them); ``doc_ids`` are the sources this call
        indexed, which :meth:`remove` takes (jarvis gives chunks no ids of their own).
        Chunks are cut by ``[memory] chunk_chars`` / ``chunk_overlap`` (characters, at
        headings and paragraphs first) for every source alike, so that :meth:`sync` keeps
        them: ``chunk_size`` / ``chunk_overlap`` (OpenJarvis's word counts) are checked but
        not applied, and a warning says so when they are not OpenJarvis's defaults. A
        missing path is a ``FileNotFoundError``, as in OpenJarvis; a file that cannot be
        read a ``ConfigurationError`` saying why."""
        _check_chunking(chunk_size, chunk_overlap)
        if not await asyncio.to_thread(os.path.lexists, path):
            raise FileNotFoundError(f"Path not found: {fspath(path)}")
        report = await self.aadd(path, recursive=True)
        named = [r for r in report.refused if r.explicit]
        if named:
            raise ConfigurationError(
                "Cannot index " + "; ".join(f"{r.source}: {r.reason}" for r in named)
            )
        chunks = report.chunks
        if report.unchanged:
            unchanged = set(report.unchanged)
            chunks += sum(i.chunks for i in await self.asources() if i.source in unchanged)
        indexed: list[JSONValue] = [*report.added, *report.updated]
        kept: list[JSONValue] = list(report.unchanged)
        return {"chunks": chunks, "doc_ids": indexed, "path": fspath(path), "unchanged": kept}

    async def asearch(
        self, query: str, *, top_k: int = 5, mode: SearchMode = "hybrid"
    ) -> list[SearchHit]:
        """The best chunks for ``query`` (``hit.citation`` is ``[source:line]``; a hit
        reads as OpenJarvis's mapping too: ``hit["score"]``)."""
        hits = await self._knowledge().search(query, top_k=top_k, mode=mode)
        return [SearchHit.of(hit) for hit in hits]

    async def aremove(self, source: str) -> bool:
        return await self._knowledge().remove(source)

    async def astats(self) -> MemoryStats:
        """Sources, chunks, sizes (read as OpenJarvis's mapping too: ``stats["count"]``)."""
        return MemoryStats.of(await self._knowledge().stats())

    async def asources(self) -> list[SourceInfo]:
        return await self._knowledge().sources()

    async def async_sync(self) -> AddReport:
        """Forget deleted files, re-index changed ones (``async`` is a keyword: hence the name)."""
        return await self._knowledge().sync()

    add = _blocking(aadd)
    index = _blocking(aindex)
    search = _blocking(asearch)
    remove = _blocking(aremove)
    stats = _blocking(astats)
    sources = _blocking(asources)
    sync = _blocking(async_sync)


def _check_chunking(chunk_size: object, chunk_overlap: object) -> None:
    """OpenJarvis's chunk settings: whole numbers, the overlap smaller than the chunk; a
    warning when they are not its defaults (jarvis's ``[memory]`` settings apply)."""
    for name, value in (("chunk_size", chunk_size), ("chunk_overlap", chunk_overlap)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigurationError(f"{name} must be a whole number ≥ 0, not {value!r}.")
    assert isinstance(chunk_size, int)
    assert isinstance(chunk_overlap, int)
    if chunk_size == 0 or chunk_overlap >= chunk_size:
        raise ConfigurationError(
            f"chunk_overlap ({chunk_overlap}) must be smaller than chunk_size ({chunk_size})."
        )
    if (chunk_size, chunk_overlap) != OPENJARVIS_CHUNKING:
        warnings.warn(
            "memory.index(): chunk_size and chunk_overlap are not applied; chunks are cut by "
            "[memory] chunk_chars and chunk_overlap (characters), the same for every source.",
            UserWarning,
            stacklevel=2,
        )
