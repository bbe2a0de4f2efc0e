"""The behaviour every DocumentReaderPort shows: which files it reads and which it refuses,
and that ``collect`` reads none of them: each is read by ``load``, as it is then.

A subclass provides ``make``: a reader over the given files (relative POSIX paths to
bytes) and the folder they are in; and ``change``: a file of that folder (an absolute
path) given new bytes, or removed (``None``), as another program could between a
``collect`` and a ``load``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

import pytest

from jarvis.domain.knowledge import (
    DocumentBatch,
    DocumentError,
    DocumentRefusal,
    FoundDocument,
    RawDocument,
)
from jarvis.domain.ports import DocumentReaderPort

ReaderT = TypeVar("ReaderT", bound=DocumentReaderPort)
Make = Callable[[Mapping[str, bytes]], tuple[DocumentReaderPort, str]]
Change = Callable[[DocumentReaderPort, str, bytes | None], None]

FILES: Mapping[str, bytes] = {
    "notes.md": b"# Notes\n\nThe build uses make.\n",
    "code.py": b"def main() -> None:\n    pass\n",
    "sub/deep.md": b"Deep text.\n",
    "sub/image.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)),
    "sub/.env": b"API_KEY=hunter2\n",
    "id_rsa": b"-----BEGIN OPENSSH PRIVATE KEY-----\n",
}
BINARY = b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256))


def loaded(
    reader: DocumentReaderPort, batch: DocumentBatch
) -> tuple[list[RawDocument], list[DocumentRefusal]]:
    """Every found file loaded, as an add does: what was read, and every refusal."""
    documents: list[RawDocument] = []
    refused = list(batch.refused)
    for found in batch.found:
        document = reader.load(found)
        if isinstance(document, DocumentRefusal):
            refused.append(document)
        else:
            documents.append(document)
    return documents, refused


class DocumentReaderContract(Generic[ReaderT]):
    @pytest.fixture
    def make(self) -> Make:
        raise NotImplementedError("subclass must provide the `make` fixture")

    @pytest.fixture
    def change(self) -> Change:
        raise NotImplementedError("subclass must provide the `change` fixture")

    def test_a_named_file_is_found_with_its_kind_and_loaded(self, make: Make) -> None:
        reader, root = make(FILES)
        batch = reader.collect([f"{root}/notes.md"], pattern="*", recursive=False)
        named = FoundDocument(source=f"{root}/notes.md", kind="markdown", named=f"{root}/notes.md")
        assert batch == DocumentBatch(found=(named,), refused=())
        assert reader.load(named) == RawDocument(
            source=f"{root}/notes.md", data=FILES["notes.md"], kind="markdown"
        )

    def test_a_folder_is_found_flat_or_recursively(self, make: Make) -> None:
        reader, root = make(FILES)
        flat = reader.collect([root], pattern="*", recursive=False)
        assert sorted(d.source for d in flat.found) == [f"{root}/code.py", f"{root}/notes.md"]
        deep = reader.collect([root], pattern="*.md", recursive=True)
        assert sorted(d.source for d in deep.found) == [
            f"{root}/notes.md",
            f"{root}/sub/deep.md",
        ]
        assert all(d.named is None for d in deep.found)
        documents, refused = loaded(reader, deep)
        assert sorted((d.source, d.data) for d in documents) == [
            (f"{root}/notes.md", FILES["notes.md"]),
            (f"{root}/sub/deep.md", FILES["sub/deep.md"]),
        ]
        assert refused == []

    def test_secrets_and_binaries_are_refused(self, make: Make) -> None:
        reader, root = make(FILES)
        batch = reader.collect([root], pattern="*", recursive=True)
        found = {d.source for d in batch.found}
        assert f"{root}/id_rsa" not in found  # a secret is known by its name: never read
        assert f"{root}/sub/.env" not in found
        documents, refusals = loaded(reader, batch)
        assert sorted(d.source for d in documents) == [
            f"{root}/code.py",
            f"{root}/notes.md",
            f"{root}/sub/deep.md",
        ]
        refused = {r.source: r for r in refusals}
        assert "secret" in refused[f"{root}/id_rsa"].reason
        assert "binary" in refused[f"{root}/sub/image.png"].reason
        assert not refused[f"{root}/id_rsa"].explicit
        assert not refused[f"{root}/sub/image.png"].explicit

    def test_a_named_secret_or_missing_file_is_an_explicit_refusal(self, make: Make) -> None:
        reader, root = make(FILES)
        batch = reader.collect(
            [f"{root}/id_rsa", f"{root}/missing.md"], pattern="*", recursive=False
        )
        assert batch.found == ()
        assert [(r.source, r.explicit) for r in batch.refused] == [
            (f"{root}/id_rsa", True),
            (f"{root}/missing.md", True),
        ]
        assert "no such" in batch.refused[1].reason

    def test_a_named_binary_is_an_explicit_refusal_under_its_name(self, make: Make) -> None:
        reader, root = make(FILES)
        given = f"{root}/sub/../sub/image.png"
        documents, refused = loaded(reader, reader.collect([given], pattern="*", recursive=False))
        assert documents == []
        assert [(r.source, r.explicit) for r in refused] == [(given, True)]
        assert "binary" in refused[0].reason

    def test_collect_reads_nothing_load_reads_the_file_as_it_is_then(
        self, make: Make, change: Change
    ) -> None:
        reader, root = make(FILES)
        batch = reader.collect([root], pattern="*", recursive=True)
        named = reader.collect([f"{root}/notes.md"], pattern="*", recursive=False)
        change(reader, f"{root}/notes.md", b"# Notes\n\nRewritten since.\n")
        change(reader, f"{root}/code.py", BINARY)
        change(reader, f"{root}/sub/deep.md", None)
        documents, refusals = loaded(reader, batch)
        assert [(d.source, d.data) for d in documents] == [
            (f"{root}/notes.md", b"# Notes\n\nRewritten since.\n")
        ]
        refused = {r.source: r for r in refusals}
        assert "binary" in refused[f"{root}/code.py"].reason
        assert not refused[f"{root}/code.py"].explicit
        assert not refused[f"{root}/sub/deep.md"].explicit  # gone since: refused, not read
        change(reader, f"{root}/notes.md", BINARY)
        [found] = named.found
        refusal = reader.load(found)
        assert isinstance(refusal, DocumentRefusal)
        assert (refusal.source, refusal.explicit) == (f"{root}/notes.md", True)
        assert "binary" in refusal.reason

    def test_read_again_or_gone(self, make: Make) -> None:
        reader, root = make(FILES)
        again = reader.read(f"{root}/notes.md")
        assert again is not None
        assert again.data == FILES["notes.md"]
        assert reader.read(f"{root}/gone.md") is None
        with pytest.raises(DocumentError):
            reader.read(f"{root}/sub/image.png")
