"""``Jarvis().memory``: the knowledge base from Python, as ``jarvis memory`` on the command
line. Each method has an ``a``-prefixed coroutine twin for callers on their own loop; the
plain ones run on the instance's loop thread, like :meth:`Jarvis.ask`."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from os import PathLike, fspath
from typing import TYPE_CHECKING, Concatenate, ParamSpec, Protocol, TypeVar

if TYPE_CHECKING:
    from jarvis.application.config import JarvisConfig
    from jarvis.application.knowledge import AddReport, KnowledgeBase
    from jarvis.domain.knowledge import KnowledgeStats, SearchMode, SourceInfo
    from jarvis.domain.run.contract import MemoryHit
    from jarvis.entrypoints.composition import Runtime

T = TypeVar("T")
P = ParamSpec("P")


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

    async def asearch(
        self, query: str, *, top_k: int = 5, mode: SearchMode = "hybrid"
    ) -> list[MemoryHit]:
        """The best chunks for ``query`` (``hit.citation`` is ``[source:line]``)."""
        return await self._knowledge().search(query, top_k=top_k, mode=mode)

    async def aremove(self, source: str) -> bool:
        return await self._knowledge().remove(source)

    async def astats(self) -> KnowledgeStats:
        return await self._knowledge().stats()

    async def asources(self) -> list[SourceInfo]:
        return await self._knowledge().sources()

    async def async_sync(self) -> AddReport:
        """Forget deleted files, re-index changed ones (``async`` is a keyword: hence the name)."""
        return await self._knowledge().sync()

    add = _blocking(aadd)
    search = _blocking(asearch)
    remove = _blocking(aremove)
    stats = _blocking(astats)
    sources = _blocking(asources)
    sync = _blocking(async_sync)
