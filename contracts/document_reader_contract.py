"""The behaviour every DocumentReaderPort shows: which files it reads and which it refuses.

A subclass provides ``make``: a reader over the given files (relative POSIX paths to
bytes) and the folder they are in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

import pytest

from jarvis.domain.knowledge import DocumentError
from jarvis.domain.ports import DocumentReaderPort

ReaderT = TypeVar("ReaderT", bound=DocumentReaderPort)
Make = Callable[[Mapping[str, bytes]], tuple[DocumentReaderPort, str]]

FILES: Mapping[str, bytes] = {
    "notes.md": b"# Notes\n\nThe build uses make.\n",
    "code.py": b"def main() -> None:\n    pass\n",
    "sub/deep.md": b"Deep text.\n",
    "sub/image.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)),
    "sub/.env": b"API_KEY=hunter2\n",
    "id_rsa": b"-----BEGIN OPENSSH PRIVATE KEY-----\n",
}


class DocumentReaderContract(Generic[ReaderT]):
    @pytest.fixture
    def make(self) -> Make:
        raise NotImplementedError("subclass must provide the `make` fixture")

    def test_a_named_file_is_read_with_its_kind(self, make: Make) -> None:
        reader, root = make(FILES)
        batch = reader.collect([f"{root}/notes.md"], pattern="*", recursive=False)
        assert [(d.source, d.kind, d.data, d.named) for d in batch.documents] == [
            (f"{root}/notes.md", "markdown", FILES["notes.md"], True)
        ]
        assert batch.refused == ()

    def test_a_folder_is_read_flat_or_recursively(self, make: Make) -> None:
        reader, root = make(FILES)
        flat = reader.collect([root], pattern="*", recursive=False)
        assert sorted(d.source for d in flat.documents) == [f"{root}/code.py", f"{root}/notes.md"]
        deep = reader.collect([root], pattern="*.md", recursive=True)
        assert sorted(d.source for d in deep.documents) == [
            f"{root}/notes.md",
            f"{root}/sub/deep.md",
        ]
        assert not any(d.named for d in deep.documents)

    def test_secrets_and_binaries_are_refused(self, make: Make) -> None:
        reader, root = make(FILES)
        batch = reader.collect([root], pattern="*", recursive=True)
        sources = {d.source for d in batch.documents}
        assert f"{root}/id_rsa" not in sources
        assert f"{root}/sub/image.png" not in sources
        assert f"{root}/sub/.env" not in sources
        refused = {r.source: r for r in batch.refused}
        assert "secret" in refused[f"{root}/id_rsa"].reason
        assert "binary" in refused[f"{root}/sub/image.png"].reason
        assert not refused[f"{root}/id_rsa"].explicit

    def test_a_named_secret_or_missing_file_is_an_explicit_refusal(self, make: Make) -> None:
        reader, root = make(FILES)
        batch = reader.collect(
            [f"{root}/id_rsa", f"{root}/missing.md"], pattern="*", recursive=False
        )
        assert batch.documents == ()
        assert [(r.source, r.explicit) for r in batch.refused] == [
            (f"{root}/id_rsa", True),
            (f"{root}/missing.md", True),
        ]
        assert "no such" in batch.refused[1].reason

    def test_read_again_or_gone(self, make: Make) -> None:
        reader, root = make(FILES)
        again = reader.read(f"{root}/notes.md")
        assert again is not None
        assert again.data == FILES["notes.md"]
        assert reader.read(f"{root}/gone.md") is None
        with pytest.raises(DocumentError):
            reader.read(f"{root}/sub/image.png")
