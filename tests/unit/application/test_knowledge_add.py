"""``KnowledgeBase.add`` holds one file's bytes at a time: the folder is found without
reading it, then each file is read just before it is indexed and dropped after."""

from __future__ import annotations

import weakref
from collections.abc import Sequence

from jarvis.application.knowledge import KnowledgeBase
from jarvis.domain.knowledge import (
    Chunk,
    ChunkVectors,
    DocumentBatch,
    DocumentRefusal,
    FoundDocument,
    RawDocument,
    SourceInfo,
)
from jarvis.testing import InMemoryDocuments, InMemoryKnowledgeStore

FILES = 200


async def decoded(document: RawDocument) -> str:
    return document.data.decode()


class _Followed(RawDocument):
    """A document a weak reference can follow, to see when the base lets it go."""

    __slots__ = ("__weakref__",)


class _WatchedReader:
    """The in-memory reader, noting each read in ``events`` and how many documents it
    handed out were still alive whenever it was asked for the next."""

    def __init__(self, files: dict[str, bytes], events: list[str]) -> None:
        self.inner = InMemoryDocuments(files)
        self.events = events
        self.handed: list[weakref.ref[RawDocument]] = []
        self.most_alive_at_a_read = 0
        self.batch: DocumentBatch | None = None

    def collect(self, paths: Sequence[str], *, pattern: str, recursive: bool) -> DocumentBatch:
        self.batch = self.inner.collect(paths, pattern=pattern, recursive=recursive)
        return self.batch

    def load(self, found: FoundDocument) -> RawDocument | DocumentRefusal:
        alive = sum(1 for handed in self.handed if handed() is not None)
        self.most_alive_at_a_read = max(self.most_alive_at_a_read, alive)
        self.events.append(f"read {found.source}")
        document = self.inner.load(found)
        if isinstance(document, DocumentRefusal):
            return document
        followed = _Followed(source=document.source, data=document.data, kind=document.kind)
        self.handed.append(weakref.ref(followed))
        return followed

    def read(self, source: str) -> RawDocument | None:
        return self.inner.read(source)


class _WatchedStore(InMemoryKnowledgeStore):
    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    async def replace_source(
        self, info: SourceInfo, chunks: Sequence[Chunk], vectors: ChunkVectors | None
    ) -> None:
        self.events.append(f"index {info.source}")
        await super().replace_source(info, chunks, vectors)


async def test_a_folder_is_read_one_file_at_a_time_each_just_before_it_is_indexed() -> None:
    names = [f"/docs/note{n:03}.md" for n in range(FILES)]
    files = {name: f"# {name}\n\n{'word ' * 200}\n".encode() for name in names}
    events: list[str] = []
    reader = _WatchedReader(files, events)
    base = KnowledgeBase(_WatchedStore(events), reader, extract=decoded)

    report = await base.add(["/docs"], pattern="*.md")

    assert report.added == names
    assert reader.batch is not None
    assert all(not hasattr(found, "data") for found in reader.batch.found)  # collect read none
    assert events == [event for name in names for event in (f"read {name}", f"index {name}")]
    assert len(reader.handed) == FILES
    assert reader.most_alive_at_a_read == 0  # the one before was dropped once indexed
    assert all(handed() is None for handed in reader.handed)


async def test_a_file_refused_when_read_is_reported_and_the_rest_added() -> None:
    """A file that turned binary, or was removed, after the folder was collected is refused
    when its turn comes; a named one is an error under the name the user gave."""
    files = {
        "/docs/a.md": b"alpha\n",
        "/docs/b.md": b"beta\n",
        "/docs/c.md": b"gamma\n",
        "/named.md": b"named\n",
    }
    reader = InMemoryDocuments(files)
    base = KnowledgeBase(InMemoryKnowledgeStore(), reader, extract=decoded)
    collect = reader.collect

    def collect_then_change(
        paths: Sequence[str], *, pattern: str, recursive: bool
    ) -> DocumentBatch:
        batch = collect(paths, pattern=pattern, recursive=recursive)
        reader.files["/docs/b.md"] = b"\x00binary"
        reader.files["/named.md"] = b"\x00binary"
        del reader.files["/docs/c.md"]
        return batch

    reader.collect = collect_then_change  # type: ignore[method-assign]
    report = await base.add(["/docs", "/named.md"])
    assert report.added == ["/docs/a.md"]
    assert [(r.source, r.reason, r.explicit) for r in report.refused] == [
        ("/docs/b.md", "a binary file", False),
        ("/docs/c.md", "no such file or folder", False),
        ("/named.md", "a binary file", True),
    ]
    assert report.failed
