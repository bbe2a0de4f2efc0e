"""What ``memory add`` reads, attacked as another user of the machine would: the user's own
key hard-linked into a folder they add, a folder they cannot list, a symlink swapped in."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from jarvis.adapters.filesystem_tools.document_files import DocumentFiles
from tests.integration.test_file_read_attacks import _SOURCE, _as_user, _interpreter_for
from tests.support.users import throwaway_user

KEY = "-----BEGIN OPENSSH PRIVATE KEY----- not for the model"

_AS_USER = """
import json, os, sys
from jarvis.adapters.filesystem_tools.document_files import DocumentFiles
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
batch = DocumentFiles(protected=[]).collect([docs, locked], pattern="*", recursive=True)
print(json.dumps({
    "uid": os.getuid(),
    "read": {d.source: d.data.decode() for d in batch.documents},
    "refused": {r.source: [r.reason, r.explicit] for r in batch.refused},
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
