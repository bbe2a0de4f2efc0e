"""Readings kept by an inotify watch, on real files: each kind of change is seen by the very
next call (no waiting anywhere), and a kept reading is really kept (the disk is not read).

Every test makes its reading three times before it changes anything: the first call is
never kept, the second sets the watches up, the third must come from what was kept."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from jarvis.adapters.filesystem_tools.project_files import AgentsMdFiles
from jarvis.adapters.filesystem_tools.skill_folders import SkillFolders
from jarvis.adapters.inotify_watch import InotifyWatch, KeptReading, Read
from jarvis.adapters.persona_files.store import FilesystemPersonaStore
from jarvis.domain.ports import PersonaFile

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="inotify is Linux's")


class Counted:
    """A reader of one file (``None`` when missing) that counts its reads."""

    def __init__(self, path: Path, listed: tuple[str, ...] = ()) -> None:
        self.path = path
        self.listed = listed
        self.reads = 0

    def __call__(self, _key: str) -> Read[str | None]:
        self.reads += 1
        text = self.path.read_text() if self.path.exists() else None
        listing = ",".join(sorted(os.listdir(self.listed[0]))) if self.listed else ""
        value = None if text is None and not listing else f"{text}|{listing}"
        return Read(value, (str(self.path), os.path.realpath(self.path)), self.listed)


def kept(reader: Counted, watch: InotifyWatch | None = None) -> KeptReading[str, str | None]:
    reading = KeptReading(reader, InotifyWatch() if watch is None else watch)
    for _ in range(3):
        reading("key")
    return reading


def watched_soul(
    tmp_path: Path,
) -> tuple[Path, Counted, InotifyWatch, KeptReading[str, str | None]]:
    """``SOUL.md`` holding "one", its counted reader, its watch, and its reading kept."""
    path = tmp_path / "SOUL.md"
    path.write_text("one")
    reader = Counted(path)
    watch = InotifyWatch()
    return path, reader, watch, kept(reader, watch)


def settled(reading: KeptReading[str, str | None], reader: Counted) -> None:
    """The reading is now served from what was kept: two more calls read nothing."""
    before = reader.reads
    reading("key")
    reading("key")
    assert reader.reads == before


def test_a_kept_reading_is_not_read_again(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("one")
    reader = Counted(tmp_path / "SOUL.md")
    reading = kept(reader)
    settled(reading, reader)
    assert reading("key") == "one|"


def test_an_edit_in_place_counts_at_the_next_call(tmp_path: Path) -> None:
    path = tmp_path / "SOUL.md"
    path.write_text("one")
    reader = Counted(path)
    reading = kept(reader)
    settled(reading, reader)
    with path.open("r+") as handle:  # written in place, same size, never closed before
        handle.write("two")
        handle.flush()
        assert reading("key") == "two|"


@pytest.mark.parametrize(
    "change",
    ["create", "delete", "replace by rename", "truncate", "chmod"],
)
def test_each_change_of_the_file_counts(tmp_path: Path, change: str) -> None:
    path = tmp_path / "SOUL.md"
    if change != "create":
        path.write_text("one")
    reader = Counted(path)
    reading = kept(reader)
    settled(reading, reader)
    before = reader.reads
    if change == "create":
        path.write_text("new")
    elif change == "delete":
        path.unlink()
    elif change == "replace by rename":
        (tmp_path / "tmp").write_text("renamed")
        os.replace(tmp_path / "tmp", path)
    elif change == "truncate":
        os.truncate(path, 0)
    else:
        path.chmod(0o600)
    value = reading("key")  # read again (twice, if it now depends on a name not watched)
    assert reader.reads > before
    assert value == reader("key").value
    settled(reading, reader)


def test_a_folder_created_later_on_the_way_counts(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "SOUL.md"
    reader = Counted(path)
    reading = kept(reader)
    settled(reading, reader)
    path.parent.mkdir(parents=True)
    reading("key")  # the folder was created: read again, watching one step deeper
    reading("key")
    settled(reading, reader)
    path.write_text("late")
    assert reading("key") == "late|"


def test_a_renamed_folder_on_the_way_counts(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "SOUL.md").write_text("old home")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "SOUL.md").write_text("new home")
    reader = Counted(tmp_path / "home" / "SOUL.md")
    reading = kept(reader)
    settled(reading, reader)
    os.rename(tmp_path / "home", tmp_path / "gone")
    os.rename(tmp_path / "other", tmp_path / "home")
    assert reading("key") == "new home|"


def test_a_link_retargeted_and_its_target_edited_count(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "b.md").write_text("b")
    link = tmp_path / "SOUL.md"
    link.symlink_to(tmp_path / "a.md")
    reader = Counted(link)
    reading = kept(reader)
    settled(reading, reader)
    link.unlink()
    link.symlink_to(tmp_path / "b" / "b.md")
    assert reading("key") == "b|"
    reading("key")
    settled(reading, reader)
    (tmp_path / "b" / "b.md").write_text("b2")  # the target, in a folder of its own
    assert reading("key") == "b2|"


def test_a_new_entry_of_a_listed_folder_counts(tmp_path: Path) -> None:
    listed = tmp_path / "skills"
    listed.mkdir()
    reader = Counted(tmp_path / "none", (str(listed),))
    reading = kept(reader)
    settled(reading, reader)
    (listed / "new-skill").mkdir()
    assert reading("key") == "None|new-skill"


def test_an_unrelated_file_beside_it_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("one")
    reader = Counted(tmp_path / "SOUL.md")
    watch = InotifyWatch()
    reading = kept(reader, watch)
    settled(reading, reader)
    generation = watch.generation()
    for index in range(50):  # the traces database, written beside the persona files
        (tmp_path / "traces.db").write_bytes(b"x" * index)
    assert watch.generation() == generation
    settled(reading, reader)


def test_a_removed_watched_folder_starts_over_and_stays_right(tmp_path: Path) -> None:
    folder = tmp_path / "home"
    folder.mkdir()
    (folder / "SOUL.md").write_text("one")
    reader = Counted(folder / "SOUL.md")
    reading = kept(reader)
    settled(reading, reader)
    shutil.rmtree(folder)
    assert reading("key") is None
    folder.mkdir()
    (folder / "SOUL.md").write_text("two")
    assert reading("key") == "two|"
    reading("key")
    settled(reading, reader)
    (folder / "SOUL.md").write_text("three")
    assert reading("key") == "three|"


def test_without_a_watch_every_call_reads(tmp_path: Path) -> None:
    reader = Counted(tmp_path / "SOUL.md")
    reading: KeptReading[str, str | None] = KeptReading(reader, None)
    for _ in range(4):
        reading("key")
    assert reader.reads == 4


def test_a_closed_watch_opens_again_and_misses_nothing(tmp_path: Path) -> None:
    path, reader, watch, reading = watched_soul(tmp_path)
    watch.close()
    path.write_text("two")  # while closed: nobody is told
    assert reading("key") == "two|"
    reading("key")
    settled(reading, reader)
    path.write_text("three")
    assert reading("key") == "three|"


def in_a_child(check: Callable[[], bool]) -> bool:
    """``check()`` run in a child forked now (ended by an alarm if it hangs)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            signal.alarm(10)  # a hang ends the child, and the test with it
            os.write(write_end, b"1" if check() else b"0")
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        return os.read(read_end, 1) == b"1"
    finally:
        os.waitpid(pid, 0)
        os.close(read_end)


def test_a_forked_child_reads_from_disk(tmp_path: Path) -> None:
    path, _reader, watch, reading = watched_soul(tmp_path)

    def child() -> bool:  # its parent's notices are not its own to take
        path.write_text("child")
        return watch.generation() is None and reading("key") == "child|"

    assert in_a_child(child)
    assert reading("key") == "child|"  # the parent still got its notice


# -- the three readers of every prompt, watched -------------------------------------------


def _three_times(call: Callable[[], object]) -> None:
    for _ in range(3):
        call()


def test_agents_md_files_kept_per_working_directory(tmp_path: Path) -> None:
    project, other = tmp_path / "project", tmp_path / "other"
    for folder in (project, other):
        folder.mkdir()
        (folder / ".git").mkdir()
        (folder / "AGENTS.md").write_text(f"rules of {folder.name}")
    cwd = [str(project)]
    files = AgentsMdFiles(max_bytes=1024, cwd=lambda: cwd[0], watch=InotifyWatch())
    _three_times(files)
    (project / "AGENTS.md").write_text("new rules")
    assert [f.text for f in files()] == ["new rules"]
    cwd[0] = str(other)
    _three_times(files)
    assert [f.text for f in files()] == ["rules of other"]
    (project / ".git").rmdir()  # no repository any more: only the folder's own file
    cwd[0] = str(project / "sub")
    (project / "sub").mkdir()
    _three_times(files)
    assert files() == []
    (project / "sub" / "AGENTS.md").write_text("sub rules")
    assert [f.text for f in files()] == ["sub rules"]


def test_persona_store_kept_until_a_file_changes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    store = FilesystemPersonaStore(home, watch=InotifyWatch())
    _three_times(lambda: store.load(None))
    assert store.load(None) == ()
    (home / "SOUL.md").write_text("You are terse.")
    assert [d.text for d in store.load(None)] == ["You are terse."]
    _three_times(lambda: store.load(None))
    store.edit(PersonaFile.MEMORY, lambda text: text + "- likes tea\n")  # its own edit
    assert [d.kind for d in store.load(None)] == [PersonaFile.SOUL, PersonaFile.MEMORY]
    (home / "personas" / "pirate").mkdir(parents=True)
    _three_times(lambda: store.load("pirate"))
    (home / "personas" / "pirate" / "SOUL.md").write_text("Arr.")
    assert [d.text for d in store.load("pirate")] == ["Arr."]


def test_skill_folders_kept_until_a_skill_changes(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    folders = SkillFolders([str(root)], watch=InotifyWatch())
    _three_times(folders.skills)
    assert folders.skills() == []
    (root / "pdf").mkdir(parents=True)
    (root / "pdf" / "SKILL.md").write_text("---\nname: pdf\ndescription: Reads PDFs.\n---\nBody")
    assert [s.description for s in folders.skills()] == ["Reads PDFs."]
    _three_times(folders.skills)
    (root / "pdf" / "SKILL.md").write_text("---\nname: pdf\ndescription: Fills forms.\n---\n")
    assert [s.description for s in folders.skills()] == ["Fills forms."]


def test_a_folder_on_a_remote_filesystem_is_read_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another machine's edit of an NFS file sends no notice here: such a folder is never
    watched. (No NFS server can be started here: the test's own filesystem is taken for
    one by its type number.)"""
    import jarvis.adapters.inotify_watch as module

    calls = module._libc_inotify()
    assert calls is not None
    here = calls[2](os.fsencode(tmp_path))
    monkeypatch.setattr(module, "_REMOTE_FILESYSTEMS", frozenset({here}))
    (tmp_path / "SOUL.md").write_text("one")
    reader = Counted(tmp_path / "SOUL.md")
    watch = InotifyWatch()
    reading = kept(reader, watch)
    before = reader.reads
    reading("key")
    reading("key")
    assert reader.reads == before + 2
    assert watch.generation() is None


def test_a_child_forked_while_the_watch_is_busy_does_not_hang(tmp_path: Path) -> None:
    """Another thread of the parent may be inside the watch (holding its lock) at the fork:
    the child gets a lock of its own, never the held one."""
    _path, _reader, watch, reading = watched_soul(tmp_path)
    with watch._lock:  # what a thread reading at that moment holds
        assert in_a_child(lambda: reading("key") == "one|")


def test_a_link_on_the_way_retargeted_counts(tmp_path: Path) -> None:
    """``SOUL.md -> sub/current -> v1.md``: ``sub/current`` is neither the path as written
    nor where it ends, and retargeting it changes what is read."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "v1.md").write_text("v1")
    (tmp_path / "sub" / "v2.md").write_text("v2")
    (tmp_path / "sub" / "current").symlink_to("v1.md")
    (tmp_path / "SOUL.md").symlink_to("sub/current")
    reader = Counted(tmp_path / "SOUL.md")
    reading = kept(reader)
    settled(reading, reader)
    (tmp_path / "sub" / "next").symlink_to("v2.md")
    os.replace(tmp_path / "sub" / "next", tmp_path / "sub" / "current")
    assert reading("key") == "v2|"


def test_a_linked_folder_then_dotdot_is_watched_as_the_kernel_resolves_it(
    tmp_path: Path,
) -> None:
    """``home/link/..`` is the parent of where ``link`` leads, not ``home``."""
    for name in ("a", "b"):
        (tmp_path / name / "inner").mkdir(parents=True)
        (tmp_path / name / "SOUL.md").write_text(name)
    (tmp_path / "link").symlink_to(tmp_path / "a" / "inner")
    reader = Counted(tmp_path / "link" / ".." / "SOUL.md")
    reading = kept(reader)
    settled(reading, reader)
    (tmp_path / "next").symlink_to(tmp_path / "b" / "inner")
    os.replace(tmp_path / "next", tmp_path / "link")
    assert reading("key") == "b|"


def test_a_listed_folder_reached_through_a_retargeted_link_is_listed_where_it_leads(
    tmp_path: Path,
) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    (tmp_path / "skills").symlink_to(tmp_path / "a")
    reader = Counted(tmp_path / "none", (str(tmp_path / "skills"),))
    reading = kept(reader)
    settled(reading, reader)
    (tmp_path / "next").symlink_to(tmp_path / "b")
    os.replace(tmp_path / "next", tmp_path / "skills")
    assert reading("key") is None  # b is empty
    reading("key")
    settled(reading, reader)
    (tmp_path / "b" / "gamma").mkdir()
    assert reading("key") == "None|gamma"


def test_a_hard_link_edited_through_its_other_name_counts(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "soul.md").write_text("one")
    os.link(tmp_path / "other" / "soul.md", tmp_path / "SOUL.md")
    reader = Counted(tmp_path / "SOUL.md")
    reading = kept(reader)
    settled(reading, reader)
    with (tmp_path / "other" / "soul.md").open("r+") as handle:
        handle.write("two")
    assert reading("key") == "two|"


def test_a_relative_config_dir_follows_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("p1", "p2"):
        (tmp_path / name / "cfg").mkdir(parents=True)
        (tmp_path / name / "cfg" / "SOUL.md").write_text(name)
    monkeypatch.chdir(tmp_path / "p1")
    store = FilesystemPersonaStore("cfg", watch=InotifyWatch())
    _three_times(lambda: store.load(None))
    monkeypatch.chdir(tmp_path / "p2")
    assert [d.text for d in store.load(None)] == ["p2"]
    _three_times(lambda: store.load(None))
    (tmp_path / "p2" / "cfg" / "SOUL.md").write_text("p2 edited")
    assert [d.text for d in store.load(None)] == ["p2 edited"]
