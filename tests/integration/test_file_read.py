"""file_read on real files and links: confinement, secrets, no existence oracle, limits.

The attacks (hard links, a folder swapped for a symlink mid-read, secret folders at or
above the root, token files) live in ``test_file_read_attacks.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from contracts.tool_contract import ToolContract
from jarvis.adapters.filesystem_tools import FileReadTool
from jarvis.domain.json_types import JSONObject


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("outside secret\n")
    return folder


@pytest.fixture
def work(tmp_path: Path, outside: Path) -> Path:
    root = tmp_path / "work"
    (root / "src").mkdir(parents=True)
    (root / "notes.txt").write_text("line one\nline two\n")
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / ".ssh").mkdir()
    (root / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (root / ".env").write_text("API_KEY=sk-123\n")
    (root / "notes_link.txt").symlink_to(root / ".ssh" / "id_rsa")
    (root / "env_link").symlink_to(root / ".env")
    (root / "inside_link.txt").symlink_to(root / "notes.txt")
    (root / "link_out.txt").symlink_to(outside / "secret.txt")
    (root / "dangling_out.txt").symlink_to(outside / "does-not-exist.txt")
    (root / "dir_out").symlink_to(outside, target_is_directory=True)
    return root


@pytest.fixture
def reader(work: Path) -> FileReadTool:
    return FileReadTool([str(work)])


async def read(tool: FileReadTool, path: str, **extra: int) -> tuple[bool, str]:
    result = await tool.execute({"path": path, **extra})
    assert result.tool_name == "file_read"
    return result.success, result.content


class TestFileReadTool(ToolContract[FileReadTool]):
    @pytest.fixture
    def tool(self, reader: FileReadTool) -> FileReadTool:
        return reader

    @pytest.fixture
    def valid_arguments(self) -> JSONObject:
        return {"path": "notes.txt"}

    @pytest.fixture
    def failing_arguments(self) -> JSONObject:
        return {"path": "../outside/secret.txt"}


async def test_reads_relative_and_absolute_paths(reader: FileReadTool, work: Path) -> None:
    assert await read(reader, "notes.txt") == (True, "line one\nline two\n")
    assert await read(reader, str(work / "src" / "app.py")) == (True, "print('hi')\n")
    assert await read(reader, "src/../notes.txt") == (True, "line one\nline two\n")


@pytest.mark.parametrize(
    "path",
    [
        "inside_link.txt",
        "notes_link.txt",
        "env_link",
        "link_out.txt",
        "dangling_out.txt",
        "dir_out/secret.txt",
        "dir_out/missing.txt",
    ],
)
async def test_links_are_never_followed_and_all_get_one_answer(
    reader: FileReadTool, path: str
) -> None:
    """Whatever a link points at (a key, outside, nothing) the answer is the same."""
    assert await read(reader, path) == (
        False,
        f"Access denied: '{path}' is or passes through a symbolic link; file_read does not "
        "follow links.",
    )


def _shape(message: str, given: str) -> str:
    return message.replace(given, "<path>")


@pytest.mark.parametrize(
    "path",
    [
        "../outside/secret.txt",
        "../outside/missing.txt",
        "../../../../../../etc/passwd",
        "../../../../../../no/such/file",
        "/etc/passwd",
        "/no/such/file",
        "src/../../outside/secret.txt",
    ],
)
async def test_outside_the_roots_is_one_answer_whether_or_not_it_exists(
    reader: FileReadTool, work: Path, path: str
) -> None:
    ok, message = await read(reader, path)
    assert not ok
    assert _shape(message, path) == (
        f"Access denied: '<path>' is outside the allowed folders ({work})."
    )


async def test_no_filesystem_call_happens_for_a_path_outside_the_roots(
    reader: FileReadTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spies are process-wide: a thread another test left in this process (a trace
    writer, a memory watch) may stat its own files meanwhile, so only calls about the
    probed path's folder count."""
    touched: list[str] = []

    def spy(name: str, real: object) -> object:
        def call(*args: object, **kwargs: object) -> object:
            target = args[0] if args else kwargs.get("path")
            if isinstance(target, str | bytes | os.PathLike) and os.fsdecode(target).startswith(
                "/etc"
            ):
                touched.append(name)
            return real(*args, **kwargs)  # type: ignore[operator]

        return call

    for name in ("stat", "lstat", "open", "readlink"):
        monkeypatch.setattr(os, name, spy(name, getattr(os, name)))
    monkeypatch.setattr(os.path, "realpath", spy("realpath", os.path.realpath))
    ok, _ = await read(reader, "/etc/shadow-or-not")
    assert not ok
    assert touched == []


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        (".env", ".env"),
        (".env.production", ".env.*"),
        ("config/prod.env", "*.env"),
        (".ssh/id_rsa", ".ssh"),
        ("keys/id_ed25519", "id_*"),
        ("deploy/id_ecdsa", "id_*"),
        ("certs/server.pem", "*.pem"),
        ("certs/server.KEY", "*.key"),
        ("certs/bundle.p12", "*.p12"),
        ("certs/bundle.pfx", "*.pfx"),
        ("home/.aws/config", ".aws"),
        ("home/.azure/accessTokens.json", ".azure"),
        ("home/.config/gcloud/adc.json", ".config/gcloud"),
        ("home/.kube/config", ".kube/config"),
        ("home/.docker/config.json", ".docker/config.json"),
        (".netrc", ".netrc"),
        (".pgpass", ".pgpass"),
        (".npmrc", ".npmrc"),
        (".pypirc", ".pypirc"),
        ("credentials.json", "credentials*"),
        (".gnupg/private-keys-v1.d/x", ".gnupg"),
        (".bash_history", "*_history"),
        (".zsh_history", "*_history"),
    ],
)
async def test_secrets_are_refused_also_when_missing(
    reader: FileReadTool, path: str, rule: str
) -> None:
    ok, message = await read(reader, path)
    assert not ok
    assert message == (
        f"Access denied: '{path}' is a secret or credential file (rule '{rule}'); "
        "file_read never reads those."
    )


async def test_files_that_merely_look_similar_are_readable(work: Path) -> None:
    for name in ("environment.md", "keyboard.txt", "ssh-notes.md", "pemberton.txt"):
        (work / name).write_text("fine\n")
        assert await read(FileReadTool([str(work)]), name) == (True, "fine\n")


async def test_missing_files_and_folders_inside_the_roots(reader: FileReadTool) -> None:
    assert await read(reader, "nope.txt") == (False, "Error: no such file: 'nope.txt'.")
    assert await read(reader, "src") == (False, "Error: 'src' is a directory, not a file.")


async def test_a_fifo_is_refused_without_blocking(reader: FileReadTool, work: Path) -> None:
    os.mkfifo(work / "pipe")
    assert await read(reader, "pipe") == (False, "Error: 'pipe' is not a regular file.")


async def test_binary_and_oversized_files_are_refused(work: Path) -> None:
    (work / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (work / "big.log").write_bytes(b"x" * 2048)
    tool = FileReadTool([str(work)], max_bytes=1024)
    assert await read(tool, "image.png") == (
        False,
        "Error: 'image.png' is a binary file; file_read reads text only.",
    )
    assert await read(tool, "big.log") == (
        False,
        "Error: 'big.log' is 2048 bytes; file_read reads files up to 1024 bytes.",
    )


async def test_undecodable_bytes_are_replaced(reader: FileReadTool, work: Path) -> None:
    (work / "latin1.txt").write_bytes(b"caf\xe9 ok\n")
    assert await read(reader, "latin1.txt") == (True, "caf\ufffd ok\n")


async def test_long_files_are_paged(work: Path) -> None:
    (work / "long.txt").write_text("".join(f"row {i}\n" for i in range(1, 101)))
    tool = FileReadTool([str(work)])
    ok, text = await read(tool, "long.txt", offset=20, max_lines=3)
    assert ok
    assert text == "row 20\nrow 21\nrow 22\n[Lines 20-22 of 100. Use offset=23 to read more.]"
    assert (await read(tool, "long.txt", offset=99))[1] == "row 99\nrow 100\n[Lines 99-100 of 100.]"
    assert await read(tool, "long.txt", offset=101) == (
        False,
        "Error: 'long.txt' has 100 lines; offset 101 is past the end.",
    )
    narrow = FileReadTool([str(work)], max_output_chars=20)
    result = await narrow.execute({"path": "long.txt"})
    assert result.truncated
    assert result.content == "row 1\nrow 2\nrow 3\n[Lines 1-3 of 100. Use offset=4 to read more.]"
    assert result.metadata["total_lines"] == 100


async def test_several_roots_and_the_default_root(
    tmp_path: Path, work: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    both = FileReadTool([str(work), str(outside)])
    assert await read(both, str(outside / "secret.txt")) == (True, "outside secret\n")
    assert await read(both, "../outside/secret.txt") == (True, "outside secret\n")
    monkeypatch.chdir(outside)
    default = FileReadTool()
    assert await read(default, "secret.txt") == (True, "outside secret\n")
    assert not (await read(default, str(work / "notes.txt")))[0]


async def test_invalid_paths_and_arguments(reader: FileReadTool) -> None:
    assert await read(reader, "a\x00b") == (False, "Error: invalid path 'a\\x00b'.")
    assert not (await reader.execute({"path": ""})).success
    assert not (await reader.execute({"path": "notes.txt", "offset": 0})).success
    assert not (await reader.execute({"path": "notes.txt", "max_lines": 10_001})).success
