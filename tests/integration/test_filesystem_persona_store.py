"""The filesystem persona store on real files: the contract, plus what only files can do
(symlinks, FIFOs, sparse 2 GiB files, unwritable folders, other processes)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.persona_store_contract import PersonaStoreContract
from jarvis.adapters.inotify_watch import InotifyWatch
from jarvis.adapters.persona_files.store import FilesystemPersonaStore
from jarvis.domain.errors import PersonaError
from jarvis.domain.ports import PersonaFile

SOUL, MEMORY, USER = PersonaFile.SOUL, PersonaFile.MEMORY, PersonaFile.USER
NAMES = {SOUL: "SOUL.md", MEMORY: "MEMORY.md", USER: "USER.md"}


def _file(store: FilesystemPersonaStore, kind: PersonaFile, persona: str | None) -> Path:
    return (
        Path(store.location(kind, persona))
        if persona is None
        else (store.root / "personas" / persona / NAMES[kind])
    )


class TestFilesystemPersonaStore(PersonaStoreContract[FilesystemPersonaStore]):
    @pytest.fixture
    def store(self, tmp_path: Path) -> FilesystemPersonaStore:
        return FilesystemPersonaStore(tmp_path / "home", max_read_bytes=self.READ_LIMIT)

    def put(
        self,
        store: FilesystemPersonaStore,
        kind: PersonaFile,
        content: str | bytes,
        persona: str | None = None,
    ) -> None:
        path = _file(store, kind, persona)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)

    def raw(
        self, store: FilesystemPersonaStore, kind: PersonaFile, persona: str | None = None
    ) -> bytes | None:
        path = _file(store, kind, persona)
        return path.read_bytes() if path.exists() else None

    def make_persona(self, store: FilesystemPersonaStore, name: str) -> None:
        (store.root / "personas" / name).mkdir(parents=True)


@pytest.mark.skipif(sys.platform != "linux", reason="inotify is Linux's")
class TestWatchedFilesystemPersonaStore(TestFilesystemPersonaStore):
    """The same with a watch, the default files read twice first: every later read of
    them is kept until a file changes, and must still see each change the contract makes."""

    @pytest.fixture
    def store(self, tmp_path: Path) -> FilesystemPersonaStore:
        store = FilesystemPersonaStore(
            tmp_path / "home", max_read_bytes=self.READ_LIMIT, watch=InotifyWatch()
        )
        store.load(None)
        store.load(None)
        return store


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry below ``root``: file bytes, link targets, folders."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            found[key] = "-> " + os.readlink(path)
        elif path.is_dir():
            found[key] = "dir"
        elif path.is_file():
            found[key] = path.read_bytes()
    return found


@pytest.fixture
def home(tmp_path: Path) -> Path:
    root = tmp_path / "home"
    root.mkdir()
    return root


# -- symlinks ------------------------------------------------------------------------------


def test_a_symlink_leading_outside_the_config_dir_is_not_followed(
    home: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("api-key: hunter2")
    (home / "SOUL.md").symlink_to(secret)
    [document] = FilesystemPersonaStore(home).load(None)
    assert document.text == ""
    assert "hunter2" not in repr(document)
    assert "outside" in document.warnings[0]
    assert str(secret) in document.warnings[0]


def test_a_named_persona_folder_linked_outside_is_not_followed(home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "SOUL.md").write_text("stolen")
    (home / "personas").mkdir()
    (home / "personas" / "work").symlink_to(elsewhere, target_is_directory=True)
    [document] = FilesystemPersonaStore(home).load("work")
    assert document.text == ""
    assert "outside" in document.warnings[0]


def test_a_symlink_inside_the_config_dir_is_followed_and_edited_through(home: Path) -> None:
    (home / "shared").mkdir()
    (home / "shared" / "memory.md").write_text("- shared\n")
    (home / "MEMORY.md").symlink_to(home / "shared" / "memory.md")
    store = FilesystemPersonaStore(home)
    assert store.load(None)[0].text == "- shared\n"
    store.edit(MEMORY, lambda text: text + "- more\n")
    assert (home / "MEMORY.md").is_symlink()
    assert (home / "shared" / "memory.md").read_text() == "- shared\n- more\n"


def test_editing_a_symlink_leading_outside_is_refused_and_changes_nothing(
    home: Path, tmp_path: Path
) -> None:
    target = tmp_path / "bashrc"
    target.write_text("export X=1\n")
    (home / "MEMORY.md").symlink_to(target)
    before = snapshot(tmp_path)
    with pytest.raises(PersonaError, match="Refusing to edit") as caught:
        FilesystemPersonaStore(home).edit(MEMORY, lambda text: text + "- x\n")
    assert "outside" in caught.value.hint
    assert snapshot(tmp_path) == before


def test_a_configured_path_outside_the_config_dir_is_allowed(home: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "soul.md").write_text("From my notes.")
    store = FilesystemPersonaStore(home, soul_path=notes / "soul.md", memory_path="mem/M.md")
    assert store.load(None)[0].text == "From my notes."
    store.edit(MEMORY, lambda text: "- relative to the config dir\n")
    assert (home / "mem" / "M.md").read_text() == "- relative to the config dir\n"


# -- odd files -----------------------------------------------------------------------------


def test_a_huge_sparse_file_is_read_at_its_ends_only(home: Path) -> None:
    size = 2 * 1024**3  # 2 GiB, sparse: reading it whole would take 2 GiB of memory
    with (home / "MEMORY.md").open("wb") as handle:
        handle.write(b"a" * 2048)
        handle.truncate(size)
        handle.seek(size - 2048)
        handle.write(b"z" * 2048)
    [document] = FilesystemPersonaStore(home, max_read_bytes=4096).load(None)
    assert document.text == "a" * 2048 + "z" * 2048
    assert (document.omitted_at, document.omitted_bytes) == (2048, size - 4096)
    assert "2.0 GiB" in document.warnings[0]
    with pytest.raises(PersonaError, match="too large to rewrite"):
        FilesystemPersonaStore(home).edit(MEMORY, lambda text: text + "- x\n")
    assert (home / "MEMORY.md").stat().st_size == size


def test_a_huge_text_file_keeps_its_newest_entries(home: Path) -> None:
    lines = [f"- entry {i}\n" for i in range(200_000)]
    (home / "MEMORY.md").write_text("".join(lines))
    [document] = FilesystemPersonaStore(home, max_read_bytes=8192).load(None)
    assert document.text.startswith("- entry 0\n")
    assert document.text.endswith("- entry 199999\n")
    assert len(document.text) <= 8192
    assert document.omitted_bytes > 1_000_000
    assert "read limit" in document.warnings[0]


def test_a_fifo_is_not_opened_for_reading(home: Path) -> None:
    os.mkfifo(home / "SOUL.md")  # opening it for reading would block forever
    [document] = FilesystemPersonaStore(home).load(None)
    assert document.text == ""
    assert "not a regular file" in document.warnings[0]


def test_a_folder_named_like_a_persona_file_is_reported(home: Path) -> None:
    (home / "USER.md").mkdir()
    [document] = FilesystemPersonaStore(home).load(None)
    assert "not a regular file" in document.warnings[0]


def test_files_in_the_personas_folder_are_not_personas(home: Path) -> None:
    (home / "personas").mkdir()
    (home / "personas" / "notes.txt").write_text("x")
    (home / "personas" / ".hidden").mkdir()
    (home / "personas" / "work").mkdir()
    assert FilesystemPersonaStore(home).names() == ["work"]


# -- writing -------------------------------------------------------------------------------


def test_edits_are_atomic_and_leave_no_temp_files(home: Path) -> None:
    store = FilesystemPersonaStore(home)
    (home / "MEMORY.md").write_text("- old\n")
    os.chmod(home / "MEMORY.md", 0o640)
    store.edit(MEMORY, lambda text: text + "- new\n")
    assert (home / "MEMORY.md").read_text() == "- old\n- new\n"
    assert (home / "MEMORY.md").stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in home.iterdir()) == [".MEMORY.md.lock", "MEMORY.md"]


def test_the_config_dir_is_created_on_first_edit(tmp_path: Path) -> None:
    store = FilesystemPersonaStore(tmp_path / "a" / "b")
    store.edit(USER, lambda text: "- Ada\n")
    assert (tmp_path / "a" / "b" / "USER.md").read_text() == "- Ada\n"


def test_an_unwritable_config_dir_is_a_clear_error_and_changes_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("I am a file")
    before = snapshot(tmp_path)
    store = FilesystemPersonaStore(blocker / "openjarvis")
    with pytest.raises(PersonaError, match="Cannot write") as edit_error:
        store.edit(MEMORY, lambda text: text + "- x\n")
    with pytest.raises(PersonaError, match="Cannot write") as ensure_error:
        store.ensure(SOUL)
    for caught in (edit_error, ensure_error):
        assert "writable folder" in caught.value.hint
        assert "Nothing was changed" in caught.value.hint
    assert snapshot(tmp_path) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits")
def test_a_read_only_config_dir_is_a_clear_error(home: Path) -> None:  # pragma: no cover
    (home / "MEMORY.md").write_text("- kept\n")
    os.chmod(home, 0o500)
    try:
        with pytest.raises(PersonaError, match="Cannot write"):
            FilesystemPersonaStore(home).edit(MEMORY, lambda text: text + "- x\n")
    finally:
        os.chmod(home, 0o700)
    assert (home / "MEMORY.md").read_text() == "- kept\n"


_READ_ONLY_EDIT = """
import sys
from jarvis.adapters.inotify_watch import InotifyWatch
from jarvis.adapters.persona_files.store import FilesystemPersonaStore
from jarvis.domain.errors import PersonaError
from jarvis.domain.ports import PersonaFile
try:
    FilesystemPersonaStore(sys.argv[1]).edit(PersonaFile.MEMORY, lambda t: t + "- x\\n")
except PersonaError as error:
    print(error)
    sys.exit(3)
"""


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_a_read_only_filesystem_is_a_clear_error(home: Path) -> None:
    """A real read-only bind mount, in a private mount namespace (nothing leaks out)."""
    (home / "MEMORY.md").write_text("- kept\n")
    script = (
        f'mount --bind -o ro "{home}" "{home}" || exit 77; exec "{sys.executable}" -c "$0" "{home}"'
    )
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, _READ_ONLY_EDIT],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    if done.returncode == 77 or "unshare failed" in done.stderr:
        pytest.skip("cannot make a private read-only mount here: " + done.stderr.strip())
    assert done.returncode == 3, done.stderr
    assert "Cannot write" in done.stdout
    assert "Read-only file system" in done.stdout
    assert (home / "MEMORY.md").read_text() == "- kept\n"
    assert sorted(p.name for p in home.iterdir()) == ["MEMORY.md"]


def test_persona_paths_that_are_secrets_are_neither_read_nor_written(tmp_path: Path) -> None:
    """A config copied from elsewhere names ``~/.aws/credentials`` as the soul (it would be
    in every prompt) and ``~/.ssh/authorized_keys`` as the memory (the memory tool would
    write there): both are refused, and neither file changes."""
    secrets_home = tmp_path / "user"
    (secrets_home / ".aws").mkdir(parents=True)
    (secrets_home / ".ssh").mkdir()
    credentials = secrets_home / ".aws" / "credentials"
    credentials.write_text("aws_secret_access_key = hunter2\n")
    authorized = secrets_home / ".ssh" / "authorized_keys"
    authorized.write_text("ssh-ed25519 AAAA mine\n")
    store = FilesystemPersonaStore(tmp_path / "home", soul_path=credentials, memory_path=authorized)
    documents = {doc.kind: doc for doc in store.load(None)}
    for kind, rule in ((SOUL, ".aws"), (MEMORY, ".ssh")):
        assert documents[kind].text == ""
        assert f"is a secret file (it matches {rule!r})" in documents[kind].warnings[0]
    assert "hunter2" not in repr(documents)
    with pytest.raises(PersonaError, match="Refusing to edit"):
        store.edit(MEMORY, lambda text: text + "ssh-ed25519 AAAA theirs\n")
    with pytest.raises(PersonaError, match="Refusing to edit"):
        store.ensure(MEMORY)
    assert authorized.read_text() == "ssh-ed25519 AAAA mine\n"
    assert credentials.read_text() == "aws_secret_access_key = hunter2\n"


def test_a_secret_persona_path_that_does_not_exist_yet_is_not_created(tmp_path: Path) -> None:
    """The memory tool on ``memory_path = "~/.ssh/authorized_keys"`` with no ``~/.ssh``
    yet: refused before anything is made (the folder, the file, the lock file)."""
    user = tmp_path / "user"
    user.mkdir()
    store = FilesystemPersonaStore(
        tmp_path / "home",
        memory_path=user / ".ssh" / "authorized_keys",
        soul_path=user / ".ssh" / "id_new",
    )
    with pytest.raises(PersonaError, match="Refusing to edit") as refused:
        store.edit(MEMORY, lambda text: text + "ssh-ed25519 AAAA theirs\n")
    assert "is a secret file (it matches '.ssh')" in refused.value.hint
    with pytest.raises(PersonaError, match="Refusing to edit"):
        store.ensure(SOUL)
    assert not (user / ".ssh").exists()


def test_a_secret_folder_reached_through_a_link_is_still_a_secret(tmp_path: Path) -> None:
    """``~/.config`` kept by a dotfile manager is a link: the path as written names
    ``.config/gcloud``, the resolved one does not."""
    user = tmp_path / "user"
    (user / "dotfiles" / "config" / "gcloud").mkdir(parents=True)
    token = user / "dotfiles" / "config" / "gcloud" / "application_default_credentials.json"
    token.write_text('{"refresh_token": "1//SECRET"}')
    (user / ".config").symlink_to(user / "dotfiles" / "config")
    store = FilesystemPersonaStore(
        tmp_path / "home", user_path=user / ".config" / "gcloud" / token.name
    )
    [document] = store.load(None)
    assert document.text == ""
    assert "it matches '.config/gcloud'" in document.warnings[0]


def test_jarvis_own_persona_files_are_never_taken_for_secrets(tmp_path: Path) -> None:
    """Only a path a config moved is checked: named personas and the default files live in
    the config dir, whatever their names or the folders above it are called."""
    home = tmp_path / "id_work" / "chat_history" / "home"
    for name in ("credentials-team", "prod.env", "cookies"):
        (home / "personas" / name).mkdir(parents=True)
        (home / "personas" / name / "SOUL.md").write_text(f"I am {name}.")
    (home / "SOUL.md").write_text("I am the default.")
    store = FilesystemPersonaStore(home)
    assert [doc.text for doc in store.load(None)] == ["I am the default."]
    for name in ("credentials-team", "prod.env", "cookies"):
        assert [doc.text for doc in store.load(name)] == [f"I am {name}."]
