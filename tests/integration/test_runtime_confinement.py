"""The external runtimes' jail, attacked through the CLI with the real opencode and openhands.

The scripted engine plays a hostile model: it asks the runtime's own tools (opencode's
``bash``; openhands' ``terminal`` and ``file_editor``) to write a file in ``/tmp`` and one
in the user's home directory, and one in the workspace. Jailed (the default) only the
workspace file appears and the tool reports a read-only filesystem; with the user's
explicit ``-O confine=false`` the same commands do write outside (the control: the attack
is real). Then ``jarvis ask`` is stopped by ``SIGTERM`` and by ``SIGKILL`` while a process
the model detached (``setsid nohup``) runs: a bounded poll of the process table and of the
temp dir finds nothing of the run left. Finally the jail itself, as an ordinary user the
test creates, and a machine where no jail can be made (jarvis run where user namespaces
are forbidden): the runtime refuses to start unless told ``confine=false``.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.opencode import require_opencode
from tests.support.openhands import require_openhands
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call
from tests.support.users import open_directory, throwaway_user

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RUNTIMES = ("opencode", "openhands")
POLL_SECONDS = 30.0
"""The longest the process table and the temp dir are polled for leftovers (they go in
milliseconds; the bound only ends a failing test)."""


@pytest.fixture
def engine() -> Iterator[ScriptedEngine]:
    with ScriptedEngine([Reply("Done.")]) as scripted:
        yield scripted


class Run:
    """The folders of one CLI run: its config dir, temp dir, home directory, workspace."""

    def __init__(self, base: Path, runtime: str) -> None:
        self.runtime = runtime
        self.config = base / "config"
        self.tmp = base / "tmp"
        self.home = base / "home"
        self.workspace = base / "ws"
        for folder in (self.tmp, self.home, self.workspace):
            folder.mkdir()

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENJARVIS", "JARVIS_"))}
        env.update(OPENJARVIS_HOME=str(self.config), TMPDIR=str(self.tmp), HOME=str(self.home))
        if self.runtime == "opencode":
            env["JARVIS_OPENCODE_BIN"] = require_opencode()
        else:
            env["JARVIS_OPENHANDS_PYTHON"] = require_openhands()
        return env

    def argv(self, engine: ScriptedEngine, *extra: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "jarvis",
            "ask",
            "-a",
            self.runtime,
            "--engine",
            "openai",
            "--base-url",
            engine.url,
            "--model",
            MODEL,
            "-O",
            f"workspace={self.workspace}",
            "-O",
            "timeout=300",
            *extra,
        ]

    def private_dirs(self) -> list[str]:
        return sorted(p.name for p in self.tmp.glob("jarvis-*"))

    def processes(self) -> list[int]:
        """Every process of the run: jarvis, its reaper, the jail and everything in it
        carry this run's temp dir in their environment (TMPDIR, or a HOME inside it)."""
        marker = str(self.tmp).encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                environ = (entry / "environ").read_bytes()
                state = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if marker in environ and state not in (b"Z", b"X"):
                found.append(int(entry.name))
        return found


def shell_call(runtime: str, call_id: str, command: str) -> dict[str, object]:
    """The runtime's own shell tool running ``command``."""
    if runtime == "opencode":
        return tool_call(call_id, "bash", {"command": command, "description": "Run it"})
    return tool_call(call_id, "terminal", {"command": command})


def command_processes(argv: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().rstrip(b"\0")
        except OSError:
            continue
        if cmdline == argv:
            found.append(int(entry.name))
    return found


def wait_for(condition: Callable[[], bool], seconds: float = POLL_SECONDS) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def tool_outputs(engine: ScriptedEngine) -> str:
    """Every tool result the runtime sent back to the model."""
    texts = []
    for request in engine.requests:
        messages = request.get("messages")
        for message in messages if isinstance(messages, list) else []:
            if isinstance(message, dict) and message.get("role") == "tool":
                texts.append(json.dumps(message.get("content")))
    return "\n".join(texts)


# --- writes outside the workspace ---------------------------------------------------------


@pytest.mark.timeout(420)
@pytest.mark.parametrize("confine", [True, False], ids=["jailed", "unconfined-control"])
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_models_commands_write_only_inside_the_workspace(
    runtime: str, confine: bool, engine: ScriptedEngine, tmp_path: Path
) -> None:
    run = Run(tmp_path, runtime)
    unique = secrets.token_hex(8)
    in_tmp = Path(f"/tmp/outside-{unique}")
    in_home = run.home / f"outside-{unique}"
    edited = Path(f"/tmp/outside-edited-{unique}")
    inside = run.workspace / f"inside-{unique}"
    command = (
        f"sh -c 'echo x > {in_tmp}'; sh -c 'echo x > {in_home}'; "
        f"sh -c 'echo x > {inside}'; echo finished"
    )
    calls = [shell_call(runtime, "call_sh", command)]
    if runtime == "openhands":
        create: dict[str, object] = {"command": "create", "path": str(edited), "file_text": "x\n"}
        calls.append(tool_call("call_ed", "file_editor", create))
    engine.script = [Reply(tool_calls=calls), Reply("Done.")]
    extra = () if confine else ("-O", "confine=false")
    try:
        done = subprocess.run(
            [*run.argv(engine, "--json", *extra), "write the files"],
            env=run.env(),
            capture_output=True,
            text=True,
            timeout=360,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["metadata"]["confined"] is confine
        assert inside.read_text() == "x\n"
        written = {p for p in (in_tmp, in_home, edited) if p.exists()}
        if confine:
            assert written == set()
            assert "Read-only file system" in tool_outputs(engine)
        else:
            assert in_tmp in written
            assert in_home in written
            if runtime == "openhands":
                assert edited in written
    finally:
        for path in (in_tmp, edited):
            path.unlink(missing_ok=True)


# --- SIGTERM and SIGKILL of jarvis mid-run --------------------------------------------------


@pytest.mark.timeout(420)
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_stopped_jarvis_leaves_no_process_and_no_private_dir(
    runtime: str, stop: signal.Signals, engine: ScriptedEngine, tmp_path: Path
) -> None:
    run = Run(tmp_path, runtime)
    seconds = str(100_000 + secrets.randbelow(800_000))
    sleeper = f"sleep {seconds}"
    engine.script = [
        Reply(
            tool_calls=[shell_call(runtime, "call_bg", f"setsid nohup {sleeper} >/dev/null 2>&1 &")]
        ),
        Reply("Held.", hold=True),
    ]
    proc = subprocess.Popen(
        [*run.argv(engine), "start something in the background"],
        env=run.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    argv = b"sleep\0" + seconds.encode()
    try:
        assert engine.first_word_sent.wait(300), "the model was never asked a second time"
        assert wait_for(lambda: bool(command_processes(argv))), "the detached command never ran"
        assert run.private_dirs(), "the runtime made no private dir"
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=120)
    finally:
        engine.release()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if stop == signal.SIGTERM:
        assert proc.returncode == 130, err
        assert "Traceback" not in err
    else:
        assert proc.returncode == -signal.SIGKILL
    assert wait_for(lambda: not run.processes() and not command_processes(argv)), (
        run.processes(),
        command_processes(argv),
    )
    assert wait_for(lambda: not run.private_dirs()), run.private_dirs()


# --- the jail as an ordinary user, and where none can be made --------------------------------


def test_the_jail_holds_for_an_ordinary_user() -> None:
    """The jail's own command line (as the runtimes build it), run by a user the test
    creates: writes to /tmp and to its home directory fail, the workspace takes them;
    the same commands unjailed do write (the control)."""
    from jarvis.adapters.subprocess_repl.process_jail import ProcessJail, find_jail

    jail = find_jail()
    assert isinstance(jail, ProcessJail), jail
    unique = secrets.token_hex(8)
    with throwaway_user("jvjail") as (uid, gid), open_directory("jarvis-jail-user-") as base:
        home, workspace = base / "home", base / "ws"
        for folder in (home, workspace):
            folder.mkdir()
            os.chown(folder, uid, gid)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}

        def attempt(tag: str, jailed: bool) -> set[Path]:
            targets = [Path(f"/tmp/outside-{tag}-{unique}"), home / f"outside-{tag}"]
            inside = workspace / f"inside-{tag}"
            script = "; ".join(f"echo x > {p}" for p in [*targets, inside])
            argv = ["/bin/sh", "-c", script + "; true"]
            if jailed:
                argv = jail.command(
                    argv, workdir=str(workspace), writable=[str(workspace)], hidden=[str(home)]
                )
            done = subprocess.run(
                argv,
                env=env,
                cwd=workspace,
                user=uid,
                group=gid,
                extra_groups=[],
                capture_output=True,
                timeout=60,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            assert inside.read_text() == "x\n"
            written = {p for p in targets if p.exists()}
            for path in written:
                path.unlink()
            return written

        assert len(attempt("control", jailed=False)) == 2
        assert attempt("jailed", jailed=True) == set()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_where_no_jail_can_be_made_the_runtime_refuses_unless_told_otherwise(
    runtime: str, engine: ScriptedEngine, tmp_path: Path
) -> None:
    """jarvis run inside a bubblewrap that forbids creating user namespaces (as a host
    without them would): the run is refused with exit 6 and says how to opt out; with
    ``-O confine=false`` it runs, and says it ran unconfined."""
    from jarvis.adapters.subprocess_repl.process_jail import ProcessJail, find_jail

    jail = find_jail()
    assert isinstance(jail, ProcessJail), jail
    no_userns = [
        jail.bwrap,
        "--unshare-user",
        "--disable-userns",
        "--bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
    ]
    run = Run(tmp_path, runtime)
    refused = subprocess.run(
        [*no_userns, *run.argv(engine), "hi"],
        env=run.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 6, refused.stderr
    assert f"{runtime} was not started: its commands cannot be confined" in refused.stderr
    assert "-O confine=false" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert engine.requests == []
    allowed = subprocess.run(
        [*no_userns, *run.argv(engine, "--json", "-O", "confine=false"), "hi"],
        env=run.env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert allowed.returncode == 0, allowed.stderr
    answer = json.loads(allowed.stdout)
    assert answer["content"] == "Done."
    assert answer["metadata"]["confined"] is False


def test_the_jail_as_root_has_no_capabilities_and_shows_no_home_or_sockets(
    tmp_path: Path,
) -> None:
    """What the README says of the jail, looked at from inside as root: no capabilities
    (not even in the bounding set), the home directory, /root, /tmp and /run empty, the
    workspace writable, ``/`` read-only."""
    from jarvis.adapters.subprocess_repl.process_jail import ProcessJail, find_jail

    if os.geteuid() != 0:
        pytest.skip("the root case needs root")
    jail = find_jail()
    assert isinstance(jail, ProcessJail), jail
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = (
        "grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status; "
        f"echo listing; ls -A /root /tmp /run {Path.home()}; echo end; "
        "touch /etc/jarvis-jail-probe 2>&1; echo ok > inside"
    )
    argv = jail.command(
        ["/bin/sh", "-c", script], workdir=str(workspace), writable=[str(workspace)]
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    caps = dict(line.split(":\t") for line in done.stdout.splitlines() if line.startswith("Cap"))
    assert set(caps.values()) == {"0000000000000000"}, caps
    listing = done.stdout.split("listing\n", 1)[1].split("end\n", 1)[0]
    # the only entries: the folders leading to the workspace (its mount point)
    leading = {part for parent in workspace.parents for part in parent.parts[-1:]}
    seen = {line for line in listing.splitlines() if line and not line.endswith(":")}
    assert seen <= leading, seen
    assert "Read-only file system" in done.stdout
    assert (workspace / "inside").read_text() == "ok\n"
    assert not Path("/etc/jarvis-jail-probe").exists()
