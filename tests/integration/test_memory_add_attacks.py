"""What ``memory add`` reads, attacked as another user of the machine would: the user's own
key hard-linked into a folder they add, a folder they cannot list, a symlink swapped in
(before a read, or between the walk that found a file and its read)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from jarvis.adapters.filesystem_tools.document_files import DocumentFiles
from jarvis.application.knowledge import KnowledgeBase
from jarvis.domain.knowledge import DocumentBatch, DocumentRefusal, FoundDocument, RawDocument
from jarvis.domain.ports import KnowledgeStorePort
from jarvis.testing import InMemoryKnowledgeStore
from tests.integration.test_file_read_attacks import _SOURCE, _as_user, _interpreter_for
from tests.support.users import throwaway_user

KEY = "-----BEGIN OPENSSH PRIVATE KEY----- not for the model"

_AS_USER = """
import json, os, sys
from jarvis.adapters.filesystem_tools.document_files import DocumentFiles
from jarvis.domain.knowledge import RawDocument
home, locked = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(home, ".ssh"), mode=0o700)
key = os.path.join(home, ".ssh", "id_ed25519")
with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
    handle.write(sys.argv[3])
docs = os.path.join(home, "docs")
os.mkdir(docs)
os.link(key, os.path.join(docs, "notes.txt"))
with open(os.path.join(docs, "plain.md"), "w") as handle:
    handle.write("# Plain\\n\\ntext\\n")
reader = DocumentFiles(protected=[])
batch = reader.collect([docs, locked], pattern="*", recursive=True)
loaded = [reader.load(found) for found in batch.found]
read = [d for d in loaded if isinstance(d, RawDocument)]
refused = [*batch.refused, *(d for d in loaded if not isinstance(d, RawDocument))]
print(json.dumps({
    "uid": os.getuid(),
    "read": {d.source: d.data.decode() for d in read},
    "refused": {r.source: [r.reason, r.explicit] for r in refused},
}))
"""


@pytest.fixture
def ordinary_user() -> Iterator[tuple[int, int]]:
    if os.geteuid() != 0:
        yield os.getuid(), os.getgid()
        return
    with throwaway_user("jvma") as ids:
        yield ids


def test_an_ordinary_user_cannot_add_a_linked_key_or_a_locked_folder(
    ordinary_user: tuple[int, int],
) -> None:
    uid, gid = ordinary_user
    home = tempfile.mkdtemp(prefix="jarvis-ma-")
    locked = tempfile.mkdtemp(prefix="jarvis-ma-locked-")  # root's, mode 0700
    Path(locked, "private.md").write_text("root's notes\n")
    try:
        os.chmod(home, 0o755)
        os.chown(home, uid, gid)
        done = _as_user(
            [_interpreter_for(uid, gid), "-c", _AS_USER, home, locked, KEY],
            uid,
            gid,
            env={"PYTHONPATH": _SOURCE},
        )
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(locked, ignore_errors=True)
    assert report["uid"] == uid
    docs = os.path.join(home, "docs")
    assert list(report["read"]) == [os.path.join(docs, "plain.md")]
    assert KEY not in json.dumps(report["read"])
    reason, explicit = report["refused"][os.path.join(docs, "notes.txt")]
    assert "2 hard links" in reason
    assert not explicit
    if uid != 0 and os.geteuid() == 0:
        reason, explicit = report["refused"][locked]
        assert "cannot be listed" in reason
        assert explicit


def test_a_folder_swapped_for_a_link_after_the_listing_leads_nowhere(tmp_path: Path) -> None:
    """The file is opened beneath its folder without following links: a folder replaced by a
    link to a secret place between the walk and the open is refused, not read."""
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "sub" / "a.md").write_text("mine\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "a.md").write_text("not yours\n")
    reader = DocumentFiles(protected=[])
    (docs / "sub" / "a.md").unlink()
    (docs / "sub").rmdir()
    (docs / "sub").symlink_to(elsewhere)
    with pytest.raises(Exception, match="symbolic link"):
        reader.read(str(docs / "sub" / "a.md"))


class _ChangedAfterCollect:
    """The real reader, with ``change`` run between the walk and the first read: what
    another program can do to a folder while ``memory add`` indexes it."""

    def __init__(self, reader: DocumentFiles, change: Callable[[], None]) -> None:
        self.reader = reader
        self.change = change

    def collect(self, paths: Sequence[str], *, pattern: str, recursive: bool) -> DocumentBatch:
        batch = self.reader.collect(paths, pattern=pattern, recursive=recursive)
        self.change()
        return batch

    def load(self, found: FoundDocument) -> RawDocument | DocumentRefusal:
        return self.reader.load(found)

    def read(self, source: str) -> RawDocument | None:
        return self.reader.read(source)


async def decoded(document: RawDocument) -> str:
    return document.data.decode()


def _base(
    reader: DocumentFiles, change: Callable[[], None], store: KnowledgeStorePort | None = None
) -> KnowledgeBase:
    return KnowledgeBase(
        store or InMemoryKnowledgeStore(),
        _ChangedAfterCollect(reader, change),
        extract=decoded,
    )


async def test_a_file_swapped_for_a_link_or_grown_after_the_walk_is_refused_when_read(
    tmp_path: Path,
) -> None:
    """Files are read when indexed, not when found: one replaced by a link to a secret
    since the walk is refused as a link, one grown past the limit as too large, one made
    binary as binary, each with the reason a walk would have given; the rest is added."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a.md", "b.md", "c.md", "d.md", "e.md"):
        (docs / name).write_text(f"# {name}\n\nkept\n")
    key = tmp_path / "id_ed25519"
    key.write_text(KEY)

    def change() -> None:
        (docs / "b.md").unlink()
        (docs / "b.md").symlink_to(key)
        (docs / "c.md").write_text("x" * 2000)
        (docs / "d.md").write_bytes(b"\x00\x01binary")

    report = await _base(DocumentFiles(max_bytes=1000, protected=[]), change).add([str(docs)])
    assert report.added == [str(docs / "a.md"), str(docs / "e.md")]
    assert [(r.source, r.reason, r.explicit) for r in report.refused] == [
        (str(docs / "b.md"), "a symbolic link; memory add does not follow links", False),
        (
            str(docs / "c.md"),
            "2000 bytes, over the 1000-byte limit ([memory] max_file_bytes)",
            False,
        ),
        (
            str(docs / "d.md"),
            "a binary file (memory add reads text, Markdown, code, HTML, PDF)",
            False,
        ),
    ]
    assert not report.failed


async def test_a_named_file_swapped_for_a_link_after_the_check_is_an_error(
    tmp_path: Path,
) -> None:
    """A file the user named, replaced by a link between its check and its read, is refused
    under the name the user gave (an error: exit 2), and the other named file is added."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "mine.md").write_text("mine\n")
    (docs / "other.md").write_text("other\n")
    key = tmp_path / "id_ed25519"
    key.write_text(KEY)

    def change() -> None:
        (docs / "mine.md").unlink()
        (docs / "mine.md").symlink_to(key)

    named = str(docs / "sub" / ".." / "mine.md")
    (docs / "sub").mkdir()
    store = InMemoryKnowledgeStore()
    report = await _base(DocumentFiles(protected=[]), change, store).add(
        [named, str(docs / "other.md")]
    )
    assert report.added == [str(docs / "other.md")]
    assert [(r.source, r.reason, r.explicit) for r in report.refused] == [
        (named, "a symbolic link; memory add does not follow links", True)
    ]
    assert report.failed
    assert list(store.entries) == [str(docs / "other.md")]
