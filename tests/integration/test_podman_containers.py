"""``DockerContainerRuntime`` against a real Podman service (its Docker-compatible API).

The service runs with a private configuration and storage (``tests/support/podman_service``);
the sandbox image is built once per session from this machine's Python, jarvis and its
dependencies, exactly as ``jarvis sandbox build`` does. Each isolation claim is checked
from inside a container, as code running there would try it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from contracts.container_contract import ContainerContract
from jarvis.adapters.docker_containers import ContainerSettings, DockerContainerRuntime
from jarvis.adapters.docker_containers.api import DockerApi
from jarvis.adapters.docker_containers.build import PYTHON_LINK, Entry, SandboxImage
from jarvis.adapters.docker_containers.endpoint import discover
from jarvis.adapters.docker_containers.options import MANAGED_LABEL, OWNER_LABEL, process_start
from jarvis.domain.errors import ContainerImageError, SandboxError
from jarvis.domain.ports import ContainerExit, ContainerExitReason, ContainerSpec, Mount
from tests.support.podman_service import PodmanService, require_podman, running_podman_service

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
SERVICE_CANARY = "JARVIS_SERVICE_CANARY"
TEST_CANARY = "JARVIS_TEST_CANARY"
ECHO = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line)\n    sys.stdout.flush()\n"


def python(code: str) -> tuple[str, ...]:
    return (PYTHON_LINK, "-I", "-c", textwrap.dedent(code))


@dataclass(frozen=True, slots=True)
class BuiltImage:
    image: SandboxImage
    reference: str
    progress: list[str]


@pytest.fixture(scope="module")
def podman() -> Iterator[PodmanService]:
    require_podman()
    with running_podman_service(extra_env={SERVICE_CANARY: "service-secret-4711"}) as service:
        yield service


def settings_for(service: PodmanService, **overrides: object) -> ContainerSettings:
    return ContainerSettings(runtime="podman", socket=service.url, **overrides)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def built(podman: PodmanService) -> BuiltImage:
    image, progress = SandboxImage(), list[str]()
    runtime = DockerContainerRuntime(settings_for(podman), image=image)
    reference = asyncio.run(runtime.ensure_image(progress.append))
    runtime.close()
    return BuiltImage(image, reference, progress)


def make_runtime(
    podman: PodmanService, built: BuiltImage, **overrides: object
) -> DockerContainerRuntime:
    return DockerContainerRuntime(settings_for(podman, **overrides), image=built.image)


def ours(podman: PodmanService) -> list[str]:
    """Every container labelled as jarvis's, as the API lists them (any state)."""
    api = DockerApi(discover("podman", podman.url), ContainerSettings())
    try:
        return [c.id for c in api.list_ours()]
    finally:
        api.close()


async def run(
    runtime: DockerContainerRuntime, spec: ContainerSpec, *, stdin: list[str] | None = None
) -> tuple[list[str], ContainerExit]:
    """Start, write ``stdin`` then EOF, read stdout to its end, wait."""
    process = await runtime.start(spec)
    for text in stdin or []:
        await process.send(text)
    await process.close_stdin()
    lines: list[str] = []
    while (line := await asyncio.wait_for(process.receive(), 120)) is not None:
        lines.append(line)
    return lines, await process.wait(120)


async def report(runtime: DockerContainerRuntime, spec: ContainerSpec) -> dict[str, object]:
    """The one JSON line a probe prints, decoded; the probe must exit with 0."""
    lines, ended = await run(runtime, spec)
    assert (ended.code, ended.reason) == (0, ContainerExitReason.EXITED), ended
    decoded: dict[str, object] = json.loads(lines[-1])
    return decoded


class TestPodmanContainerRuntime(ContainerContract[DockerContainerRuntime]):
    @pytest.fixture
    async def runtime(
        self, podman: PodmanService, built: BuiltImage
    ) -> AsyncIterator[DockerContainerRuntime]:
        runtime = make_runtime(podman, built, max_concurrent=self.MAX_CONCURRENT)
        yield runtime
        await runtime.cleanup_orphans()
        runtime.close()

    @pytest.fixture
    def echo_spec(self, built: BuiltImage) -> ContainerSpec:
        return ContainerSpec(image=built.reference, command=python(ECHO), run_id="contract")


@pytest.fixture
async def runtime(
    podman: PodmanService, built: BuiltImage
) -> AsyncIterator[DockerContainerRuntime]:
    runtime = make_runtime(podman, built)
    yield runtime
    await runtime.cleanup_orphans()
    runtime.close()


# --- the image ----------------------------------------------------------------------------


def test_the_image_is_built_with_progress_and_tagged_by_version_and_content(
    built: BuiltImage,
) -> None:
    assert re.fullmatch(r"localhost/jarvis-sandbox:0\.1\.0-[0-9a-f]{16}", built.reference)
    assert built.progress[0].startswith("Building the sandbox image")
    assert any(line.startswith("STEP") for line in built.progress)
    assert built.progress[-1].startswith(f"Built {built.reference}")


async def test_an_existing_image_is_not_built_again(
    podman: PodmanService, built: BuiltImage
) -> None:
    runtime = DockerContainerRuntime(settings_for(podman), image=SandboxImage())
    said: list[str] = []
    assert await runtime.ensure_image(said.append) == built.reference
    assert said == []
    status = await runtime.status()
    assert (status.runtime, status.available, status.image_present) == ("podman", True, True)
    assert status.endpoint == podman.url
    assert status.image == built.reference


class ChangedImage(SandboxImage):
    """The same installation plus one file: what a changed jarvis looks like to the hash."""

    def base_entries(self) -> Iterator[Entry]:
        yield from super().base_entries()
        yield Entry("/etc/jarvis-changed", 0o644, data=b"changed\n")


async def test_a_stale_image_is_rebuilt_on_first_use(
    podman: PodmanService, built: BuiltImage
) -> None:
    runtime = DockerContainerRuntime(settings_for(podman), image=ChangedImage())
    said: list[str] = []
    reference = await runtime.ensure_image(said.append)
    try:
        assert reference != built.reference
        assert reference.startswith("localhost/jarvis-sandbox:0.1.0-")
        assert said[0].startswith("Building the sandbox image")
        lines, ended = await run(
            runtime,
            ContainerSpec(
                image=reference, command=python("print(open('/etc/jarvis-changed').read())")
            ),
        )
        assert lines[0] == "changed"
        assert ended.code == 0
    finally:
        podman.podman("rmi", "--force", reference)


async def test_the_image_runs_jarvis_and_its_dependencies(
    runtime: DockerContainerRuntime, built: BuiltImage
) -> None:
    found = await report(
        runtime,
        ContainerSpec(
            image=built.reference,
            command=python("""
                import json, sys, importlib.metadata
                import jarvis.domain.ports, pydantic, httpx
                print(json.dumps({"version": importlib.metadata.version("jarvis"),
                                  "python": sys.version.split()[0],
                                  "path": [p for p in sys.path if "work" in p]}))
            """),
        ),
    )
    assert found == {"version": "0.1.0", "python": sys.version.split()[0], "path": []}


async def test_a_missing_image_is_a_typed_error(runtime: DockerContainerRuntime) -> None:
    with pytest.raises(ContainerImageError) as caught:
        await runtime.start(ContainerSpec(image="localhost/jarvis-sandbox:missing"))
    assert "jarvis sandbox build" in str(caught.value)
    assert runtime.in_use == 0


async def test_a_configured_image_that_is_missing_is_a_typed_error(
    podman: PodmanService, built: BuiltImage
) -> None:
    runtime = make_runtime(podman, built, image="localhost/nothing:here")
    with pytest.raises(ContainerImageError):
        await runtime.ensure_image()


# --- isolation, from inside ---------------------------------------------------------------


async def test_only_loopback_exists_inside(
    runtime: DockerContainerRuntime, built: BuiltImage
) -> None:
    found = await report(
        runtime,
        ContainerSpec(
            image=built.reference,
            command=python("""
                import json, os, socket
                def reach(host, port):
                    try:
                        socket.create_connection((host, port), timeout=3).close()
                        return "connected"
                    except OSError as exc:
                        return type(exc).__name__
                def resolve(name):
                    try:
                        return socket.gethostbyname(name)
                    except OSError as exc:
                        return type(exc).__name__
                print(json.dumps({"interfaces": sorted(os.listdir("/sys/class/net")),
                                  "internet": reach("1.1.1.1", 53),
                                  "dns": resolve("example.com")}))
            """),
        ),
    )
    assert found["interfaces"] == ["lo"]
    assert found["internet"] != "connected"
    assert found["dns"] != "connected"
    assert not str(found["dns"])[0].isdigit()


def host_addresses() -> list[str]:
    """This host's IPv4 addresses (loopback included), as the kernel lists them."""
    found = {"127.0.0.1"}
    with open("/proc/net/fib_trie") as trie:
        lines = trie.read().splitlines()
    for before, line in itertools.pairwise(lines):
        if "/32 host LOCAL" in line:
            found.add(before.split()[-1])
    return sorted(found)


async def test_a_host_listener_is_unreachable(
    runtime: DockerContainerRuntime, built: BuiltImage
) -> None:
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    addresses = host_addresses()
    try:
        found = await report(
            runtime,
            ContainerSpec(
                image=built.reference,
                command=python(f"""
                    import json, socket
                    out = {{}}
                    for host in {addresses!r}:
                        try:
                            socket.create_connection((host, {port}), timeout=3).close()
                            out[host] = "connected"
                        except OSError as exc:
                            out[host] = type(exc).__name__
                    print(json.dumps(out))
                """),
            ),
        )
        assert set(found) == set(addresses)
        assert "connected" not in found.values()
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody ever got through
    finally:
        listener.close()


async def test_no_privileges_and_no_new_ones(
    runtime: DockerContainerRuntime, built: BuiltImage
) -> None:
    found = await report(
        runtime,
        ContainerSpec(
            image=built.reference,
            command=python("""
                import json, os, resource
                status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
                print(json.dumps({
                    "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid()],
                    "caps": [status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")],
                    "nnp": status["NoNewPrivs"].strip(),
                    "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
                    "nproc": resource.getrlimit(resource.RLIMIT_NPROC),
                    "pid1": open("/proc/1/cmdline").read().split("\\0")[0],
                }))
            """),
        ),
    )
    assert found["ids"] == [65534] * 4
    assert found["caps"] == ["0000000000000000"] * 4
    assert found["nnp"] == "1"
    assert found["nofile"] == [1024, 1024]
    assert found["nproc"] == [8192, 8192]
    assert "catatonit" in str(found["pid1"]) or "init" in str(found["pid1"])


async def test_the_root_is_read_only_and_tmp_is_small(
    runtime: DockerContainerRuntime, built: BuiltImage
) -> None:
    found = await report(
        runtime,
        ContainerSpec(
            image=built.reference,
            tmp_mb=8,
            command=python("""
                import json
                def write(path, size):
                    try:
                        with open(path, "wb") as f:
                            f.write(b"x" * size)
                        return "written"
                    except OSError as exc:
                        return exc.errno
                print(json.dumps({"etc": write("/etc/evil", 1),
                                  "python": write("/usr/local/bin/python3", 1),
                                  "tmp": write("/tmp/small", 1024),
                                  "tmp_big": write("/tmp/big", 32 << 20)}))
            """),
        ),
    )
    assert found == {"etc": 30, "python": 30, "tmp": "written", "tmp_big": 28}  # EROFS, ENOSPC


def writable_folder(parent: Path) -> Path:
    """A folder and a file in it that anyone may write, on the host."""
    data = parent / "data"
    data.mkdir()
    (data / "notes.txt").write_text("from the host\n")
    (data / "notes.txt").chmod(0o666)
    data.chmod(0o777)
    return data


async def test_read_only_mounts_are_readable_not_writable(
    runtime: DockerContainerRuntime, built: BuiltImage, tmp_path: Path
) -> None:
    data = writable_folder(tmp_path)  # even writable on the host, read-only through the mount
    found = await report(
        runtime,
        ContainerSpec(
            image=built.reference,
            mounts=(Mount(source=str(data), target="/data", read_only=True),),
            command=python("""
                import json
                def attempt(action):
                    try:
                        action()
                        return "done"
                    except OSError as exc:
                        return exc.errno
                print(json.dumps({
                    "read": open("/data/notes.txt").read(),
                    "write": attempt(lambda: open("/data/notes.txt", "a").write("x")),
                    "create": attempt(lambda: open("/data/new", "w").write("x")),
                }))
            """),
        ),
    )
    assert found == {"read": "from the host\n", "write": 30, "create": 30}


async def test_the_host_environment_is_invisible(
    runtime: DockerContainerRuntime, built: BuiltImage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TEST_CANARY, "test-secret-0815")
    lines, ended = await run(
        runtime,
        ContainerSpec(
            image=built.reference,
            command=python("""
                import os
                print(repr(dict(os.environ)))
                for pid in os.listdir("/proc"):
                    if pid.isdigit():
                        for name in ("environ", "cmdline"):
                            try:
                                print(open(f"/proc/{pid}/{name}", "rb").read())
                            except OSError as exc:
                                print(pid, name, exc.errno)
            """),
        ),
    )
    assert ended.code == 0
    seen = "\n".join(lines)
    assert "HOME" in seen  # the probe did print the environment
    for canary in ("test-secret-0815", "service-secret-4711", TEST_CANARY, SERVICE_CANARY):
        assert canary not in seen
    assert "/work" not in seen
    assert "/root" not in seen


# --- limits -------------------------------------------------------------------------------


async def test_a_memory_bomb_is_killed_and_reported_as_out_of_memory(
    runtime: DockerContainerRuntime, built: BuiltImage
) -> None:
    lines, ended = await run(
        runtime,
        ContainerSpec(
            image=built.reference,
            memory_mb=64,
            command=python("""
                print("allocating", flush=True)
                hoard = []
                while True:
                    hoard.append(b"x" * (8 << 20))
            """),
        ),
    )
    assert lines == ["allocating"]
    assert (ended.code, ended.reason) == (137, ContainerExitReason.OUT_OF_MEMORY)
    assert runtime.in_use == 0


async def test_a_fork_bomb_is_contained(runtime: DockerContainerRuntime, built: BuiltImage) -> None:
    found = await report(
        runtime,
        ContainerSpec(
            image=built.reference,
            pids_limit=32,
            command=python("""
                import json, os, time
                children, error = 0, ""
                while children < 10000:
                    try:
                        pid = os.fork()
                    except OSError as exc:
                        error = type(exc).__name__
                        break
                    if pid == 0:
                        time.sleep(60)
                        os._exit(0)
                    children += 1
                print(json.dumps({"children": children, "error": error}), flush=True)
                os._exit(0)
            """),
        ),
    )
    assert found["error"] == "BlockingIOError"  # EAGAIN from the pids limit
    assert isinstance(found["children"], int)
    assert 0 < found["children"] < 32
    lines, ended = await run(
        runtime, ContainerSpec(image=built.reference, command=python("print('still fine')"))
    )
    assert (lines, ended.code) == (["still fine"], 0)


async def test_a_run_past_its_timeout_is_removed_and_reported(
    podman: PodmanService, runtime: DockerContainerRuntime, built: BuiltImage
) -> None:
    process = await runtime.start(
        ContainerSpec(
            image=built.reference,
            timeout=2.0,
            command=python("import time\nprint('started', flush=True)\ntime.sleep(600)"),
        )
    )
    assert await asyncio.wait_for(process.receive(), 60) == "started"
    assert process.id in ours(podman)
    ended = await asyncio.wait_for(process.wait(), 60)
    assert ended.reason is ContainerExitReason.TIMED_OUT
    assert process.id not in ours(podman)
    assert runtime.in_use == 0


async def test_exit_code_and_everything_written_before_exit_are_kept(
    runtime: DockerContainerRuntime, built: BuiltImage
) -> None:
    lines, ended = await run(
        runtime,
        ContainerSpec(
            image=built.reference,
            command=python("""
                import sys
                for n in range(2000):
                    print(n)
                sys.stderr.write("bye")
                print("no newline at the end", end="")
                sys.exit(7)
            """),
        ),
    )
    assert lines == [str(n) for n in range(2000)] + ["no newline at the end"]
    assert (ended.code, ended.reason, ended.stderr) == (7, ContainerExitReason.EXITED, "bye")


async def test_large_lines_travel_both_ways(
    runtime: DockerContainerRuntime, built: BuiltImage
) -> None:
    big = json.dumps({"text": "é" * (1 << 20)})
    lines, ended = await run(
        runtime, ContainerSpec(image=built.reference, command=python(ECHO)), stdin=[big, big]
    )
    assert lines == [big, big]
    assert ended.code == 0


async def test_an_overlong_line_is_refused_and_the_container_removed(
    podman: PodmanService, built: BuiltImage
) -> None:
    runtime = make_runtime(podman, built, max_line_bytes=64 * 1024)
    process = await runtime.start(
        ContainerSpec(
            image=built.reference,
            command=python("""
                import sys, time
                print("fine", flush=True)
                while True:
                    sys.stdout.write("x" * 65536)
                    sys.stdout.flush()
            """),
        )
    )
    assert await asyncio.wait_for(process.receive(), 60) == "fine"
    with pytest.raises(SandboxError, match="exceeds 65536 bytes"):
        await asyncio.wait_for(process.receive(), 60)
    assert (await process.wait(60)).reason is ContainerExitReason.KILLED
    assert process.id not in ours(podman)


async def test_a_spec_asking_for_the_network_is_refused(
    runtime: DockerContainerRuntime, built: BuiltImage
) -> None:
    with pytest.raises(SandboxError, match="no network"):
        await runtime.start(ContainerSpec(image=built.reference, network=True))
    assert runtime.in_use == 0


# --- many at once, and what is left behind ------------------------------------------------


async def test_at_most_five_containers_exist_under_twelve_concurrent_runs(
    podman: PodmanService, built: BuiltImage
) -> None:
    runtime = make_runtime(podman, built, max_concurrent=5)
    release, five_up = asyncio.Event(), asyncio.Event()
    up: list[int] = []
    observed: list[int] = []
    sampling = True

    async def one(number: int) -> ContainerExit:
        process = await runtime.start(
            ContainerSpec(image=built.reference, command=python(ECHO), run_id=f"c{number}")
        )
        await process.send(str(number))
        assert await asyncio.wait_for(process.receive(), 120) == str(number)
        up.append(number)
        if len(up) == 5:
            five_up.set()
        await release.wait()
        await process.close_stdin()
        return await process.wait(120)

    async def sample() -> None:
        while sampling:
            observed.append(len(await asyncio.to_thread(ours, podman)))
            await asyncio.sleep(0.05)

    sampler = asyncio.ensure_future(sample())
    runs = [asyncio.ensure_future(one(n)) for n in range(12)]
    try:
        await asyncio.wait_for(five_up.wait(), 120)
        await asyncio.sleep(1.5)  # time for more to start, were more allowed
        assert len(up) == 5
        assert len(ours(podman)) == 5
        release.set()
        ended = await asyncio.wait_for(asyncio.gather(*runs), 300)
    finally:
        sampling = False
        await sampler
        release.set()
    assert [e.code for e in ended] == [0] * 12
    assert sorted(up) == list(range(12))
    assert max(observed) == 5
    assert ours(podman) == []


def _start_and_hang(podman: PodmanService, built: BuiltImage) -> subprocess.Popen[str]:
    """A jarvis process that starts a container and then is killed without cleaning up."""
    script = textwrap.dedent(f"""
        import asyncio, sys
        from jarvis.adapters.docker_containers import ContainerSettings, DockerContainerRuntime
        from jarvis.domain.ports import ContainerSpec

        async def main():
            runtime = DockerContainerRuntime(
                ContainerSettings(runtime="podman", socket={podman.url!r}))
            process = await runtime.start(ContainerSpec(
                image={built.reference!r},
                command=("{PYTHON_LINK}", "-c", "import time; time.sleep(600)")))
            print(process.id, flush=True)
            await asyncio.sleep(600)

        asyncio.run(main())
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env
    )


async def test_a_killed_host_leaves_nothing_after_cleanup_orphans(
    podman: PodmanService, built: BuiltImage, runtime: DockerContainerRuntime
) -> None:
    host = _start_and_hang(podman, built)
    assert host.stdout is not None
    container_id = (await asyncio.wait_for(asyncio.to_thread(host.stdout.readline), 120)).strip()
    assert container_id in ours(podman)
    host.send_signal(signal.SIGKILL)
    host.wait(30)
    assert container_id in ours(podman)  # a killed host cannot clean up after itself
    assert await runtime.cleanup_orphans() == 1
    assert ours(podman) == []


async def test_cleanup_removes_never_started_leftovers_but_not_a_live_processs(
    podman: PodmanService, built: BuiltImage, runtime: DockerContainerRuntime
) -> None:
    api = DockerApi(discover("podman", podman.url), ContainerSettings())
    hostname = socket.gethostname()
    live = os.getppid()
    owners = {
        "dead": f"{hostname}:999999999:1",
        "reused-pid": f"{hostname}:{live}:0",
        "live": f"{hostname}:{live}:{process_start(live)}",
        "elsewhere": "another-host:1:1",
    }
    made = {
        name: api.client.api.create_container(
            built.reference,
            command=["/usr/local/bin/python3", "-c", "pass"],
            labels={MANAGED_LABEL: "1", OWNER_LABEL: owner},
        )["Id"]
        for name, owner in owners.items()
    }
    try:
        assert await runtime.cleanup_orphans() == 2
        assert sorted(ours(podman)) == sorted([made["live"], made["elsewhere"]])
    finally:
        for container_id in made.values():
            api.remove(container_id)
        api.close()


async def test_a_container_that_ends_frees_its_slot_without_wait(
    podman: PodmanService, built: BuiltImage
) -> None:
    runtime = make_runtime(podman, built, max_concurrent=1)
    first = await runtime.start(
        ContainerSpec(image=built.reference, command=python("print('done')"))
    )
    assert await asyncio.wait_for(first.receive(), 60) == "done"
    assert await asyncio.wait_for(first.receive(), 60) is None
    second = await asyncio.wait_for(runtime.start(
        ContainerSpec(image=built.reference, command=python("print('next')"))
    ), 60)  # fmt: skip
    assert await asyncio.wait_for(second.receive(), 60) == "next"
    assert (await first.wait(60)).code == 0
    assert (await second.wait(60)).code == 0


async def test_the_runtime_records_every_limit_and_no_log(
    podman: PodmanService, runtime: DockerContainerRuntime, built: BuiltImage
) -> None:
    process = await runtime.start(
        ContainerSpec(image=built.reference, command=python(ECHO), memory_mb=200, cpus=0.5)
    )
    api = DockerApi(discover("podman", podman.url), ContainerSettings())
    try:
        host = api.client.api.inspect_container(process.id)["HostConfig"]
    finally:
        api.close()
        await process.kill()
    assert host["LogConfig"]["Type"] == "none"
    assert host["NetworkMode"] == "none"
    assert (host["Memory"], host["MemorySwap"]) == (200 << 20, 200 << 20)
    assert host["NanoCpus"] == 500_000_000
    assert host["PidsLimit"] == 128
    assert host["ReadonlyRootfs"] is True
    assert host["Init"] is True
    assert host["AutoRemove"] is False
