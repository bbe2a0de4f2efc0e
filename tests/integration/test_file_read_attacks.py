"""file_read attacked as a model (or a file it wrote) would: real files, real links, real races.

Each attack runs with both ways of opening beneath the root: ``auto`` (``openat2`` on this
kernel) and ``walk`` (the component-by-component fallback). Where the user matters (hard
links: the kernel's ``protected_hardlinks`` rule differs for root), the attack also runs as
an ordinary user created here with ``useradd``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import jarvis
from jarvis.adapters.filesystem_tools import FileReadTool
from tests.support.users import throwaway_user

KEY = "-----BEGIN OPENSSH PRIVATE KEY----- the key\n"
SWAP_READS = 3000


@pytest.fixture(params=["auto", "walk"])
def strategy(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def tool_for(root: Path, strategy: str) -> FileReadTool:
    if strategy == "auto":  # the constructor every version of the tool has
        return FileReadTool([str(root)])
    return FileReadTool([str(root)], opener="walk")


async def read(tool: FileReadTool, path: str) -> tuple[bool, str]:
    result = await tool.execute({"path": path})
    return result.success, result.content


def test_this_kernel_offers_openat2() -> None:
    """So that ``auto`` above really is the openat2 path (Linux >= 5.6)."""
    from jarvis.adapters.filesystem_tools.beneath import BeneathOpener

    if sys.platform != "linux":
        pytest.skip("openat2 is Linux-only")
    assert BeneathOpener("auto").uses_openat2
    assert not BeneathOpener("walk").uses_openat2


# -- hard links ------------------------------------------------------------------------------


async def test_a_hard_link_to_a_secret_outside_the_root_is_refused(
    tmp_path: Path, strategy: str
) -> None:
    outside = tmp_path / "home" / ".ssh"
    outside.mkdir(parents=True)
    (outside / "id_ed25519").write_text(KEY)
    root = tmp_path / "work"
    root.mkdir()
    os.link(outside / "id_ed25519", root / "notes.txt")
    ok, message = await read(tool_for(root, strategy), "notes.txt")
    assert not ok
    assert KEY not in message
    assert message.startswith("Access denied: 'notes.txt' has 2 hard links;")


@pytest.fixture(scope="module")
def ordinary_user() -> Iterator[tuple[int, int]]:
    """A throwaway user (as root), or the current one when the tests already run as a user."""
    if os.geteuid() != 0:
        yield os.getuid(), os.getgid()
        return
    with throwaway_user("jvfr") as ids:
        yield ids


_AS_USER = """
import asyncio, json, os, sys
from jarvis.adapters.filesystem_tools import FileReadTool
home = sys.argv[1]
os.makedirs(os.path.join(home, ".ssh"), mode=0o700)
key = os.path.join(home, ".ssh", "id_ed25519")
with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
    handle.write(sys.argv[2])
root = os.path.join(home, "project")
os.mkdir(root)
os.link(key, os.path.join(root, "notes.txt"))
result = asyncio.run(FileReadTool([root]).execute({"path": "notes.txt"}))
print(json.dumps({"uid": os.getuid(), "success": result.success, "content": result.content}))
"""


def _as_user(
    command: list[str], uid: int, gid: int, *, env: dict[str, str], cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``command`` as ``uid`` (switched to when running as root)."""
    root = os.geteuid() == 0
    return subprocess.run(
        command,
        env=env,
        cwd=cwd,
        user=uid if root else None,
        group=gid if root else None,
        extra_groups=[] if root else None,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _interpreter_for(uid: int, gid: int) -> str:
    """This interpreter, or the system's of the same version when the user cannot run this
    one (a venv on an interpreter under root's mode-700 home); jarvis comes from ``src``."""
    same = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, f"/usr/bin/{same}", f"/usr/local/bin/{same}"):
        try:
            probe = _as_user(
                [candidate, "-c", "import jarvis.adapters.filesystem_tools"],
                uid,
                gid,
                env={"PYTHONPATH": _SOURCE},
            )
        except OSError:
            continue
        if probe.returncode == 0:
            return candidate
    pytest.skip(f"no {same} interpreter the ordinary user may run")


_SOURCE = str(Path(jarvis.__file__).resolve().parents[1])


def test_the_hard_link_attack_as_an_ordinary_user(ordinary_user: tuple[int, int]) -> None:
    """A user's own key, hard-linked into the project the agent may read."""
    uid, gid = ordinary_user
    home = tempfile.mkdtemp(prefix="jarvis-fr-")
    try:
        os.chown(home, uid, gid)
        done = _as_user(
            [_interpreter_for(uid, gid), "-c", _AS_USER, home, KEY],
            uid,
            gid,
            env={"HOME": home, "OPENJARVIS_HOME": f"{home}/.openjarvis", "PYTHONPATH": _SOURCE},
            cwd=home,
        )
        assert done.returncode == 0, done.stderr
        outcome = json.loads(done.stdout)
        assert outcome["uid"] == uid != 0
        assert outcome["success"] is False
        assert KEY not in outcome["content"]
        assert "has 2 hard links" in outcome["content"]
    finally:
        shutil.rmtree(home, ignore_errors=True)


# -- a folder swapped for a symlink between check and open -----------------------------------


async def test_a_folder_swapped_for_a_symlink_mid_read_never_leaks(
    tmp_path: Path, strategy: str
) -> None:
    root = tmp_path / "work"
    (root / "d").mkdir(parents=True)
    (root / "d" / "file.txt").write_text("inside\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "file.txt").write_text("SECRET outside the root\n")
    (root / "evil").symlink_to(outside, target_is_directory=True)
    stop, first_swap = threading.Event(), threading.Event()
    swaps = [0]

    def swap() -> None:
        real, link, parked = root / "d", root / "evil", root / "d.real"
        while not stop.is_set():
            os.rename(real, parked)
            os.rename(link, real)  # d is now the symlink to outside
            os.rename(real, link)
            os.rename(parked, real)
            swaps[0] += 1
            first_swap.set()

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    tool = tool_for(root, strategy)
    outcomes: dict[str, int] = {}
    try:
        assert first_swap.wait(30)
        before = swaps[0]
        for _ in range(SWAP_READS):
            try:
                ok, content = await read(tool, "d/file.txt")
            except Exception as exc:  # a tool must answer, never raise: counted, then failed
                ok, content = False, f"raised {type(exc).__name__}:"
            kind = "leak" if "SECRET" in content else "inside" if ok else content.split(":")[0]
            outcomes[kind] = outcomes.get(kind, 0) + 1
        during = swaps[0] - before
    finally:
        stop.set()
        swapper.join(30)
    assert outcomes.get("leak", 0) == 0, outcomes
    assert not [kind for kind in outcomes if kind.startswith("raised")], outcomes
    assert during > 0, "the folder was never swapped while the reads ran"
    assert sum(outcomes.values()) == SWAP_READS


# -- secret folders at or above the root, and every token file -------------------------------


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        (".cache/huggingface/token", "huggingface/token"),
        (".cache/huggingface/stored_tokens", "huggingface/stored_tokens"),
        (".huggingface/token", ".huggingface/token"),
        (".git-credentials", ".git-credentials"),
        (".netrc", ".netrc"),
        (".s3cfg", ".s3cfg"),
        (".config/rclone/rclone.conf", "rclone.conf"),
        (".npmrc", ".npmrc"),
        (".pypirc", ".pypirc"),
        (".docker/config.json", ".docker/config.json"),
        (".kube/config", ".kube/config"),
        (".aws/credentials", ".aws"),
        (".ssh/id_ed25519", ".ssh"),
        (".ssh/known_hosts", ".ssh"),
        (".gnupg/pubring.kbx", ".gnupg"),
        (".config/gh/hosts.yml", ".config/gh/hosts.yml"),
        (".config/hub", ".config/hub"),
        (".boto", ".boto"),
        (".my.cnf", ".my.cnf"),
        (".passwd-s3fs", ".passwd-s3fs"),
        (".local/share/keyrings/login.keyring", ".local/share/keyrings"),
        (".openjarvis/config.toml", ".openjarvis/config.toml"),
        ("vault.kdbx", "*.kdbx"),
    ],
)
async def test_every_token_file_in_a_home_used_as_root_is_refused(
    tmp_path: Path, path: str, rule: str
) -> None:
    home = tmp_path / "home"
    (home / path).parent.mkdir(parents=True, exist_ok=True)
    (home / path).write_text("token=hf_secret\n")
    ok, message = await read(FileReadTool([str(home)]), path)
    assert (ok, message) == (
        False,
        f"Access denied: '{path}' is a secret or credential file (rule '{rule}'); "
        "file_read never reads those.",
    )


@pytest.mark.parametrize("secret_folder", [".ssh", ".gnupg", ".aws", ".password-store"])
async def test_a_root_that_is_or_lies_in_a_secret_folder_reads_nothing(
    tmp_path: Path, secret_folder: str
) -> None:
    folder = tmp_path / "home" / secret_folder
    (folder / "sub").mkdir(parents=True)
    (folder / "known_hosts").write_text("github.com ssh-ed25519 AAAA\n")
    (folder / "sub" / "notes.txt").write_text("private\n")
    for root, path in (
        (folder, "known_hosts"),
        (folder, "sub/notes.txt"),
        (folder / "sub", "notes.txt"),
    ):
        ok, message = await read(FileReadTool([str(root)]), path)
        assert not ok, (root, path, message)
        assert f"(rule '{secret_folder}')" in message


async def test_jarvis_config_dir_is_refused_wherever_the_root_is(
    tmp_path: Path, jarvis_home: Path
) -> None:
    """``$OPENJARVIS_HOME`` (set per test by conftest) holds config.toml with API keys."""
    (jarvis_home / "config.toml").write_text('[engine]\napi_key = "sk-live"\n')
    (jarvis_home / "notes.md").write_text("also jarvis's\n")
    for root, path in (
        (jarvis_home.parent, f"{jarvis_home.name}/config.toml"),
        (jarvis_home.parent, f"{jarvis_home.name}/notes.md"),
        (jarvis_home, "config.toml"),
    ):
        ok, message = await read(FileReadTool([str(root)]), path)
        assert (ok, message) == (
            False,
            f"Access denied: '{path}' is a secret or credential file (rule 'jarvis config "
            "dir'); file_read never reads those.",
        )


@pytest.mark.parametrize(
    "env",
    [
        {"OPENJARVIS_HOME": "/srv/jarvis"},
        {"OPENJARVIS_HOME": "~/jv"},
        {"XDG_DATA_HOME": "/data"},
        {"XDG_DATA_HOME": "~/.local/share"},
        {},
    ],
)
def test_the_protected_config_dir_is_the_one_the_settings_use(env: dict[str, str]) -> None:
    from jarvis.adapters.filesystem_tools.protected import jarvis_config_dir
    from jarvis.entrypoints.settings import config_dir

    assert jarvis_config_dir(env) == str(config_dir(env))


async def test_a_missing_file_below_a_secret_root_gets_the_same_answer(tmp_path: Path) -> None:
    """No existence oracle: the refusal is decided before the filesystem is asked."""
    folder = tmp_path / ".ssh"
    folder.mkdir()
    (folder / "known_hosts").write_text("github.com ssh-ed25519 AAAA\n")
    tool = FileReadTool([str(folder)])
    answers = {(await read(tool, n))[1].replace(n, "<p>") for n in ("known_hosts", "nope")}
    assert len(answers) == 1
