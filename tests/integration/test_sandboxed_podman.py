"""The ``sandboxed`` agent for real: Podman, the locally built image, the worker inside.

Each run starts a real container with no network; the inner agent's inference is brokered
over its stdio to an engine on the host (the llama.cpp server with SmolLM2, or a scripted
engine for deterministic tool rounds). The isolation claims are checked from inside, as
model-written code would try them, and through the CLI as a subprocess.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jarvis.adapters.docker_containers import ContainerSettings, DockerContainerRuntime
from jarvis.adapters.docker_containers.api import DockerApi
from jarvis.adapters.docker_containers.endpoint import discover
from jarvis.application.ask import Answer, AskQuestion, AskService
from jarvis.application.config import JarvisConfig, SandboxSettings
from jarvis.application.sandbox_runner import IMAGE_PYTHON, ContainerRunner
from jarvis.domain.agents.sandboxed import mount_request
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.ports import InferencePort, Mount
from jarvis.domain.run.updates import TextDelta
from jarvis.domain.sandbox.runner import SandboxRunError
from jarvis.entrypoints.composition import bootstrap
from jarvis.testing import ScriptedInference
from tests.support.llama_server import LlamaServer
from tests.support.podman_service import PodmanService, require_podman, running_podman_service

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SERVICE_CANARY = "JARVIS_SANDBOX_SERVICE_CANARY"
SECRET = "sk-sandbox-secret-31337"
FACT = "The launch code word is PERIWINKLE."


@pytest.fixture(scope="module")
def podman() -> Iterator[PodmanService]:
    require_podman()
    with running_podman_service(extra_env={SERVICE_CANARY: "service-canary-value"}) as service:
        yield service


@pytest.fixture(scope="module")
def image(podman: PodmanService) -> str:
    runtime = DockerContainerRuntime(ContainerSettings(runtime="podman", socket=podman.url))
    try:
        return asyncio.run(runtime.ensure_image())
    finally:
        runtime.close()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "facts.txt").write_text(FACT + "\n")
    folder.chmod(0o755)
    (folder / "facts.txt").chmod(0o644)
    tmp_path.chmod(0o755)
    return folder


def make_runtime(podman: PodmanService, **settings: object) -> DockerContainerRuntime:
    return DockerContainerRuntime(
        ContainerSettings(runtime="podman", socket=podman.url, **settings)  # type: ignore[arg-type]
    )


def service_for(
    engine: InferencePort, runtime: DockerContainerRuntime, **sandbox: object
) -> AskService:
    config = JarvisConfig(sandbox=SandboxSettings(**sandbox))  # type: ignore[arg-type]
    container = bootstrap(config, inference=engine).container
    container.persona.override(None)
    container.container_runtime.override(runtime)
    return container.ask_service()


def ours(podman: PodmanService) -> list[str]:
    api = DockerApi(discover("podman", podman.url), ContainerSettings())
    try:
        return [c.id for c in api.list_ours()]
    finally:
        api.close()


def calls(*pairs: tuple[str, dict[str, object]]) -> Completion:
    return Completion(
        content="",
        tool_calls=tuple(
            ToolCall(id=f"c{n}", name=name, arguments=args)  # type: ignore[arg-type]
            for n, (name, args) in enumerate(pairs)
        ),
        finish_reason="tool_calls",
    )


async def raw_probe(runner: ContainerRunner, mounts: tuple[Mount, ...], code: str) -> list[str]:
    """Run ``code`` in a sandbox container exactly as the runner starts them (same image,
    limits, mounts and isolation), with the image's Python instead of the worker."""
    probing = ContainerRunner(
        runner.containers, limits=runner.limits, command=(IMAGE_PYTHON, "-I", "-c", code)
    )
    launch = await probing.launch(mounts, run_id="probe")
    await launch.process.close_stdin()
    lines = []
    while (line := await launch.process.receive()) is not None:
        lines.append(line)
    await launch.process.wait(60)
    return lines


PROBE = textwrap.dedent(
    """
    import os, json
    found = {}
    lines = open("/proc/net/dev").readlines()[2:]
    found["interfaces"] = sorted(line.split(":")[0].strip() for line in lines)
    found["uid"] = os.getuid()
    found["env"] = sorted(os.environ)
    found["cmdline1"] = open("/proc/1/cmdline", "rb").read().decode(errors="replace")
    found["environ"] = open("/proc/self/environ", "rb").read().decode(errors="replace")
    try:
        open("/mnt/data/new.txt", "w")
        found["write"] = "written"
    except OSError as exc:
        found["write"] = exc.errno
    try:
        open("/usr/x", "w")
        found["root_write"] = "written"
    except OSError as exc:
        found["root_write"] = exc.errno
    print(json.dumps(found))
    """
)


async def test_a_sandboxed_orchestrator_answers_from_a_read_only_mount(
    podman: PodmanService, image: str, data: Path
) -> None:
    engine = ScriptedInference(
        [
            calls(
                ("file_read", {"path": "/mnt/data/facts.txt"}),
                ("code_interpreter", {"code": PROBE}),
            ),
            "The code word is PERIWINKLE.",
        ]
    )
    runtime = make_runtime(podman)
    service = service_for(engine, runtime)
    answer = await service.ask(
        AskQuestion(
            question="What is the code word?",
            agent="sandboxed",
            model="m",
            tools=("file_read", "code_interpreter"),
            agent_options={"inner": "orchestrator", "secrets": {"API_TOKEN": SECRET}},
            mounts=(f"{data}:ro",),
        )
    )
    runtime.close()
    assert answer.content == "The code word is PERIWINKLE."
    read, probe = answer.tool_results
    assert read.success, read.content
    assert FACT in read.content
    found = json.loads(probe.content.strip().splitlines()[-1])
    assert found["interfaces"] == ["lo"]  # no network but its own loopback
    assert found["uid"] == 65534
    assert found["write"] != "written"  # refused (the REPL's audit hook answers first)
    assert found["root_write"] != "written"
    assert SERVICE_CANARY not in found["env"]
    assert "API_TOKEN" not in found["env"]
    assert SECRET not in found["cmdline1"] + found["environ"]
    assert answer.metadata["sandbox"]["network"] == "none"  # type: ignore[index,call-overload]
    assert ours(podman) == []  # removed after the run
    # the same container, without the REPL's hook: the kernel refuses the writes (EROFS)
    runtime = make_runtime(podman)
    runner = ContainerRunner(runtime)
    writes = textwrap.dedent(
        """
        for path in ("/mnt/data/new.txt", "/mnt/data/facts.txt", "/usr/x", "/etc/passwd"):
            try:
                open(path, "a").write("x")
                print(path, "written")
            except OSError as exc:
                print(path, exc.errno)
        """
    )
    (data / "facts.txt").chmod(0o666)  # writable by anyone: only the read-only mount stops it
    lines = await raw_probe(runner, runner.check_mounts([mount_request(f"{data}:ro")]), writes)
    runtime.close()
    codes = [line.rsplit(" ", 1)[1] for line in lines]
    assert codes[:3] == ["30", "30", "30"], lines  # EROFS
    assert codes[3] in ("13", "30"), lines  # /etc/passwd: not even the permission to try
    assert (data / "facts.txt").read_text() == FACT + "\n"


async def test_brokered_to_the_llama_server_which_the_container_cannot_reach(
    podman: PodmanService, image: str, data: Path, llama_server: LlamaServer
) -> None:
    from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine

    engine = OpenAICompatibleEngine(llama_server.base_url, engine_id="openai", timeout=120)
    runtime = make_runtime(podman)
    service = service_for(engine, runtime)
    streamed: list[str] = []
    final: Answer | None = None
    async for update in service.stream(
        AskQuestion(
            question="Say hello.",
            agent="sandboxed",
            model=llama_server.model,
            max_tokens=16,
            temperature=0.0,
            tools=("file_read",),
            agent_options={"inner": "orchestrator"},
            mounts=(f"{data}:ro",),
        )
    ):
        if isinstance(update, TextDelta):
            streamed.append(update.text)
        elif isinstance(update, Answer):
            final = update
    assert final is not None
    assert final.turns >= 1
    if final.content:  # streamed through the container as it was generated
        assert streamed
    # the same kind of container cannot reach that server (nor anything) directly
    port = int(llama_server.base_url.rsplit(":", 1)[1].split("/")[0])
    probe = textwrap.dedent(
        f"""
        import socket
        for host in ("127.0.0.1", "10.0.2.2", "host.containers.internal", "1.1.1.1"):
            try:
                socket.create_connection((host, {port}), timeout=2).close()
                print(host, "REACHED")
            except OSError as exc:
                print(host, "unreachable", type(exc).__name__)
        """
    )
    lines = await raw_probe(ContainerRunner(runtime), (), probe)
    runtime.close()
    await engine.aclose()
    assert len(lines) == 4
    assert all("unreachable" in line for line in lines), lines


async def test_memory_and_thread_bombs_are_contained(podman: PodmanService, image: str) -> None:
    bomb = "x = bytearray(4000 * 1024 * 1024)\nx[::4096] = b'1' * len(x[::4096])"
    threads = textwrap.dedent(
        """
        import threading, time
        n = 0
        try:
            while True:
                threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
                n += 1
        except RuntimeError as exc:
            print("stopped after", n, "threads:", exc)
        """
    )
    engine = ScriptedInference(
        [
            calls(("code_interpreter", {"code": bomb})),
            calls(("code_interpreter", {"code": threads})),
            "done",
        ]
    )
    runtime = make_runtime(podman)
    service = service_for(engine, runtime, memory_mb=256, pids=64)
    try:
        answer = await service.ask(
            AskQuestion(
                question="q",
                agent="sandboxed",
                model="m",
                tools=("code_interpreter",),
                agent_options={"inner": "orchestrator"},
            )
        )
    except SandboxRunError as exc:  # the whole container was killed: reported as such
        reason = exc.reason
        assert reason == "out_of_memory"
    else:
        memory, spawned = answer.tool_results
        assert not memory.success
        assert "stopped after" in spawned.content
        assert int(spawned.content.split("stopped after")[1].split()[0]) < 64
    runtime.close()
    assert ours(podman) == []


async def test_a_run_past_its_timeout_is_removed_and_reported(
    podman: PodmanService, image: str
) -> None:
    engine = ScriptedInference(
        [calls(("code_interpreter", {"code": "import time\ntime.sleep(600)"})), "late"]
    )
    runtime = make_runtime(podman)
    service = service_for(engine, runtime, timeout=4.0)
    started = time.monotonic()
    with pytest.raises(SandboxRunError, match="timeout") as raised:
        await service.ask(
            AskQuestion(
                question="q",
                agent="sandboxed",
                model="m",
                tools=("code_interpreter",),
                agent_options={"inner": "orchestrator"},
            )
        )
    assert raised.value.reason == "timed_out"
    assert time.monotonic() - started < 120  # not the 600 s asked for (a margin for load)
    runtime.close()
    assert ours(podman) == []


async def test_at_most_max_concurrent_containers_under_12_runs(
    podman: PodmanService, image: str
) -> None:
    runtime = make_runtime(podman, max_concurrent=5)
    engine = ScriptedInference(["fine"], latency=0.3)
    service = service_for(engine, runtime)
    peak = 0
    done = asyncio.Event()

    async def watch() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, runtime.in_use)
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch())
    answers = await asyncio.gather(
        *(
            service.ask(AskQuestion(question=f"q{n}", agent="sandboxed", model="m"))
            for n in range(12)
        )
    )
    done.set()
    await watcher
    runtime.close()
    assert [a.content for a in answers] == ["fine"] * 12
    assert 1 < peak <= 5
    assert ours(podman) == []


HOST_SCRIPT = """
import asyncio, sys
sys.path.insert(0, {root!r})
from tests.integration.test_sandboxed_podman import make_runtime, service_for
from tests.support.podman_service import PodmanService
from jarvis.application.ask import AskQuestion
from jarvis.testing import ScriptedInference
from pathlib import Path

async def main():
    service = PodmanService(socket_path=Path({sock!r}), env={{}}, base=Path("/"))
    runtime = make_runtime(service)
    engine = ScriptedInference(["never"], latency=600)
    svc = service_for(engine, runtime)
    task = asyncio.ensure_future(svc.ask(AskQuestion(question="q", agent="sandboxed", model="m")))
    while runtime.in_use == 0 or not engine.requests:
        await asyncio.sleep(0.05)
    print("running", flush=True)
    await task

asyncio.run(main())
"""


def test_a_killed_host_leaves_no_container_after_cleanup(podman: PodmanService, image: str) -> None:
    script = HOST_SCRIPT.format(root=str(ROOT), sock=str(podman.socket_path))
    host = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert host.stdout is not None
    assert host.stdout.readline().strip() == "running"
    assert len(ours(podman)) == 1
    os.kill(host.pid, signal.SIGKILL)
    host.wait(30)
    runtime = make_runtime(podman)
    assert asyncio.run(runtime.cleanup_orphans()) == 1
    runtime.close()
    assert ours(podman) == []


# --- the CLI --------------------------------------------------------------------------------


def cli(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("OLLAMA", "OPENAI", "DOCKER_HOST"))
    }
    env["OPENJARVIS_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
        cwd=str(home),
    )


def test_the_cli_runs_a_sandboxed_orchestrator(
    podman: PodmanService, image: str, data: Path, llama_server: LlamaServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[sandbox]\nruntime = "podman"\nsocket = "{podman.url}"\n')
    built = cli(home, "sandbox", "build")  # at once when present: the tree may have changed
    assert built.returncode == 0, built.stderr
    reference = built.stdout.strip()
    assert reference.startswith("localhost/jarvis-sandbox:")
    status = cli(home, "sandbox", "status")
    assert status.returncode == 0, status.stderr
    assert "podman" in status.stdout
    assert f"{reference} (present)" in status.stdout
    done = cli(
        home,
        "ask",
        "-a",
        "sandboxed",
        "-O",
        "inner=orchestrator",
        "--tools",
        "file_read",
        "--mount",
        f"{data}:ro",
        "--engine",
        "openai",
        "--base-url",
        llama_server.base_url,
        "-m",
        llama_server.model,
        "--max-tokens",
        "16",
        "--json",
        "What is in facts.txt?",
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["turns"] >= 1
    refused = cli(
        home,
        "ask",
        "-a",
        "sandboxed",
        "--mount",
        str(home),
        "--engine",
        "openai",
        "--base-url",
        llama_server.base_url,
        "q",
    )
    assert refused.returncode == 2  # the config dir holds config.toml: refused before start
    assert "Refused to mount" in refused.stderr


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ('socket = "unix:///nonexistent/podman.sock"', ""),
        ('image = "localhost/jarvis-no-such-image:1"', "does not exist"),
    ],
)
def test_no_runtime_or_no_image_is_exit_6(
    podman: PodmanService, image: str, tmp_path: Path, stub_server: object, config: str, said: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    socket_line = "" if "socket" in config else f'socket = "{podman.url}"\n'
    (home / "config.toml").write_text(f'[sandbox]\nruntime = "podman"\n{socket_line}{config}\n')
    url = getattr(stub_server, "url")  # noqa: B009
    done = cli(home, "ask", "-a", "sandboxed", "--engine", "openai", "--base-url", url, "q")
    assert done.returncode == 6, done.stderr
    assert "Traceback" not in done.stderr
    assert said in done.stderr
    if "socket" in config:
        status = cli(home, "sandbox", "status")
        assert status.returncode == 6
        assert "no container runtime" in status.stderr
