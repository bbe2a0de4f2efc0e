"""The container sandbox attacked for real on Podman: a hostile model, hostile mounts, a
replaced image and a jarvis killed with SIGKILL.

The scripted engine makes the model say what each attack needs (the secret in its answer,
split across stream chunks, in tool calls and results; code that reads the worker's memory);
mounts are made hostile on disk (a hard link to a file elsewhere, FIFOs and devices, a
folder swapped for a link by a thread while runs start); the image under jarvis's tag is
replaced; a real ``jarvis ask`` process is killed with SIGKILL and the process table and the
container list are polled, with a bound, until the container is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jarvis.adapters.docker_containers import ContainerSettings, DockerContainerRuntime
from jarvis.adapters.docker_containers.api import DockerApi
from jarvis.adapters.docker_containers.endpoint import discover
from jarvis.application.ask import Answer, AskQuestion, AskService
from jarvis.application.config import JarvisConfig, SandboxSettings
from jarvis.application.sandbox_mounts import load_policy
from jarvis.application.sandbox_runner import IMAGE_PYTHON, ContainerRunner
from jarvis.domain.agents.sandboxed import mount_request
from jarvis.domain.llm.completion import Completion, StreamChunk
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.ports import InferencePort
from jarvis.domain.run.updates import RunUpdate, TextDelta, ToolCallsRequested, ToolResultReady
from jarvis.domain.sandbox.runner import MountRefusedError
from jarvis.entrypoints.composition import bootstrap
from jarvis.entrypoints.sandbox_worker import EXIT_HOST_GONE
from jarvis.testing import ScriptedInference
from tests.support.podman_service import PodmanService, require_podman, running_podman_service
from tests.support.scripted_engine import Reply, ScriptedEngine, tool_call
from tests.support.users import open_directory, throwaway_user

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

SECRET = "sk-sandbox-" + uuid.uuid4().hex[:16]
BOUND = 60.0
"""Seconds any poll waits at most (a bound, not a sleep)."""


@pytest.fixture(scope="module")
def podman() -> Iterator[PodmanService]:
    require_podman()
    with running_podman_service() as service:
        yield service


@pytest.fixture(scope="module")
def image(podman: PodmanService) -> str:
    runtime = make_runtime(podman)
    try:
        return asyncio.run(runtime.ensure_image())
    finally:
        runtime.close()


def make_runtime(podman: PodmanService) -> DockerContainerRuntime:
    return DockerContainerRuntime(ContainerSettings(runtime="podman", socket=podman.url))


def service_for(
    engine: InferencePort, runtime: DockerContainerRuntime, **sandbox: object
) -> AskService:
    config = JarvisConfig(sandbox=SandboxSettings(**sandbox))  # type: ignore[arg-type]
    container = bootstrap(config, inference=engine).container
    container.persona.override(None)
    container.container_runtime.override(runtime)
    return container.ask_service()


def api_for(podman: PodmanService) -> DockerApi:
    return DockerApi(discover("podman", podman.url), ContainerSettings())


def ours(podman: PodmanService) -> list[tuple[str, str]]:
    api = api_for(podman)
    try:
        return [(c.id, c.state) for c in api.list_ours()]
    finally:
        api.close()


def poll(check: Callable[[], bool], what: str, bound: float = BOUND) -> None:
    deadline = time.monotonic() + bound
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {bound} s: {what}")
        time.sleep(0.05)


def calls(*pairs: tuple[str, dict[str, object]]) -> Completion:
    return Completion(
        content="",
        tool_calls=tuple(
            ToolCall(id=f"c{n}", name=name, arguments=args)  # type: ignore[arg-type]
            for n, (name, args) in enumerate(pairs)
        ),
        finish_reason="tool_calls",
    )


async def updates_of(service: AskService, question: AskQuestion) -> list[RunUpdate | Answer]:
    return [update async for update in service.stream(question)]


# --- a hostile model: the secret said everywhere -------------------------------------------


async def test_the_secret_said_by_the_model_never_leaves_verbatim(
    podman: PodmanService, image: str
) -> None:
    half = len(SECRET) // 2
    engine = ScriptedInference(
        [
            calls(
                ("code_interpreter", {"code": f"print('k=' + {SECRET!r})"}),
                ("think", {"thought": f"the key {SECRET}"}),
            ),
            [
                StreamChunk(content="The key is " + SECRET[:half]),
                StreamChunk(content=SECRET[half:] + ". Reversed: "),
                StreamChunk(content=SECRET[::-1]),
                StreamChunk(finish_reason="stop"),
            ],
        ]
    )
    runtime = make_runtime(podman)
    service = service_for(engine, runtime)
    updates = await updates_of(
        service,
        AskQuestion(
            question="q",
            agent="sandboxed",
            model="m",
            tools=("code_interpreter", "think"),
            agent_options={"inner": "orchestrator", "secrets": {"KEY": SECRET}},
        ),
    )
    runtime.close()
    assert SECRET not in repr(updates)
    (answer,) = [u for u in updates if isinstance(u, Answer)]
    assert answer.content.startswith("The key is [secret].")
    assert SECRET[::-1] in answer.content  # an encoded form is not recognised (documented)
    text = "".join(u.text for u in updates if isinstance(u, TextDelta))
    assert "[secret]" in text
    called = [c for u in updates if isinstance(u, ToolCallsRequested) for c in u.calls]
    assert [c.name for c in called] == ["code_interpreter", "think"]
    assert "[secret]" in json.dumps([c.arguments for c in called])
    results = [u.result for u in updates if isinstance(u, ToolResultReady)]
    assert any("k=[secret]" in r.content for r in results), results
    assert ours(podman) == []


# --- hostile code: the worker's memory ------------------------------------------------------

MEMORY_ATTACK = """
import os, json
needle = bytes.fromhex({needle!r})
found = {{}}
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    if pid == os.getpid():
        continue
    tried = {{}}
    try:
        tried["environ"] = needle in open(f"/proc/{{pid}}/environ", "rb").read()
    except OSError as exc:
        tried["environ"] = exc.errno
    try:
        hit = False
        with open(f"/proc/{{pid}}/maps") as maps, open(f"/proc/{{pid}}/mem", "rb", 0) as mem:
            for line in maps:
                span, perms = line.split()[:2]
                if not perms.startswith("r"):
                    continue
                start, end = (int(x, 16) for x in span.split("-"))
                try:
                    mem.seek(start)
                    if needle in mem.read(min(end - start, 64 << 20)):
                        hit = True
                        break
                except (OSError, ValueError, OverflowError):
                    continue
        tried["mem"] = hit
    except OSError as exc:
        tried["mem"] = exc.errno
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        tried["ptrace"] = libc.ptrace(16, pid, 0, 0) == 0 or ctypes.get_errno()
        if tried["ptrace"] is True:
            libc.ptrace(17, pid, 0, 0)
    except Exception as exc:
        tried["ptrace"] = type(exc).__name__
    found[pid] = tried
print("RESULT " + json.dumps(found))
"""


async def test_model_code_cannot_read_the_secret_out_of_the_worker(
    podman: PodmanService, image: str
) -> None:
    """The code the model writes runs as the worker's user: it tries every process it can
    see, through /proc/PID/mem, /proc/PID/environ and ptrace."""
    attack = MEMORY_ATTACK.format(needle=SECRET.encode().hex())
    engine = ScriptedInference([calls(("code_interpreter", {"code": attack})), "done"])
    runtime = make_runtime(podman)
    service = service_for(engine, runtime)
    answer = await service.ask(
        AskQuestion(
            question="q",
            agent="sandboxed",
            model="m",
            tools=("code_interpreter",),
            agent_options={"inner": "orchestrator", "secrets": {"KEY": SECRET}},
        )
    )
    runtime.close()
    (result,) = answer.tool_results
    line = next(x for x in result.content.splitlines() if x.startswith("RESULT "))
    found = json.loads(line.removeprefix("RESULT "))
    assert found, result.content  # it saw the other processes (the worker among them)
    for tried in found.values():
        assert tried["environ"] is not True, found
        assert tried["mem"] is not True, found
        assert tried["ptrace"] is not True, found


KERNEL_PROBE = """
import json, os, sys
from jarvis.entrypoints.sandbox_worker import make_undumpable
needle = bytes.fromhex({needle!r})
results = {{}}
for protect in (False, True):
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the "worker": holds the secret, then waits
        if protect:
            assert make_undumpable() == ""
        held = bytearray(needle)
        os.write(ready_w, b"1")
        __import__("time").sleep(60)
        os._exit(0)
    os.read(ready_r, 1)
    tried = {{}}
    try:
        with open(f"/proc/{{pid}}/maps") as maps, open(f"/proc/{{pid}}/mem", "rb", 0) as mem:
            hit = False
            for line in maps:
                span, perms = line.split()[:2]
                if perms.startswith("r") and "[vsyscall]" not in line:
                    start, end = (int(x, 16) for x in span.split("-"))
                    try:
                        mem.seek(start)
                        hit = hit or needle in mem.read(end - start)
                    except OSError:
                        pass
        tried["mem"] = hit
    except OSError as exc:
        tried["mem"] = exc.errno
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    tried["ptrace"] = libc.ptrace(16, pid, 0, 0) == 0 or ctypes.get_errno()
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    results["protected" if protect else "plain"] = tried
print(json.dumps(results))
"""


async def test_an_undumpable_process_keeps_its_memory_from_a_sibling_of_the_same_user(
    podman: PodmanService, image: str
) -> None:
    """The kernel's side, without the REPL's audit hook in the way: in the same kind of
    container, a child of the same user reads a dumpable process's memory and attaches to
    it, and cannot do either once it called the worker's ``make_undumpable``."""
    runtime = make_runtime(podman)
    probe = ContainerRunner(
        runtime,
        command=(IMAGE_PYTHON, "-I", "-c", KERNEL_PROBE.format(needle=SECRET.encode().hex())),
    )
    launch = await probe.launch((), run_id="kernel-probe")
    await launch.process.close_stdin()
    lines = []
    while (line := await launch.process.receive()) is not None:
        lines.append(line)
    ended = await launch.process.wait(60)
    runtime.close()
    assert lines, ended.stderr
    results = json.loads(lines[-1])
    assert results["plain"] == {"mem": True, "ptrace": True}  # the attack works unprotected
    assert results["protected"]["mem"] is not True
    assert results["protected"]["ptrace"] is not True


# --- hostile mounts ----------------------------------------------------------------------


@pytest.fixture
def allowed(tmp_path: Path) -> tuple[Path, Path]:
    """An allowlist root holding ``data`` and, outside it, a readable file."""
    root = tmp_path / "allowed"
    (root / "data").mkdir(parents=True)
    (root / "data" / "facts.txt").write_text("inside\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("OUTSIDE-MARKER\n")
    allowlist = tmp_path / "allow.json"
    allowlist.write_text(json.dumps({"roots": [{"path": str(root), "read_only": True}]}))
    for folder in (tmp_path, root, root / "data", outside):
        folder.chmod(0o755)
    return root, allowlist


def test_a_hard_link_to_a_file_elsewhere_is_refused(
    allowed: tuple[Path, Path], tmp_path: Path
) -> None:
    root, allowlist = allowed
    os.link(tmp_path / "outside" / "notes.txt", root / "data" / "innocent.txt")
    policy = load_policy(str(allowlist))
    with pytest.raises(MountRefusedError, match="hard links"):
        policy.resolve([mount_request(f"{root / 'data'}:ro")])


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
def test_fifos_sockets_and_devices_in_a_mount_are_refused(
    allowed: tuple[Path, Path], kind: str
) -> None:
    root, allowlist = allowed
    where = root / "data" / "deeper" / kind
    where.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(where)
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(where))
    else:
        try:
            os.mknod(where, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device node needs CAP_MKNOD")
    with pytest.raises(MountRefusedError, match="not a regular file or folder"):
        load_policy(str(allowlist)).resolve([mount_request(f"{root / 'data'}:ro")])


def test_a_mount_that_is_a_link_or_holds_links_through_the_cli(
    allowed: tuple[Path, Path], tmp_path: Path
) -> None:
    """A link inside is kept (the container resolves it in its own file system: the file
    elsewhere is not there); a hard link is refused, exit 2, before any container."""
    root, allowlist = allowed
    os.link(tmp_path / "outside" / "notes.txt", root / "data" / "innocent.txt")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[sandbox]\nruntime = "podman"\nsocket = "unix:///nonexistent/{uuid.uuid4().hex}"\n'
        f'mount_allowlist_path = "{allowlist}"\n'
    )
    done = cli(home, "ask", "-a", "sandboxed", "--mount", f"{root / 'data'}:ro", "q")
    assert done.returncode == 2, done.stderr
    assert "hard links" in done.stderr
    assert "Traceback" not in done.stderr


def _exchange(first: Path, second: Path) -> None:
    """Swap two names atomically (renameat2 RENAME_EXCHANGE)."""
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, rename_exchange = -100, 2
    if libc.renameat2(at_fdcwd, bytes(first), at_fdcwd, bytes(second), rename_exchange) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")


LIST_MOUNT = (
    "import os\nfor name in sorted(os.listdir('/mnt/data')):\n"
    "    print(name, open('/mnt/data/' + name).read().strip())"
)


async def test_a_folder_swapped_for_a_link_while_runs_start_never_wins(
    podman: PodmanService, image: str, allowed: tuple[Path, Path], tmp_path: Path
) -> None:
    """A thread flips the checked folder and a link to a folder outside the allowed root,
    as fast as it can, while sandboxed runs mount it: no run may see the outside folder."""
    root, allowlist = allowed
    data, swap = root / "data", root / "swap"
    swap.symlink_to(tmp_path / "outside")
    stop = threading.Event()
    flips = 0

    def flip() -> None:
        nonlocal flips
        while not stop.is_set():
            _exchange(data, swap)
            flips += 1

    runtime = make_runtime(podman)
    outcomes: dict[str, int] = {"answered": 0, "refused": 0, "won": 0}
    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    try:
        for _ in range(30):
            engine = ScriptedInference([calls(("code_interpreter", {"code": LIST_MOUNT})), "ok"])
            service = service_for(engine, runtime, mount_allowlist_path=str(allowlist))
            try:
                answer = await service.ask(
                    AskQuestion(
                        question="q",
                        agent="sandboxed",
                        model="m",
                        tools=("code_interpreter",),
                        agent_options={"inner": "orchestrator"},
                        mounts=(f"{data}:/mnt/data:ro",),
                    )
                )
            except MountRefusedError:
                outcomes["refused"] += 1
                continue
            said = answer.tool_results[0].content if answer.tool_results else ""
            outcomes["won" if "OUTSIDE-MARKER" in said else "answered"] += 1
    finally:
        stop.set()
        flipper.join(10)
        runtime.close()
    assert flips > 30
    assert outcomes["won"] == 0, outcomes
    assert outcomes["answered"] + outcomes["refused"] == 30, outcomes
    assert ours(podman) == []


SYSTEM_PYTHON = "/usr/bin/python3"
"""The attacker's interpreter (one any user may run; the tests' own may sit in root's home)."""
FLIPPER = """
import ctypes, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
flips = 0
def stop(*_):
    print(flips, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
first, second = sys.argv[1].encode(), sys.argv[2].encode()
print("flipping", flush=True)
while True:
    if libc.renameat2(-100, first, -100, second, 2) != 0:
        sys.exit("renameat2: " + str(ctypes.get_errno()))
    flips += 1
"""


def start_flipper(first: Path, second: Path, uid: int, gid: int) -> subprocess.Popen[str]:
    """The other user's process swapping ``first`` and ``second``; returned once it runs."""

    def as_user() -> None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    flipper = subprocess.Popen(
        [SYSTEM_PYTHON, "-I", "-c", FLIPPER, str(first), str(second)],
        preexec_fn=as_user,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert flipper.stdout is not None
    assert flipper.stdout.readline().strip() == "flipping"
    return flipper


async def test_another_user_swapping_their_folder_for_a_link_to_root_s_never_wins(
    podman: PodmanService, image: str
) -> None:
    """An ordinary user owns a folder inside the allowed root and swaps it, as fast as a
    process can, with a link to a private folder of root's that they cannot read: root's
    sandboxed runs mounting their folder must never see root's."""
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"{SYSTEM_PYTHON} is needed to run the other user's process")
    with open_directory("jarvis-swap-") as base, throwaway_user("jswap") as (uid, gid):
        private = base / "private"
        private.mkdir(mode=0o700)
        (private / "notes.txt").write_text("ROOT-PRIVATE-MARKER\n")
        allowed = base / "allowed"
        owned = allowed / "user"
        (owned / "data").mkdir(parents=True)
        (owned / "data" / "facts.txt").write_text("inside\n")
        (owned / "swap").symlink_to(private)
        for path in (allowed, owned, owned / "data"):
            path.chmod(0o755)
        for path in (owned, owned / "data", owned / "data" / "facts.txt", owned / "swap"):
            os.lchown(path, uid, gid)
        allowlist = base / "allow.json"
        allowlist.write_text(json.dumps({"roots": [{"path": str(allowed)}]}))

        flipper = start_flipper(owned / "data", owned / "swap", uid, gid)
        runtime = make_runtime(podman)
        outcomes = {"answered": 0, "refused": 0, "won": 0}
        try:
            for _ in range(20):
                engine = ScriptedInference(
                    [calls(("code_interpreter", {"code": LIST_MOUNT})), "ok"]
                )
                service = service_for(engine, runtime, mount_allowlist_path=str(allowlist))
                try:
                    answer = await service.ask(
                        AskQuestion(
                            question="q",
                            agent="sandboxed",
                            model="m",
                            tools=("code_interpreter",),
                            agent_options={"inner": "orchestrator"},
                            mounts=(f"{owned / 'data'}:/mnt/data:ro",),
                        )
                    )
                except MountRefusedError:
                    outcomes["refused"] += 1
                    continue
                said = answer.tool_results[0].content if answer.tool_results else ""
                outcomes["won" if "ROOT-PRIVATE-MARKER" in said else "answered"] += 1
        finally:
            flipper.terminate()
            flips = flipper.communicate(timeout=30)[0].strip()
            runtime.close()
        assert flipper.returncode == 0, flips
        assert int(flips) > 20
        assert outcomes["won"] == 0, outcomes
        assert outcomes["answered"] + outcomes["refused"] == 20, outcomes
        assert ours(podman) == []


# --- the image --------------------------------------------------------------------------


def test_an_image_put_under_jarvis_s_tag_is_refused_with_the_rebuild_command(
    podman: PodmanService, image: str, tmp_path: Path
) -> None:
    original = podman.podman("image", "inspect", "--format", "{{.Id}}", image)
    assert original.returncode == 0, original.stderr
    context = tmp_path / "impostor"
    context.mkdir()
    (context / "Containerfile").write_text(
        f"FROM {image}\nLABEL io.jarvis.content-hash={'0' * 64}\n"
    )
    built = podman.podman("build", "--network", "none", "-t", image, str(context))
    assert built.returncode == 0, built.stderr
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[sandbox]\nruntime = "podman"\nsocket = "{podman.url}"\n')
    try:
        with ScriptedEngine([Reply("hello")]) as engine:
            done = cli(home, "ask", "-a", "sandboxed", "--engine", "openai", "--base-url",
                       engine.url, "q")  # fmt: skip
            assert engine.requests == []
        assert done.returncode == 6, done.stderr
        assert "not the sandbox image jarvis built" in done.stderr
        assert f"podman rmi {image} && jarvis sandbox build" in done.stderr
        assert "Traceback" not in done.stderr
        assert ours(podman) == []
    finally:
        restored = podman.podman("tag", original.stdout.strip(), image)
        assert restored.returncode == 0, restored.stderr


# --- SIGKILL of a real jarvis -------------------------------------------------------------


def cli_env(home: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("OLLAMA", "OPENAI", "DOCKER_HOST"))
    }
    env["OPENJARVIS_HOME"] = str(home)
    return env


def cli(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        env=cli_env(home),
        timeout=timeout,
        check=False,
        cwd=str(home),
    )


def descendants(pid: int) -> set[int]:
    """The processes below ``pid`` in the process table."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            with open(f"/proc/{entry}/stat", "rb") as handle:
                parent = int(handle.read().rsplit(b")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found, stack = set(), [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


SLEEPER = "import time\nfor _ in range(600):\n    time.sleep(1)"


def start_killable_jarvis(
    podman: PodmanService, home: Path, engine: ScriptedEngine
) -> tuple[subprocess.Popen[bytes], str, int]:
    """A real ``jarvis ask`` whose sandboxed model runs code that sleeps for ten minutes;
    returns it once that code runs (seen in the process table), with its container's id
    and the container's init pid."""
    (home / "config.toml").write_text(f'[sandbox]\nruntime = "podman"\nsocket = "{podman.url}"\n')
    jarvis = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jarvis",
            "ask",
            "-a",
            "sandboxed",
            "-O",
            "inner=orchestrator",
            "--tools",
            "code_interpreter",
            "--engine",
            "openai",
            "--base-url",
            engine.url,
            "-m",
            "scripted-model",
            "q",
        ],
        env=cli_env(home),
        cwd=str(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    found: list[str] = []

    def container_up() -> bool:
        found[:] = [cid for cid, state in ours(podman) if state == "running"]
        return bool(found)

    poll(container_up, "the sandbox container of the jarvis process to run")
    api = api_for(podman)
    try:
        init = int(api.client.api.inspect_container(found[0])["State"]["Pid"])
    finally:
        api.close()

    def code_running() -> bool:
        return any("subprocess_repl" in cmdline(p) for p in descendants(init))

    poll(code_running, "the model's code to run in the container's REPL")
    return jarvis, found[0], init


def test_a_sigkilled_jarvis_leaves_no_running_container_and_the_next_one_removes_it(
    podman: PodmanService, image: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    script = [Reply(tool_calls=[tool_call("c1", "code_interpreter", {"code": SLEEPER})])]
    with ScriptedEngine(script) as engine:
        jarvis, container, init = start_killable_jarvis(podman, home, engine)
        os.kill(jarvis.pid, signal.SIGKILL)
        jarvis.wait(BOUND)
        # the worker sees its stdin end, cancels the run and exits: the container stops
        poll(lambda: not os.path.exists(f"/proc/{init}"), "the container's processes to end")
        poll(
            lambda: dict(ours(podman)).get(container) not in (None, "running"),
            "the container to stop",
        )
        api = api_for(podman)
        try:
            state = api.state(container)
        finally:
            api.close()
        # exit code 3: the worker ended because its stdin did (not the REPL's own timeout,
        # after which the run would have failed and the worker returned 0)
        assert state == (False, EXIT_HOST_GONE)
        listed = cli(home, "sandbox", "cleanup", "--dry-run", "--json")
        assert listed.returncode == 0, listed.stderr
        report = json.loads(listed.stdout)
        assert [o["id"] for o in report["orphans"]] == [container]
        assert report["orphans"][0]["removed"] is False
        assert container in dict(ours(podman))  # a dry run removes nothing
        # the next jarvis that starts a sandbox removes it first
        engine.add(Reply("fine"))
        done = cli(
            home, "ask", "-a", "sandboxed", "--engine", "openai", "--base-url", engine.url,
            "-m", "scripted-model", "q",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert ours(podman) == []


def test_jarvis_sandbox_cleanup_removes_what_a_killed_jarvis_left(
    podman: PodmanService, image: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    script = [Reply(tool_calls=[tool_call("c1", "code_interpreter", {"code": SLEEPER})])]
    with ScriptedEngine(script) as engine:
        jarvis, container, _init = start_killable_jarvis(podman, home, engine)
        os.kill(jarvis.pid, signal.SIGKILL)
        jarvis.wait(BOUND)
        done = cli(home, "sandbox", "cleanup", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [(o["id"], o["removed"]) for o in report["orphans"]] == [(container, True)]
    assert report["removed"] == 1
    assert ours(podman) == []
    again = cli(home, "sandbox", "cleanup")
    assert again.returncode == 0, again.stderr
    assert "0 orphaned sandbox containers removed" in again.stdout
    down = tmp_path / "down"
    down.mkdir()
    (down / "config.toml").write_text(
        f'[sandbox]\nruntime = "podman"\nsocket = "unix:///nonexistent/{uuid.uuid4().hex}"\n'
    )
    unavailable = cli(down, "sandbox", "cleanup", "--json")
    assert unavailable.returncode == 6, unavailable.stderr
    assert "Traceback" not in unavailable.stderr
